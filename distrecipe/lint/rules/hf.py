"""HF TrainingArguments JSON beside the ds_config it names (`"deepspeed": "ds_config.json"`)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from distrecipe.engines.accelerate import fsdp1_strategy, version_number
from distrecipe.engines.axolotl import UNKNOWN
from distrecipe.engines.axolotl import trainer_arguments as axolotl_arguments
from distrecipe.engines.hf import REMOVED, SCRIPT_FIELDS, defaults, field_release
from distrecipe.engines.native import ds_reference
from distrecipe.engines.tables import label, training_arguments
from distrecipe.keys import integer
from distrecipe.lint.rule import Problem
from distrecipe.lint.workspace import Source
from distrecipe.source import KeyPath


def deepspeed_mismatch(src: Source) -> Iterator[Problem]:
    """TrainingArguments and the ds_config it names disagree on a value the Trainer matches.

    The Trainer fills each `"auto"` of the ds_config from TrainingArguments, and
    collects every concrete value that differs (micro-batch, accumulation, the train
    batch = world × micro × accumulation, clipping, optimizer lr/betas/eps/weight
    decay, fp16/bf16), raising "Please correct the following DeepSpeed config values
    that mismatch TrainingArguments values" only when training starts, on every rank.
    It compares without type coercion, so `"8"` and `8` differ too. Axolotl and
    LLaMA-Factory build the Trainer from their YAML, so theirs are checked the same way:
    Axolotl's `micro_batch_size` is `per_device_train_batch_size`, and its `bf16: auto`
    is what the GPU has (never a contradiction); their `deepspeed:` path is opened from
    the directory the tool runs in, the repository's root (outside a checkout: the linted
    file the path names, else the nearest directory above the YAML that holds it).

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
    ds = src.workspace.companion(src.path, ref, beside=src.kind == "hf") if ref else None
    if ds is None:
        return
    view = trainer_view(src)
    args = {key: value for key, (value, _) in view.items()}
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
    ranks = ds.ranks  # the ds_config's one world in this run (`Workspace.worlds`), whoever names it
    if ranks is not None and micro is not None and accumulation is not None:
        total = ranks * micro * accumulation
        pairs.append((("train_batch_size",), "per_device_train_batch_size", total))
    for ds_path, key, expected in pairs:
        written = ds.get(*ds_path, default="auto")
        # None: a value a launch script leaves to a `$VAR` from outside, never a default;
        # UNKNOWN: one the machine decides (Axolotl's `bf16: auto`)
        values = expected if isinstance(expected, list) else [expected]
        if written == "auto" or written == expected or any(v is None or v is UNKNOWN for v in values):
            continue
        at = view[key][1]
        origin = "" if ds_path != ("train_batch_size",) else f" (world {ranks} × micro × accumulation)"
        via = ("TrainingArguments" if src.kind != "axolotl" or at == ("deepspeed",)
               else f"{at[0]} (Axolotl's TrainingArguments {key})")
        yield Problem(at, f"{'.'.join(ds_path)} is {written!r} in {ds.path.name} but {expected!r} from "
                          f"{via}{origin}: the Trainer refuses the mismatch when training starts")


def scheduler_overridden(src: Source) -> Iterator[Problem]:
    """`lr_scheduler_type` beside a ds_config with its own `scheduler`: DeepSpeed's wins, silently.

    The HF Trainer builds its own learning-rate schedule only when the ds_config has no
    `scheduler` section; with one, it hands DeepSpeed a `DummyScheduler` and DeepSpeed
    builds the section's (`deepspeed_optim_sched`), so `lr_scheduler_type: cosine` never
    takes effect: transformers' ZeRO templates carry `WarmupLR`, which holds the learning
    rate constant after the warm-up. Reported at the ds_config's `scheduler` key.

    Fails: hf
    ```json
    {"output_dir": "out", "lr_scheduler_type": "cosine", "deepspeed": "ds_config.json"}
    ```
    ```json ds_config.json
    {"train_micro_batch_size_per_gpu": "auto", "zero_optimization": {"stage": 2},
     "scheduler": {"type": "WarmupLR", "params": {"warmup_num_steps": "auto"}}}
    ```

    Passes: hf
    ```json
    {"output_dir": "out", "lr_scheduler_type": "cosine", "deepspeed": "ds_config.json"}
    ```
    ```json ds_config.json
    {"train_micro_batch_size_per_gpu": "auto", "zero_optimization": {"stage": 2}}
    ```

    Fix: delete the ds_config's `scheduler` section (the Trainer's schedule then runs), or
    `lr_scheduler_type`, whichever is not meant.
    """
    ref = ds_reference(src.kind, src.data)
    written = src.get("lr_scheduler_type")
    if ref is None or not isinstance(written, str) or "lr_scheduler_type" not in src.data:
        return
    ds = src.workspace.companion(src.path, ref, beside=src.kind == "hf")
    if ds is None or not isinstance(ds.data.get("scheduler"), dict):
        return
    kind = ds.section("scheduler").get("type", "of no type")
    said = src.doc.where(("lr_scheduler_type",), key=True)
    yield Problem((), f"scheduler {kind} in {ds.path.name} wins over lr_scheduler_type {written} "
                      f"({src.path.name}:{said.line}): the HF Trainer hands DeepSpeed the ds_config's "
                      f"scheduler whenever it has one, and never builds the {written} schedule; delete the "
                      "scheduler section, or lr_scheduler_type", where=ds.doc.where(("scheduler",), key=True))


