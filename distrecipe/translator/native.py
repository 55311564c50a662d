"""A recipe's `native` section: merged into each engine's output, and held to the recipe.

`native` carries engine settings the recipe does not model, verbatim (see
`recipe.Native`). Two rules make it safe:

* **merge** — at compile the engine's section is deep-merged into what the emitter
  wrote: a native value wins, a mapping merges key by key, `null` removes the key
  (the engine's own default then applies); verl overrides replace the emitted
  override of the same key or are appended.
* **decided keys** — a native key whose value the recipe decides (batch, stage,
  precision, offload, world, the FSDP sharding) may restate it, in the engine's own
  spelling (`"auto"` for what the HF Trainer fills, `FULL_SHARD` for stage 3), but
  never contradict it: `conflicts` names both, and resolve refuses the recipe.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from typing import Any

from distrecipe.engines.accelerate import (
    FSDP1_STAGE,
    MIXED_PRECISION,
    fsdp1_strategy,
    restates,
    version_number,
)
from distrecipe.engines.deepspeed import BATCH_KEYS, batch_ranks
from distrecipe.engines.hydra import format_value, verl_pairs
from distrecipe.engines.trl import vllm_mode
from distrecipe.engines.verl import VERL_FSDP_VERSION
from distrecipe.job import Plan
from distrecipe.keys import dotted
from distrecipe.overrides import split_key
from distrecipe.recipe import Native
from distrecipe.source import KeyPath

Check = Callable[[Plan, Any], bool]
"""Whether a native value agrees with the plan (the engine's spelling of the same decision)."""


def _auto_or(expected: Callable[[Plan], Any]) -> Check:
    # With the batch the script's, only "auto" (the Trainer's fill) or the stated accumulation
    # agrees (`expected` is None for what the script decides): a number would decide it.
    return lambda plan, value: value == "auto" or (
        (wanted := expected(plan)) is not None and same(value, wanted))


def _enabled(precision: str) -> Check:
    return lambda plan, value: value == "auto" or same(value, plan.precision == precision)


def _device(which: str) -> Check:
    # DeepSpeed reads offload_param only at stage 3; below it the block is inert.
    return lambda plan, value: ((which == "params" and plan.stage < 3)
                                or value == getattr(plan.recipe.offload, which))


def _group(plan: Plan) -> int | None:
    """GRPO's generation batch in sequences (`rl.prompts_per_step × rl.rollout_n`), None without `rl`."""
    rl = plan.recipe.rl
    return None if rl is None else rl.prompts_per_step * rl.rollout_n


def _colocated(which: str) -> Check:
    """A colocated vLLM's setting agrees with the recipe's `rl.<which>` where the recipe states
    one (a server's, or TRL's own generation, does not read it)."""
    def check(plan: Plan, value: Any) -> bool:
        rl = plan.recipe.rl
        stated = None if rl is None else getattr(rl, which)
        return vllm_mode(rl) != "colocate" or stated is None or same(value, stated)
    return check


def _fsdp1(plan: Plan, value: Any) -> bool:
    name = fsdp1_strategy(value)
    if name is None:
        return isinstance(value, bool) and value == plan.reshard_after_forward
    stage, hybrid = FSDP1_STAGE[name]
    return stage == (plan.stage if plan.recipe.strategy == "fsdp" else 0) and hybrid == plan.dims.hybrid


FSDP_VERSION_KEYS: tuple[tuple[str, KeyPath, Callable[[Any], int | None]], ...] = (
    ("hf", ("fsdp_config", "version"), version_number),
    ("accelerate", ("fsdp_config", "fsdp_version"), version_number),
    ("verl", ("actor_rollout_ref", "actor", "strategy"), lambda v: VERL_FSDP_VERSION.get(str(v))),
)
"""Each engine's native key that says which FSDP runs, and how its value reads as 1 or 2, in
the order `native_fsdp_version` asks them; DECIDED holds each to `fsdp_version`."""


def native_fsdp_version(native: Native) -> tuple[int, str] | None:
    """The FSDP version the recipe's native keys state, and the first key stating it (as
    written: `native.hf.fsdp_config.version: 1`), for a recipe that leaves `fsdp_version`
    unset; None where none does. A second key that disagrees is `conflicts`' to refuse."""
    for engine, path, read in FSDP_VERSION_KEYS:
        if engine == "verl":
            values = [(value, f"native.verl: {key}={value}") for prefix, key, value in verl_pairs(native.verl)
                      if prefix != "~" and tuple(key.split(".")) == path]
        else:
            values = [(value, f"{dotted(('native', engine, *path))}: {value}")
                      for found, value in leaves(getattr(native, engine)) if found == path]
        for value, written in values:
            version = read(value)
            if version is not None:
                return version, written
    return None


def _fsdp_version(read: Callable[[Any], int | None]) -> Check:
    # A value naming no version (verl's `megatron`) is not this check's: other rules judge it.
    return lambda plan, value: (plan.fsdp_version is None or (version := read(value)) is None
                                or version == plan.fsdp_version)


_BATCH: dict[str, Callable[[Plan], int | None]] = {
    "micro": lambda p: None if p.script_batch else p.batch.micro,
    "accumulation": lambda p: p.script_accumulation if p.script_batch else p.batch.accumulation,
    # In DeepSpeed's count of ranks (AutoTP's tensor ranks each once: `batch_ranks`).
    "global": lambda p: None if p.script_batch else p.batch.micro * p.batch.accumulation * batch_ranks(p)}
DECIDED: dict[str, dict[KeyPath, tuple[str, Check]]] = {
    "deepspeed": {
        **{(key,): (f"batch.{ours}", _auto_or(_BATCH[ours])) for ours, key in BATCH_KEYS.items()},
        ("zero_optimization", "stage"): ("stage", lambda p, v: same(v, p.stage) or v == str(p.stage)),
        ("bf16", "enabled"): ("precision", _enabled("bf16")),
        ("bfloat16", "enabled"): ("precision", _enabled("bf16")),
        ("fp16", "enabled"): ("precision", _enabled("fp16")),
        ("zero_optimization", "offload_optimizer", "device"): ("offload.optimizer", _device("optimizer")),
        ("zero_optimization", "offload_param", "device"): ("offload.params", _device("params")),
    },
    "accelerate": {
        ("distributed_type",): ("strategy", restates),
        ("num_processes",): ("cluster", lambda p, v: same(v, p.dims.world)),
        ("num_machines",): ("cluster.nodes", lambda p, v: same(v, p.dims.nodes)),
        ("mixed_precision",): ("precision", lambda p, v: v == MIXED_PRECISION[p.precision]
                               or (v == "fp8" and p.precision == "bf16")),
        ("fsdp_config", "fsdp_sharding_strategy"): ("stage", _fsdp1),
        ("fsdp_config", "fsdp_reshard_after_forward"): ("stage", _fsdp1),
        ("fsdp_config", "fsdp_offload_params"): ("offload", lambda p, v: same(v, p.recipe.offload.enabled)),
        ("deepspeed_config", "zero_stage"): ("stage", lambda p, v: same(v, p.stage)),
        ("fsdp_config", "fsdp_version"): ("fsdp_version", _fsdp_version(version_number)),
        ("deepspeed_config", "gradient_accumulation_steps"): ("batch.accumulation",
                                                              _auto_or(_BATCH["accumulation"])),
        ("deepspeed_config", "offload_optimizer_device"): ("offload.optimizer", _device("optimizer")),
        ("deepspeed_config", "offload_param_device"): ("offload.params", _device("params")),
    },
    "hf": {
        ("per_device_train_batch_size",): ("batch.micro", _auto_or(_BATCH["micro"])),
        ("gradient_accumulation_steps",): ("batch.accumulation", _auto_or(_BATCH["accumulation"])),
        ("bf16",): ("precision", lambda p, v: same(v, p.precision == "bf16")),
        ("fp16",): ("precision", lambda p, v: same(v, p.precision == "fp16")),
        ("fsdp_config", "version"): ("fsdp_version", _fsdp_version(version_number)),
    },
    "trl": {
        ("num_generations",): ("rl.rollout_n", lambda p, v: p.recipe.rl is not None
                               and same(v, p.recipe.rl.rollout_n)),
        ("generation_batch_size",): ("rl.prompts_per_step", lambda p, v: v is None or same(v, _group(p))),
        ("steps_per_generation",): ("rl.prompts_per_step", lambda p, v: isinstance(v, int) and not isinstance(
            v, bool) and v * p.batch.micro * p.dims.world == _group(p)),
        ("use_vllm",): ("rl.rollout_mode", lambda p, v: vllm_mode(p.recipe.rl) is None or same(v, True)),
        ("vllm_mode",): ("rl.rollout_mode", lambda p, v: vllm_mode(p.recipe.rl) in (None, v)),
        ("vllm_gpu_memory_utilization",): ("rl.rollout_memory", _colocated("rollout_memory")),
        ("vllm_enable_sleep_mode",): ("rl.free_rollout_memory", _colocated("free_rollout_memory")),
    },
    "verl": {
        ("actor_rollout_ref", "actor", "ppo_micro_batch_size_per_gpu"): (  # unread under use_dynamic_bsz
            "batch.micro", lambda p, v: p.recipe.batch.micro_tokens is not None or same(v, p.batch.micro)),
        ("actor_rollout_ref", "actor", "use_dynamic_bsz"): (
            "batch.micro_tokens", lambda p, v: same(v, p.recipe.batch.micro_tokens is not None)),
        ("actor_rollout_ref", "actor", "ppo_max_token_len_per_gpu"): (  # unread without it
            "batch.micro_tokens",
            lambda p, v: p.recipe.batch.micro_tokens is None or same(v, p.recipe.batch.micro_tokens)),
        ("actor_rollout_ref", "rollout", "n"): (
            "rl.rollout_n", lambda p, v: p.recipe.rl is not None and same(v, p.recipe.rl.rollout_n)),
        ("data", "train_batch_size"): (
            "rl.prompts_per_step",
            lambda p, v: p.recipe.rl is not None and same(v, p.recipe.rl.prompts_per_step)),
        ("actor_rollout_ref", "actor", "megatron", "virtual_pipeline_model_parallel_size"): (
            "parallel.virtual_stages",
            lambda p, v: same(v, p.dims.virtual_stages) or (v is None and p.dims.virtual_stages == 1)),
        ("actor_rollout_ref", "actor", "strategy"): (
            "fsdp_version", _fsdp_version(lambda v: VERL_FSDP_VERSION.get(str(v)))),
        ("trainer", "nnodes"): ("cluster.nodes", lambda p, v: same(v, p.dims.nodes)),
        ("trainer", "n_gpus_per_node"): ("cluster.gpus_per_node", lambda p, v: same(v, p.dims.gpus_per_node)),
    },
}
"""Engine → native key → (the recipe key that decides it, whether a value agrees)."""


def same(a: Any, b: Any) -> bool:
    """Equal and of one kind: `1 == True` in Python, not in a config (`1.0` and `1` are one number)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    return bool(a == b)


def leaves(node: Any, path: KeyPath = ()) -> Iterator[tuple[KeyPath, Any]]:
    """Every (key path, value) below `node`; a list, a scalar or an empty mapping is a leaf."""
    if isinstance(node, dict) and node:
        for key, value in node.items():
            yield from leaves(value, (*path, key))
    elif path:
        yield path, node


def conflicts(plan: Plan) -> Iterator[tuple[str, str, Any, str]]:
    """(where it is written, the key as dotted, its value, the recipe key it contradicts).

    Where it is written is spelled as the recipe records positions (`keys.dotted`:
    `native.deepspeed.zero_optimization.stage`, `native.verl[3]`), so an error can point
    at the offending line rather than at `native`."""
    native = plan.recipe.native
    for engine in ("deepspeed", "accelerate", "hf", "trl"):
        section: dict[str, Any] = getattr(native, engine)
        for path, value in leaves(section):
            decided = DECIDED[engine].get(path)
            if decided is not None and value is not None and not decided[1](plan, value):
                key = ".".join(map(str, path))
                yield dotted(("native", engine, *path)), key, value, decided[0]
    for index, (prefix, key, value) in enumerate(verl_pairs(native.verl)):
        decided = DECIDED["verl"].get(tuple(key.split(".")))
        if prefix == "~":
            value = None  # deleted: verl gets no value there at all
        if decided is not None and not decided[1](plan, value):
            yield dotted(("native", "verl", index)), key, value, decided[0]


def merge(emitted: dict[str, Any], native: dict[str, Any]) -> dict[str, Any]:
    """`emitted` with `native` deep-merged in: native wins, `None` deletes, order kept."""
    out = copy.deepcopy(emitted)
    for key, value in native.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def merge_overrides(emitted: list[tuple[str, Any]], native: tuple[str, ...]) -> list[tuple[str, Any]]:
    """verl's overrides with the native ones: same key replaced in place (a `~key` too, so
    the key is deleted rather than set), others appended. Each is (key with its prefix, value)."""
    out = list(emitted)
    index = {split_key(key)[1]: i for i, (key, _value) in enumerate(out)}
    for prefix, key, value in verl_pairs(native):
        if key in index:
            out[index[key]] = (prefix + key, value)
        else:
            index[key] = len(out)
            out.append((prefix + key, value))
    return out


def override_line(key: str, value: Any) -> str:
    """One verl override as compile and `import` write it: `key=value`, or `~key` where a
    deletion holds no value (`~key=null` means the same to Hydra)."""
    if value is None and split_key(key)[0] == "~":
        return key
    return f"{key}={format_value(value)}"
