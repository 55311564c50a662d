"""HF TrainingArguments JSON beside the ds_config it names (`"deepspeed": "ds_config.json"`)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from distrecipe.engines.hf import DEFAULTS
from distrecipe.engines.native import ds_reference
from distrecipe.keys import integer
from distrecipe.lint.rule import Problem, Source


def deepspeed_mismatch(src: Source) -> Iterator[Problem]:
    """TrainingArguments and the ds_config it names disagree on a value the Trainer matches.

    The Trainer fills each `"auto"` of the ds_config from TrainingArguments, and
    collects every concrete value that differs (micro-batch, accumulation, the train
    batch = world × micro × accumulation, clipping, optimizer lr/betas/eps/weight
    decay, fp16/bf16), raising "Please correct the following DeepSpeed config values
    that mismatch TrainingArguments values" only when training starts, on every rank.
    It compares without type coercion, so `"8"` and `8` differ too.

    Fails: hf
    ```json
    {"output_dir": "out", "per_device_train_batch_size": 4, "deepspeed": "ds_config.json"}
    ```
    ```json ds_config.json
    {"train_micro_batch_size_per_gpu": 2, "zero_optimization": {"stage": 2}}
    ```

    Passes: hf
    ```json
    {"output_dir": "out", "per_device_train_batch_size": 4, "deepspeed": "ds_config.json"}
    ```
    ```json ds_config.json
    {"train_micro_batch_size_per_gpu": "auto", "zero_optimization": {"stage": 2}}
    ```

    Fix: make them equal, or write `"auto"` in the ds_config.
    """
    ref = ds_reference(src.kind, src.data)
    ds = src.workspace.companion(src.path, ref) if ref else None
    if ds is None:
        return
    args = {key: src.get(key, default=default) for key, default in DEFAULTS.items()}
    pairs: list[tuple[tuple[str, ...], str, Any]] = [
        (("train_micro_batch_size_per_gpu",), "per_device_train_batch_size",
         args["per_device_train_batch_size"]),
        (("gradient_accumulation_steps",), "gradient_accumulation_steps",
         args["gradient_accumulation_steps"]),
        (("gradient_clipping",), "max_grad_norm", args["max_grad_norm"]),
        (("optimizer", "params", "lr"), "learning_rate", args["learning_rate"]),
        (("optimizer", "params", "betas"), "adam_beta1", [args["adam_beta1"], args["adam_beta2"]]),
        (("optimizer", "params", "eps"), "adam_epsilon", args["adam_epsilon"]),
        (("optimizer", "params", "weight_decay"), "weight_decay", args["weight_decay"]),
        (("fp16", "enabled"), "fp16", args["fp16"]),
        (("bf16", "enabled"), "bf16", args["bf16"]),
    ]
    micro, accumulation = (integer(args[key]) for key in ("per_device_train_batch_size",
                                                          "gradient_accumulation_steps"))
    if src.world is not None and micro is not None and accumulation is not None:
        total = src.world * micro * accumulation
        pairs.append((("train_batch_size",), "per_device_train_batch_size", total))
    for ds_path, key, expected in pairs:
        written = ds.get(*ds_path, default="auto")
        # None: a value a launch script leaves to a `$VAR` from outside, never a default
        unknown = expected is None or (isinstance(expected, list) and None in expected)
        if written == "auto" or written == expected or unknown:
            continue
        at = (key,) if key in src.data else ("deepspeed",)
        origin = "" if ds_path != ("train_batch_size",) else f" (world {src.world} × micro × accumulation)"
        yield Problem(at, f"{'.'.join(ds_path)} is {written!r} in {ds.path.name} but {expected!r} from "
                          f"TrainingArguments{origin}: the Trainer refuses the mismatch when training starts")