def trainer_view(src: Source) -> dict[str, tuple[Any, KeyPath]]:
    """The TrainingArguments the Trainer matches against a ds_config, as this file sets
    them: field → (value, where the file says it, else where it names the ds_config).
    A TrainingArguments or LLaMA-Factory file uses the Trainer's names; Axolotl its own."""
    if src.kind == "axolotl":
        return {name: (value, (key,) if key else ("deepspeed",))
                for name, (value, key) in axolotl_arguments(src.data).items()}
    return {key: (src.get(key, default=default), (key,) if key in src.data else ("deepspeed",))
            for key, default in defaults().items()}


def best_model_strategies(src: Source) -> Iterator[Problem]:
    """`load_best_model_at_end` with evaluation and saving on different schedules.

    The best checkpoint can only be loaded if one was saved at each evaluation, so
    `TrainingArguments.__post_init__` raises "--load_best_model_at_end requires the
    save and eval strategy to match" unless `eval_strategy` equals `save_strategy`
    (defaults `no` and `steps`) or `save_strategy` is `best`. The usual cause in an
    older file is `evaluation_strategy`: transformers 5 no longer has it, so
    `eval_strategy` stays `no`.

    Fails: hf
    ```json
    {"output_dir": "out", "evaluation_strategy": "steps", "load_best_model_at_end": true}
    ```

    Passes: hf
    ```json
    {"output_dir": "out", "eval_strategy": "steps", "load_best_model_at_end": true}
    ```

    Fix: the same `eval_strategy` as `save_strategy`, or `save_strategy: best`.
    """
    if src.get("load_best_model_at_end") is not True:
        return
    evaluate = str(src.get("eval_strategy", default="no")).lower()
    save = str(src.get("save_strategy", default="steps")).lower()
    if save == "best" or evaluate == save:
        return
    why = ""
    if "eval_strategy" not in src.data and "evaluation_strategy" in src.data \
            and "evaluation_strategy" not in training_arguments():
        why = f" (evaluation_strategy is no TrainingArguments field in {label('hf')}: write eval_strategy)"
    at = ("load_best_model_at_end",)
    yield Problem(at, f"load_best_model_at_end with eval_strategy {evaluate} and save_strategy {save}{why}: "
                      "TrainingArguments refuses it (\"requires the save and eval strategy to match\")")


TRUTH_VALUES = ("y", "yes", "t", "true", "on", "1", "n", "no", "f", "false", "off", "0")
"""What Accelerate's `str_to_bool` reads (lower-cased); anything else raises."""


def fsdp_reshard_version(src: Source) -> Iterator[Problem]:
    """An `fsdp_config.reshard_after_forward` in the other FSDP version's spelling.

    The Trainer reads `fsdp_config["version"]` (`fsdp_version` is the same key, its `fsdp_`
    prefix stripped; judged only where written, since its default moved to 2) and builds
    Accelerate's plugin from it (`_process_fsdp_args`): under version 2 `reshard_after_forward` is a boolean
    (`str_to_bool` raises "invalid truth value full_shard"), under version 1 the sharding
    strategy by name (`full_shard`, `shard_grad_op`, `hybrid_shard`, `hybrid_shard_zero2`,
    `no_shard`), and a boolean there fails in the plugin (`ShardingStrategy["TRUE"]`, a
    KeyError) before training starts.

    Fails: hf
    ```json
    {"output_dir": "out", "fsdp": true, "fsdp_config": {"version": 1, "reshard_after_forward": true}}
    ```

    Passes: hf
    ```json
    {"output_dir": "out", "fsdp": true, "fsdp_config": {"version": 1, "reshard_after_forward": "full_shard"}}
    ```

    Fix: the version's spelling: `true`/`false` under 2, a strategy name under 1.
    """
    config = src.data.get("fsdp_config")
    if not src.data.get("fsdp") or not isinstance(config, dict) or "reshard_after_forward" not in config:
        return
    version = version_number(config.get("version", config.get("fsdp_version")))
    value = config["reshard_after_forward"]
    at = ("fsdp_config", "reshard_after_forward")
    written = f"fsdp_config.reshard_after_forward {json.dumps(value)}"
    if version == 1 and fsdp1_strategy(value) is None:
        yield Problem(at, f"{written} under fsdp_config version 1: FSDP1 reads a sharding strategy "
                          "(full_shard, shard_grad_op, hybrid_shard, hybrid_shard_zero2, no_shard); the "
                          "Trainer's plugin refuses anything else")
    elif version == 2 and str(value).lower() not in TRUTH_VALUES:
        yield Problem(at, f"{written} under fsdp_config version 2: FSDP2 reads true or false (str_to_bool); "
                          "a sharding strategy is FSDP1's spelling (fsdp_config version 1)")


def removed_field(src: Source) -> Iterator[Problem]:
    """A TrainingArguments field the judging transformers release lacks: removed, or added later.

    The Trainer never reads it, so what it asked for does not happen (a renamed field's
    replacement keeps its default), and `HfArgumentParser` refuses a file with a key no
    dataclass of the script takes ("Some keys are not used by the HfArgumentParser").
    A warning, not an error, where lint cannot tell how the file is read: a script's own
    dataclass may still take the name (where it can tell, DR366). Which release has the
    field is read from the tables of every release here.

    Fails: hf
    ```json
    {"output_dir": "out", "per_gpu_train_batch_size": 4, "dataset_mixer": {"ultrachat": 1.0}}
    ```

    Passes: hf
    ```json
    {"output_dir": "out", "per_device_train_batch_size": 4, "dataset_mixer": {"ultrachat": 1.0}}
    ```

    Fix: the replacing field the message names, or delete the key.
    """
    if _parser_reads(src) is not None:
        return  # DR366
    for key, said in _removed(src):
        yield Problem((key,), f"{key} is no TrainingArguments field in {label('hf')} ({said}): "
                              "the Trainer never reads it", key=True)


def removed_field_refused(src: Source) -> Iterator[Problem]:
    """A removed TrainingArguments field in a file `HfArgumentParser` reads: the job does not start.

    Trainer scripts read a JSON or YAML file with `HfArgumentParser.parse_json_file` or
    `parse_yaml_file`, which refuse a key no dataclass of the script takes ("Some keys
    are not used by the HfArgumentParser"), on every rank, before training. Lint knows
    the file is read so when a launch script passes it as the program's sole argument
    (the examples' `if len(sys.argv) == 2 and sys.argv[1].endswith(".json")`), or when
    it holds no key but TrainingArguments' and those of the dataclasses scripts parse
    beside them (transformers' examples' `ModelArguments` and `DataTrainingArguments`,
    TRL's `ScriptArguments` and `ModelConfig`), none of which takes the removed name.
    Elsewhere it is DR362's warning.

    Fails: hf
    ```json
    {"model_name_or_path": "gpt2", "dataset_name": "wikitext", "output_dir": "out",
     "evaluation_strategy": "steps"}
    ```

    Passes: hf
    ```json
    {"model_name_or_path": "gpt2", "dataset_name": "wikitext", "output_dir": "out", "eval_strategy": "steps"}
    ```

    Fix: the replacing field the message names, or delete the key.
    """
    how = _parser_reads(src)
    if how is None:
        return
    for key, said in _removed(src):
        yield Problem((key,), f"{key} is no TrainingArguments field in {label('hf')} ({said}), and "
                              f"HfArgumentParser reads this file ({how}): it refuses the key (\"Some keys "
                              "are not used by the HfArgumentParser\") and the job does not start", key=True)


def _removed(src: Source) -> Iterator[tuple[str, str]]:
    """Each key of the file that is a TrainingArguments field of another release only, and
    what the releases say of it."""
    fields = training_arguments()
    for key in src.data:
        if not isinstance(key, str) or key in fields:
            continue
        when = field_release(key)
        if key not in REMOVED and when is None:
            continue
        instead = REMOVED.get(key)
        use = (f"use {instead}" if instead else "nothing replaces it") if key in REMOVED else ""
        yield key, "; ".join(part for part in (when or "removed", use) if part)


def _parser_reads(src: Source) -> str | None:
    """How lint knows `HfArgumentParser` reads this file with no dataclass taking a removed
    field, or None: a launch passes it alone, or it holds only known dataclasses' keys."""
    if src.path.suffix.lower() not in (".json", ".yaml", ".yml") or src.within:
        return None
    alone = src.workspace.references.passed_alone(src.path)
    if alone is not None:
        return f"the program's sole argument in {alone}"
    fields = training_arguments()
    others = [key for key in src.data if key not in fields and key not in SCRIPT_FIELDS
              and not (key in REMOVED or field_release(key) is not None)]
    if not others:
        return "it holds only TrainingArguments and the example scripts' dataclass keys"
    return None
