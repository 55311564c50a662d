"""Write the key tables lint reads, one per release of DeepSpeed, Accelerate, verl and transformers.

    python scripts/engine_tables.py                    # the installed releases' tables
    python scripts/engine_tables.py --check            # exit 1 and name the keys that differ
    python scripts/engine_tables.py --release accelerate==1.14.0 --release hf==4.57.6
                                                       # another release, installed in scratch
    python scripts/engine_tables.py --release accelerate==1.17.0 --out DIR   # into DIR (drift)

A table is `distrecipe/engines/tables/ENGINE/RELEASE.json`, named by the release it was
read from. `--check` rebuilds the installed release's table and compares it with the
stored one of *that* release, so a lock that moves an engine without its table fails,
and a stored older release is never compared with a newer install. `--release` installs
the release alone (`pip install --no-deps --target`) in a scratch directory put first on
the path of a child process, which builds the table as above: the other packages are
the environment's own (transformers brings its own requirements: `WITH_DEPS`).

Every fact comes from running or introspecting the installed engine, never from its
documentation, so an engine upgrade changes the tables, and `--check` (run by a slow
test) names what changed:

* DeepSpeed: `DeepSpeedConfig` is fed dictionaries that record every key it looks up,
  section by section (the section's own keys, with the default each lookup passes).
  A section DeepSpeed hands to a pydantic model is read from the model instead:
  fields, aliases, defaults, deprecated names, the JSON types each field's annotation
  accepts (with literal choices) and whether extra keys are forbidden.
  Whether an unknown key is refused is then *observed*: a made-up key is put in each
  section and `DeepSpeedConfig` must raise for exactly the sections that say so.
* Accelerate: `ClusterConfig`'s fields (the loader refuses other top-level keys; that
  too is observed), and for each nested dict the launch options it is copied onto
  (`accelerate launch` sets every key of e.g. `fsdp_config` as an argument, so a key
  that is no option is silently ignored), with their defaults and choices, and the
  values the plugins accept.
* verl: the composed `ppo_trainer` and `ppo_megatron_trainer` Hydra configs, whole,
  with their defaults (interpolations kept as written).
* transformers: the names of `TrainingArguments`' init fields (what `HfArgumentParser`
  accepts for it), so a field transformers drops shows up as a removed name.
* TRL: each command's dataclasses (what `trl NAME` hands `TrlParser`) and their own
  fields, types, choices and literal defaults, read from the release's sources (older
  releases do not import beside today's transformers).
* OpenRLHF: every option of each `openrlhf.cli.train_*` entry, from the argparse parser
  the module builds under `__main__`, run alone (without torch, Ray or vLLM).

Output is sorted, indented JSON ending in a newline: the same engines give the same bytes.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import dataclasses
import enum
import importlib.metadata
import inspect
import json
import os
import re
import subprocess
import sys
import tempfile
import types
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

TABLES = Path(__file__).resolve().parents[1] / "distrecipe" / "engines" / "tables"
PROBE = "__distrecipe_probe__"
"""A key no engine knows: put in a section to see whether the engine refuses it."""
BATCH = {"train_batch_size": 1, "train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1}
"""The least a ds_config needs for `DeepSpeedConfig` to get past its batch checks (world 1)."""


def jsonable(value: Any) -> Any:
    """A default as JSON: enums by value, dtypes and other objects by their name."""
    if isinstance(value, enum.Enum):
        return jsonable(value.value)
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if value == value and value not in (float("inf"), float("-inf")) else str(value)
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, set | frozenset):
        return sorted(jsonable(v) for v in value)
    if hasattr(value, "model_dump"):
        return jsonable(value.model_dump())
    text = str(value)
    if re.search(r"0x[0-9a-f]{6,}", text):
        raise ValueError(f"default {value!r} has no stable text")
    return text


# --- DeepSpeed ---------------------------------------------------------------------------


class Recording(dict[str, Any]):
    """A ds_config section that writes down every key DeepSpeed looks up in it."""

    def __init__(self, data: dict[str, Any], path: str, log: dict[str, dict[str, Any]]) -> None:
        super().__init__(data)
        self.path = path
        self.log = log
        log.setdefault(path, {})

    def _seen(self, key: object, default: Any = ...) -> None:
        if isinstance(key, str) and key != PROBE:
            known = self.log[self.path]
            if default is not ... or key not in known:
                known[key] = default

    def get(self, key: str, default: Any = None) -> Any:
        self._seen(key, default)
        return super().get(key, default)

    def __getitem__(self, key: str) -> Any:
        self._seen(key)
        return super().__getitem__(key)

    def __contains__(self, key: object) -> bool:
        self._seen(key)
        return super().__contains__(key)

    def keys(self) -> Any:
        return RecordingKeys(self)

    def __copy__(self) -> Recording:
        return Recording(dict(self), self.path, self.log)


class RecordingKeys:
    """`section.keys()` whose `in` is recorded too (`if "type" in d["optimizer"].keys()`)."""

    def __init__(self, owner: Recording) -> None:
        self.owner = owner

    def __contains__(self, key: object) -> bool:
        return key in self.owner

    def __iter__(self) -> Iterator[str]:
        return iter(dict.keys(self.owner))

    def __len__(self) -> int:
        return dict.__len__(self.owner)


@contextlib.contextmanager
def models_fed_probes(fed: dict[str, type], path: str) -> Iterator[None]:
    """Note which pydantic model the section at `path` is handed to (`Model(**section)`, seen
    by the probe key, or `Model(name=section)`), by wrapping `BaseModel.__init__` meanwhile."""
    import pydantic

    original = pydantic.BaseModel.__init__

    def init(self: Any, /, **data: Any) -> None:
        if PROBE in data:
            fed.setdefault(path, type(self))
        for name, value in data.items():
            if isinstance(value, Recording):
                field = type(self).model_fields.get(name) or _by_alias(type(self), name)
                model = _model_in(field.annotation) if field is not None else None
                if model is not None:
                    fed.setdefault(value.path, model)
        original(self, **data)

    with contextlib.ExitStack() as stack:
        stack.callback(setattr, pydantic.BaseModel, "__init__", original)
        pydantic.BaseModel.__init__ = init  # type: ignore[method-assign]
        yield


def _by_alias(model: type, name: str) -> Any:
    for info in model.model_fields.values():  # type: ignore[attr-defined]
        if info.alias == name:
            return info
    return None


def _model_in(annotation: Any) -> type | None:
    """The pydantic model a field holds (`X`, `Optional[X]`, `X | None`), if any."""
    import pydantic

    if isinstance(annotation, type) and issubclass(annotation, pydantic.BaseModel):
        return annotation
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        found = [m for m in map(_model_in, typing.get_args(annotation)) if m is not None]
        return found[0] if len(found) == 1 else None
    return None


def model_keys(model: type) -> dict[str, dict[str, Any]]:
    """A pydantic model's accepted keys: fields, their aliases and deprecated names."""
    keys: dict[str, dict[str, Any]] = {}
    for name, info in model.model_fields.items():  # type: ignore[attr-defined]
        entry: dict[str, Any] = {}
        if info.is_required():
            entry["required"] = True
        else:
            entry["default"] = jsonable(info.get_default(call_default_factory=True))
        extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
        if extra.get("deprecated"):
            entry["deprecated"] = True
            if extra.get("new_param"):
                entry["replaced_by"] = extra["new_param"]
        entry.update(field_types(model, name, info))
        keys[name] = entry
        if info.alias and info.alias != name:
            keys[info.alias] = {**entry, "alias_of": name}
    return keys


JSON_TYPES = {bool: "bool", int: "int", float: "float", str: "str", Path: "str", list: "list",
              tuple: "list", dict: "object", type(None): "null"}
"""A field annotation's Python type → the JSON type pydantic validates it from (a `Path`
from a string, a `tuple` from an array)."""


def annotation_types(annotation: Any) -> tuple[set[str], list[Any] | None] | None:
    """The JSON types a field's annotation accepts and its literal choices, or None when
    pydantic takes any value there (`object`, `Any`, an arbitrary class such as `torch.dtype`)."""
    import pydantic

    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        found: set[str] = set()
        choices: list[Any] = []
        for arg in typing.get_args(annotation):
            inner = annotation_types(arg)
            if inner is None:
                return None
            found |= inner[0]
            choices += inner[1] or []
        return found, choices or None
    if origin is typing.Literal:
        values = list(typing.get_args(annotation))
        return {JSON_TYPES[type(v)] for v in values}, values
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        values = [m.value for m in annotation]
        return {JSON_TYPES[type(v)] for v in values}, values
    if isinstance(annotation, type) and issubclass(annotation, pydantic.BaseModel):
        return None if reshapes(annotation) else ({"object"}, None)
    base = origin if origin is not None else annotation
    if base in JSON_TYPES:
        return {JSON_TYPES[base]}, None
    return None


def reshapes(model: Any) -> bool:
    """Whether a `before` model validator may turn any input into the model's fields."""
    return any(v.info.mode == "before" for v in model.__pydantic_decorators__.model_validators.values())


def field_types(model: Any, name: str, info: Any) -> dict[str, Any]:
    """`{"types": [...], "choices": [...]}` for a field, as its annotation says; nothing when
    pydantic takes any value, or when a `before` validator may reshape the value first.

    A `before` field validator that refuses booleans (pydantic's lax mode reads `true` as 1)
    is observed, and recorded as `"refuses_bool"`."""
    decorators = model.__pydantic_decorators__
    if reshapes(model):
        return {}
    found = annotation_types(info.annotation)
    if found is None:
        return {}
    entry: dict[str, Any] = {"types": sorted(found[0])}
    if found[1] is not None:
        entry["choices"] = sorted(jsonable(found[1]), key=json.dumps)
    validated = any(name in v.info.fields and v.info.mode in ("before", "plain", "wrap")
                    for v in decorators.field_validators.values())
    if validated and found[0] & {"bool", "int", "float"} and "bool" not in found[0]:
        try:
            model(**{name: True})
        except Exception:  # any refusal: the validator turned the boolean away
            entry["refuses_bool"] = True
    return entry


def _nested(path: str, leaf: Any) -> dict[str, Any]:
    """`{"a": {"b": leaf}}` for path `a.b`."""
    head, _, rest = path.partition(".")
    return {head: _nested(rest, leaf) if rest else leaf}


def deepspeed_refuses(config: dict[str, Any]) -> str | None:
    """DeepSpeed's error for `config`, or None when it accepts it."""
    from deepspeed.runtime.config import DeepSpeedConfig

    try:
        DeepSpeedConfig({**BATCH, **config})
    except Exception as exc:  # any exception is a refusal at start-up
        return f"{type(exc).__name__}: {exc}"
    return None


def deepspeed_table() -> dict[str, Any]:
    import logging

    import deepspeed.runtime.config as ds_config

    logging.getLogger("DeepSpeed").setLevel(logging.ERROR)
    log: dict[str, dict[str, Any]] = {}
    # With a process group (faked), DeepSpeed also looks up `sequence_parallel_size`.
    with mock.patch.object(ds_config.dist, "get_world_size", return_value=1), \
            mock.patch.object(ds_config.dist, "get_rank", return_value=0):
        ds_config.DeepSpeedConfig(Recording(dict(BATCH), "", log))
    sections: dict[str, dict[str, Any]] = {}
    # The names DeepSpeed refuses as removed; 0.19.4 and older have no such list.
    removed_top = getattr(ds_config, "_REMOVED_TOP_LEVEL_CONFIG_KEYS", ())
    removed_zero = getattr(ds_config, "_REMOVED_ZERO_CONFIG_KEYS", ())
    top = {k: v for k, v in log[""].items() if k not in removed_top}
    sections[""] = {"keys": {k: {"default": jsonable(v)} if v is not ... else {}
                             for k, v in sorted(top.items())}}
    pending = sorted(top)
    while pending:
        path = pending.pop(0)
        fed: dict[str, type] = {}
        filled: dict[str, Any] = {}
        while True:
            # Some keys are read only when another is set (`optimizer.params` once `type` is):
            # probe again with every key read without a default given a value, until no new key.
            before = set(log.get(path, {}))
            probe = Recording({PROBE: 1, **filled}, path, log)
            with models_fed_probes(fed, path), contextlib.suppress(Exception):
                ds_config.DeepSpeedConfig({**BATCH, **_nested(path, probe)})
            filled = {k: "probe" for k, v in log[path].items() if v is None or v is ...}
            if set(log[path]) == before or path in fed:
                break
        if path in fed:
            add_model_sections(sections, path, fed[path])
        elif log.get(path):
            sections[path] = {"keys": {k: {"default": jsonable(v)} if v is not ... else {}
                                       for k, v in sorted(log[path].items())}}
            pending += [f"{path}.{k}" for k in sorted(log[path])]
        log.pop(path, None)
    for path, section in sections.items():
        refusal = deepspeed_refuses(_nested(path, {PROBE: 1})) if path else deepspeed_refuses({PROBE: 1})
        section["unknown_keys"] = "refused" if refusal and PROBE in refusal else "ignored"
        if section["unknown_keys"] == "refused":
            # DeepSpeed's models drop "auto" values (left for the HF Trainer) before validating.
            refusal = deepspeed_refuses(_nested(path, {PROBE: "auto"}) if path else {PROBE: "auto"})
            section["auto_dropped"] = not (refusal and PROBE in refusal)
        if "model" in section:
            forbids = section.pop("forbids_extra")
            if forbids != (section["unknown_keys"] == "refused"):
                raise SystemExit(f"DeepSpeed {path}: model_config extra={forbids} but DeepSpeed "
                                 f"{section['unknown_keys']} an unknown key")
    removed = {"": sorted(removed_top), "zero_optimization": sorted(removed_zero)}
    return {"engine": "deepspeed", "version": importlib.metadata.version("deepspeed"),
            "removed": removed, "sections": dict(sorted(sections.items()))}


def add_model_sections(sections: dict[str, dict[str, Any]], path: str, model: type) -> None:
    """`path` and, recursively, each sub-model field of `model` (under name and alias)."""
    config = model.model_config  # type: ignore[attr-defined]
    sections[path] = {"model": f"{model.__module__}.{model.__qualname__}", "keys": model_keys(model),
                      "forbids_extra": config.get("extra") == "forbid"}
    for name, info in model.model_fields.items():  # type: ignore[attr-defined]
        inner = _model_in(info.annotation)
        if inner is not None:
            for spelling in {name, info.alias or name}:
                add_model_sections(sections, f"{path}.{spelling}", inner)


# --- Accelerate ----------------------------------------------------------------------------

ACCELERATE_SECTIONS = {
    "deepspeed_config": ("DeepSpeed Arguments", ""),
    "fsdp_config": ("FSDP Arguments", "fsdp_"),
    "megatron_lm_config": ("Megatron-LM Arguments", ""),
    "fp8_config": ("FP8 Arguments", "fp8_"),
    "mpirun_config": ("MPI Arguments", ""),
    "parallelism_config": ("ParallelismConfig Arguments", ""),
    "dynamo_config": (None, "dynamo_"),
}
"""Each nested dict of an Accelerate config, the launch-option group its keys are copied
onto, and the prefix the launcher adds to a key that lacks it (commands/launch.py)."""


def accelerate_table() -> dict[str, Any]:
    from accelerate.commands import launch
    from accelerate.commands.config import config_args
    from accelerate.utils import constants

    parser = launch.launch_command_parser()
    groups: dict[str | None, dict[str, argparse.Action]] = {}
    for group in parser._action_groups:
        groups[group.title] = {a.dest: a for a in group._group_actions if a.dest != "help"}
    every = {dest: action for group in groups.values() for dest, action in group.items()}
    # Options the launcher reads by getattr with no argparse option behind them.
    source = Path(inspect.getfile(launch)).read_text() + Path(
        inspect.getfile(importlib.import_module("accelerate.utils.launch"))).read_text()
    read_by_getattr = set(re.findall(r"getattr\(args, \"(\w+)\"", source)) - set(every)

    fields = {f.name: f for f in dataclasses.fields(config_args.ClusterConfig)}
    top: dict[str, Any] = {}
    for name, field in sorted(fields.items()):
        if field.default is not dataclasses.MISSING:
            top[name] = {"default": jsonable(field.default)}
        elif field.default_factory is not dataclasses.MISSING:
            top[name] = {"default": jsonable(field.default_factory())}
        else:
            top[name] = {"required": True}
    legacy = sorted(set(re.findall(r"\"(\w+)\" in config_dict", inspect.getsource(
        config_args.BaseConfig.process_config))) - set(fields))
    sections: dict[str, Any] = {"": {"model": "accelerate.commands.config.config_args.ClusterConfig",
                                     "keys": top, "legacy_keys": legacy,
                                     "unknown_keys": "refused" if accelerate_refuses(PROBE) else "ignored"}}
    for section, (title, prefix) in ACCELERATE_SECTIONS.items():
        if title is None:
            options = {d: a for d, a in every.items() if d.startswith(prefix)}
        else:
            options = dict(groups[title])
        options.update({d: None for d in read_by_getattr if prefix and d.startswith(prefix)})
        keys = {}
        for dest, action in sorted(options.items()):
            if dest.startswith("use_") and dest.endswith(("_deepspeed", "_fsdp", "_megatron_lm")):
                continue  # the switch that selects the section, not a key of it
            entry: dict[str, Any] = {}
            if action is not None:
                entry["default"] = jsonable(action.default)
                if action.choices:
                    entry["choices"] = [jsonable(c) for c in action.choices]
            keys[dest] = entry
        sections[section] = {"keys": keys, "prefix": prefix, "unknown_keys": "ignored"}
    values = {name: jsonable(value) for name, value in sorted(vars(constants).items())
              if re.fullmatch(r"(FSDP|FSDP2|DEEPSPEED|TORCH_DYNAMO)_[A-Z_]+", name)
              and isinstance(value, list | tuple)}
    from accelerate.utils import dataclasses as acc_dc
    for enum_name in ("ComputeEnvironment", "DistributedType", "DynamoBackend", "PrecisionType"):
        values[enum_name] = sorted(str(m.value) for m in getattr(acc_dc, enum_name))
    return {"engine": "accelerate", "version": importlib.metadata.version("accelerate"),
            "launch_options": sorted(every), "sections": sections, "values": dict(sorted(values.items())),
            "accepted": accelerate_accepted(values), "beside_replication": beside_replication()}


def beside_replication() -> dict[str, bool]:
    """Whether `ParallelismConfig` accepts tensor (`tp`) and context (`cp`) parallelism
    beside pure replication (dp_replicate 2, dp_shard 1), observed: Accelerate 1.16 began
    to accept tensor parallelism there, and refuses context parallelism still."""
    from accelerate.parallelism_config import ParallelismConfig

    accepted = {}
    for name in ("tp", "cp"):
        try:
            ParallelismConfig(dp_replicate_size=2, dp_shard_size=1, **{f"{name}_size": 2})
            accepted[name] = True
        except ValueError:
            accepted[name] = False
    return accepted

ACCELERATE_PROBED = {
    "distributed_type": ("loader", "MULTI_GPU"),
    "mixed_precision": ("judge", "MULTI_GPU"), "dynamo_config.dynamo_backend": ("judge", "MULTI_GPU"),
    **{f"fsdp_config.fsdp_{key}": ("judge", "FSDP") for key in (
        "reshard_after_forward", "sharding_strategy", "offload_params", "auto_wrap_policy",
        "backward_prefetch", "state_dict_type", "use_orig_params", "sync_module_states",
        "activation_checkpointing", "cpu_ram_efficient_loading", "forward_prefetch", "min_num_params")},
}
"""Accelerate config keys whose accepted values are probed, and how: Accelerate's loader
alone, or the whole judge (launch environment and the worker's plugin), on a minimal
config of that `distributed_type` (FSDP keys under `fsdp_version` 1 and 2)."""
TRUTH_WORDS = ["y", "yes", "t", "true", "on", "1", "n", "no", "f", "false", "off", "0"]


def accelerate_accepted(values: dict[str, Any]) -> dict[str, Any]:
    """What Accelerate accepts for each probed key (`ACCELERATE_PROBED`), found by asking it:
    every name of its vocabularies (and each in lower case), the truth words of its
    `str_to_bool`, YAML booleans, digits and a nonsense word are written into a minimal
    config and judged (`distrecipe.judges.accelerate`). The accepted ones are summed up as
    `open` (anything goes: the key is not read there), `truth` (a truth word or boolean),
    `integer`, or `names` (those names, with `case` any or exact, and `digits`), each with
    whether YAML's `true`/`false` are taken (`booleans`)."""
    import tempfile

    from distrecipe.judges import accelerate as judge

    names = sorted({str(v) for vocabulary in values.values() for v in vocabulary})
    spellings = [*names, *(n.lower() for n in names), *(n.upper() for n in names)]
    candidates: list[Any] = list(dict.fromkeys([True, False, *TRUTH_WORDS, *spellings,
                                                *(str(d) for d in range(2, 10)), 100, "bogus"]))
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "config.yaml"

        def accepted(config: dict[str, Any], how: str) -> bool:
            path.write_text(json.dumps(config))
            if how == "loader":
                return judge.loader_refusal(path) is None
            return judge.judge(path).outcome != "refuses"

        for dotted, (how, distributed) in ACCELERATE_PROBED.items():
            versions = ("1", "2") if dotted.startswith("fsdp_config.") else ("*",)
            for version in versions:
                ok = []
                for value in candidates:
                    config: dict[str, Any] = {
                        "compute_environment": "LOCAL_MACHINE", "distributed_type": distributed,
                        "num_processes": 2, "num_machines": 1, "machine_rank": 0, "mixed_precision": "no"}
                    section, _, key = dotted.rpartition(".")
                    inner: dict[str, Any] = {"fsdp_version": int(version)} if version != "*" else {}
                    if key == "fsdp_min_num_params":
                        inner["fsdp_auto_wrap_policy"] = "SIZE_BASED_WRAP"
                    if section:
                        config[section] = {**inner, key: value}
                    else:
                        config[key] = value
                    if accepted(config, how):
                        ok.append(value)
                out.setdefault(dotted, {})[version] = _vocabulary(ok, names)
    return out


def _vocabulary(ok: list[Any], names: list[str]) -> dict[str, Any]:
    """The accepted probe values of one key, summed up (see `accelerate_accepted`)."""
    words = [v for v in ok if isinstance(v, str)]
    if "bogus" in words:
        return {"kind": "open"}
    truth = [v for v in words if v in TRUTH_WORDS]
    truthy = len(truth) >= len(TRUTH_WORDS) - 2  # all of str_to_bool's words (or all but an interplay's)
    spelled = {spelling for name in names for spelling in (name, name.lower(), name.upper())}
    named = sorted(word for word in words if word in spelled and not word.isdigit()
                   and not (truthy and word.lower() in TRUTH_WORDS))
    digits = sorted({v for v in words if v.isdigit()} - ({"0", "1"} if truthy else set()))
    if truthy and not named:
        return {"kind": "truth"}
    booleans = True in ok and False in ok
    if named:
        case = "any" if all(n.lower() in words and n.upper() in words for n in named) else "exact"
        named = sorted({n.upper() for n in named}) if case == "any" else named
        return {"kind": "names", "names": named, "case": case, "digits": digits, "booleans": booleans}
    if digits:
        return {"kind": "integer", "booleans": booleans}
    return {"kind": "open"}


def accelerate_refuses(key: str) -> bool:
    """Whether Accelerate's loader refuses a MULTI_GPU config with top-level `key`."""
    import tempfile

    from accelerate.commands.config.config_args import ClusterConfig

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "config.yaml"
        path.write_text(json.dumps({"compute_environment": "LOCAL_MACHINE", "distributed_type": "MULTI_GPU",
                                    key: 1}))
        try:
            ClusterConfig.from_yaml_file(str(path))
        except ValueError as exc:
            return "unknown keys" in str(exc)
    return False


# --- verl ----------------------------------------------------------------------------------

VERL_CONFIGS = ("ppo_trainer", "ppo_megatron_trainer")


def verl_table() -> dict[str, Any]:
    from hydra import compose, initialize_config_module
    from omegaconf import OmegaConf

    trees = {}
    with initialize_config_module("verl.trainer.config", version_base=None):
        for name in VERL_CONFIGS:
            trees[name] = jsonable(OmegaConf.to_container(compose(name), resolve=False))
    import pkgutil

    import verl.trainer

    modules = sorted(f"verl.trainer.{module.name}" for module in pkgutil.iter_modules(verl.trainer.__path__)
                     if not module.ispkg)
    return {"engine": "verl", "version": importlib.metadata.version("verl"), "configs": trees,
            "trainer_modules": modules}


# --- transformers ----------------------------------------------------------------------------


def hf_table() -> dict[str, Any]:
    """TrainingArguments' fields, and the default of each that has a stable one (what a
    dumped TrainingArguments JSON holds for a field nobody set); the fields
    Seq2SeqTrainingArguments adds (LLaMA-Factory's TrainingArguments extends it)."""
    from transformers import Seq2SeqTrainingArguments, TrainingArguments

    fields = [f for f in dataclasses.fields(TrainingArguments) if f.init]
    defaults: dict[str, Any] = {}
    for f in fields:
        if f.default is not dataclasses.MISSING:
            value = f.default
        elif f.default_factory is not dataclasses.MISSING:
            value = f.default_factory()
        else:
            continue
        with contextlib.suppress(ValueError):
            defaults[f.name] = jsonable(value)
    seq2seq = sorted({f.name for f in dataclasses.fields(Seq2SeqTrainingArguments) if f.init}
                     - {f.name for f in fields})
    return {"engine": "transformers", "version": importlib.metadata.version("transformers"),
            "training_arguments": sorted(f.name for f in fields), "defaults": defaults,
            "seq2seq_arguments": seq2seq, "flags": hf_flags()}


def hf_flags() -> dict[str, dict[str, Any]]:
    """How `HfArgumentParser(TrainingArguments)` reads each field from a command line: the
    argparse conversion (`int`, `float`, `bool` by `string_to_bool`, `str`, `enum` for an
    enum field, which `TrainingArguments.__post_init__` converts from a file's string too,
    or `other`), the `choices` argparse refuses anything outside of, and `nargs`."""
    from transformers import HfArgumentParser, TrainingArguments

    kinds = {"int": "int", "float": "float", "string_to_bool": "bool", "str": "str"}
    flags: dict[str, dict[str, Any]] = {}
    for action in HfArgumentParser(TrainingArguments)._actions:
        if not action.option_strings or action.dest in ("help", *flags) or action.nargs == 0:
            continue  # `--no_X` (store_false) sets the same field as `--X`
        name = getattr(action.type, "__name__", "")
        entry: dict[str, Any] = {"type": "enum" if name == "<lambda>" else kinds.get(name, "other")}
        if action.choices:
            entry["choices"] = [jsonable(choice) for choice in action.choices]
        if action.nargs is not None:
            entry["nargs"] = action.nargs
        flags[action.dest] = entry
    return dict(sorted(flags.items()))


# --- TRL ----------------------------------------------------------------------------------------


def source_root(package: str) -> Path | None:
    """The folder of the installed `package`, found without importing it (TRL's and
    OpenRLHF's `__init__` import torch and their trainers; a table needs their sources only)."""
    import importlib.util

    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def _annotation_types(annotation: ast.expr | None) -> dict[str, Any]:
    """The JSON types a TRL field's annotation accepts, and its `Literal` choices: what a
    YAML value of that field must be for HfArgumentParser to take it as written."""
    if annotation is None:
        return {"types": ["other"]}
    text = ast.unparse(annotation).replace("typing.", "")
    names = {"bool": "bool", "int": "int", "float": "float", "str": "str", "None": "null", "list": "list",
             "List": "list", "dict": "dict", "Dict": "dict", "tuple": "list", "Tuple": "list"}
    found: set[str] = set()
    choices: list[Any] = []
    for node in ast.walk(annotation):
        if isinstance(node, ast.Subscript) and ast.unparse(node.value).endswith("Literal"):
            inner = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            for item in inner:
                with contextlib.suppress(ValueError):
                    choices.append(ast.literal_eval(item))
    top = text.replace("Optional[", "").replace("Union[", "")
    for word in re.findall(r"[A-Za-z_][A-Za-z_0-9]*", top.split("[")[0] if "Literal" not in top else top):
        if word in names:
            found.add(names[word])
    if text.startswith("Optional[") or re.search(r"\|\s*None|None\s*\|", text):
        found.add("null")
    if choices:
        kinds = {bool: "bool", int: "int", float: "float", str: "str"}
        found |= {kinds.get(type(c), "other") for c in choices}
    entry: dict[str, Any] = {"types": sorted(found) or ["other"]}
    if choices:
        entry["choices"] = choices
    return entry


def _field_default(value: ast.expr | None) -> tuple[bool, Any]:
    """(True, the default) for a literal default (`= 8`, `field(default=8)`), else (False, None)."""
    if value is None:
        return False, None
    if isinstance(value, ast.Call) and ast.unparse(value.func).endswith("field"):
        for keyword in value.keywords:
            if keyword.arg == "default":
                value = keyword.value
                break
        else:
            return False, None
    try:
        return True, ast.literal_eval(value)
    except (ValueError, SyntaxError):
        return False, None


Index = tuple[dict[str, list[tuple[str, ast.ClassDef]]], dict[str, dict[str, str]]]
"""Classes by name (module, node), and each module's import aliases."""


def _replaced_by(value: ast.expr | None) -> str | None:
    """The field a deprecated one's help names (`"... deprecated ... Use `max_length` instead."`)."""
    if not isinstance(value, ast.Call):
        return None
    for keyword in value.keywords:
        if keyword.arg == "metadata" and isinstance(keyword.value, ast.Dict):
            for key, item in zip(keyword.value.keys, keyword.value.values, strict=True):
                if isinstance(key, ast.Constant) and key.value == "help":
                    with contextlib.suppress(ValueError):
                        text = str(ast.literal_eval(item))
                        found = re.search(r"deprecated.*?[Uu]se `(\w+)`", text, re.S)
                        return found[1] if found else None
    return None


def _classes(root: Path) -> Index:
    """Every class of the package's sources by name (module file relative to `root`, node),
    and each module's import aliases (`from ...trainer import KTOConfig as _KTOConfig`)."""
    found: dict[str, list[tuple[str, ast.ClassDef]]] = {}
    aliases: dict[str, dict[str, str]] = {}
    for path in sorted(root.rglob("*.py")):
        module = path.relative_to(root).as_posix()
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                found.setdefault(node.name, []).append((module, node))
            elif isinstance(node, ast.ImportFrom):
                aliases.setdefault(module, {}).update({a.asname: a.name for a in node.names if a.asname})
    return found, aliases


def _dataclass_fields(name: str, index: Index, prefer: str, out: dict[str, Any], avoid: str = "") -> None:
    """`out[name]`: the init fields the class declares itself and through its TRL bases, and
    the class outside TRL it extends (`TrainingArguments`); bases first, as dataclasses do.
    Of several classes of one name, the one in `prefer`'s module, else one outside
    `experimental/` (TRL re-exports some there under the same name)."""
    classes, aliases = index
    if name in out or name not in classes:
        return
    candidates = [c for c in classes[name] if c[0] != avoid] or classes[name]
    stable = next(((m, n) for m, n in candidates if not m.startswith("experimental/")), candidates[0])
    module, node = next(((m, n) for m, n in candidates if m == prefer), stable)
    fields: dict[str, Any] = {}
    extends: list[str] = []
    for base in node.bases:
        written = ast.unparse(base).rsplit(".", 1)[-1]
        base_name = aliases.get(module, {}).get(written, written)
        if base_name in classes:
            key = base_name if base_name != name else f"{base_name}@base"
            if key not in out:
                inner: dict[str, Any] = {}
                _dataclass_fields(base_name, index, "", inner, avoid=module if base_name == name else "")
                out[key] = inner[base_name]
            fields.update(out[key]["fields"])
            extends.extend(out[key]["extends"])
        else:
            extends.append(base_name)
    for statement in node.body:
        if not isinstance(statement, ast.AnnAssign) or not isinstance(statement.target, ast.Name):
            continue
        if "ClassVar" in ast.unparse(statement.annotation):
            continue
        value = statement.value
        if isinstance(value, ast.Call) and any(k.arg == "init" and isinstance(k.value, ast.Constant)
                                               and k.value.value is False for k in value.keywords):
            continue
        entry = _annotation_types(statement.annotation)
        if (replaced := _replaced_by(value)) is not None:
            entry["replaced_by"] = replaced
        has, default = _field_default(value)
        if has:
            entry["default"] = jsonable(default)
        fields[statement.target.id] = entry
    out[name] = {"extends": sorted(set(extends) - {"object"}), "fields": dict(sorted(fields.items())),
                 "module": module}


def _parser_dataclasses(tree: ast.Module) -> list[str] | None:
    """The dataclass names a TRL script hands its parser: `dataclass_types = (A, B)` or
    `TrlParser((A, B))`, the first found."""
    for node in ast.walk(tree):
        value: ast.expr | None = None
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "dataclass_types"
                                                for t in node.targets):
            value = node.value
        elif isinstance(node, ast.Call) and ast.unparse(node.func).endswith("TrlParser") and node.args:
            value = node.args[0]
        if isinstance(value, ast.Tuple | ast.List):
            return [ast.unparse(item).rsplit(".", 1)[-1] for item in value.elts]
    return None


def trl_table() -> dict[str, Any]:
    """TRL's training commands (`trl sft`, `trl grpo`, ...: the dataclasses each script hands
    `TrlParser`, read from `trl/scripts/NAME.py`) and each dataclass's own fields with the
    JSON types and choices their annotations accept and their literal defaults, read from
    the release's sources (an older TRL does not import beside today's transformers; the
    installed release's are checked against `dataclasses.fields` by the oracle tests); and
    the world of each Accelerate config it ships (`trl NAME --accelerate_config zero2`)."""
    root = source_root("trl")
    if root is None:
        raise ModuleNotFoundError("trl")
    index = _classes(root)
    commands: dict[str, list[str]] = {}
    dataclasses_: dict[str, Any] = {}
    for script in sorted((root / "scripts").glob("*.py")):
        names = _parser_dataclasses(ast.parse(script.read_text(encoding="utf-8")))
        if not names or script.stem in ("vllm_serve", "utils"):
            continue
        found: dict[str, Any] = dict(dataclasses_)
        for name in names:
            _dataclass_fields(name, index, f"scripts/{script.stem}.py", found)
        if not any("TrainingArguments" in found[name]["extends"] for name in names if name in found):
            continue  # `trl chat`, `trl env`: no trainer reads their file
        commands[script.stem] = names
        dataclasses_.update(found)
    import yaml

    shipped = {}
    for config in sorted((root / "accelerate_configs").glob("*.yaml")):
        loaded = yaml.safe_load(config.read_text(encoding="utf-8")) or {}
        world = ("distributed_type", "num_processes", "num_machines")
        shipped[config.stem] = {key: loaded.get(key) for key in world}
    return {"engine": "trl", "version": importlib.metadata.version("trl"), "commands": commands,
            "accelerate_configs": shipped,
            "dataclasses": {name: {k: v for k, v in entry.items() if k != "module"}
                            for name, entry in sorted(dataclasses_.items()) if "@" not in name}}


# --- OpenRLHF -----------------------------------------------------------------------------------


def openrlhf_parser(path: Path) -> argparse.ArgumentParser:
    """The `argparse` parser an OpenRLHF entry module builds under `if __name__ == "__main__":`,
    built by running exactly those statements (up to `parse_args`) with the module's
    standard-library imports: the real parser, without importing torch, Ray or vLLM."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    stdlib = [node for node in tree.body if isinstance(node, ast.Import | ast.ImportFrom)
              and all(name.split(".")[0] in sys.stdlib_module_names
                      for name in ([a.name for a in node.names] if isinstance(node, ast.Import)
                                   else [node.module or ""]))]
    for node in tree.body:
        if isinstance(node, ast.If) and "__main__" in ast.unparse(node.test):
            body: list[ast.stmt] = list(stdlib)
            for statement in node.body:
                if "parse_args" in ast.unparse(statement):
                    break
                body.append(statement)
            namespace: dict[str, Any] = {"argparse": argparse}
            exec(compile(ast.Module(body, []), str(path), "exec"), namespace)
            parser: argparse.ArgumentParser = namespace["parser"]
            return parser
    raise ValueError(f"{path}: no __main__ block builds a parser")


def computed_defaults(path: Path) -> set[str]:
    """The options whose `default=` is computed when the parser is built (a timestamp in a
    run name): no fact of the release, so the table leaves their default out."""
    computed: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call) and ast.unparse(node.func).endswith("add_argument"):
            for keyword in node.keywords:
                if keyword.arg == "default":
                    try:
                        ast.literal_eval(keyword.value)
                    except ValueError:
                        computed.update(str(arg.value) for arg in node.args if isinstance(arg, ast.Constant))
    return computed


def openrlhf_table() -> dict[str, Any]:
    """Every option of each OpenRLHF training entry (`openrlhf.cli.train_*`), from the parser
    the module itself builds (`openrlhf_parser`): its conversion, default, choices, nargs and
    whether it takes a value, and whether the parser accepts unique prefixes."""
    root = source_root("openrlhf")
    if root is None:
        raise ModuleNotFoundError("openrlhf")
    kinds = {"int": "int", "float": "float", "str": "str"}
    entries: dict[str, Any] = {}
    for path in sorted((root / "cli").glob("train_*.py")):
        parser = openrlhf_parser(path)
        computed = computed_defaults(path)
        options: dict[str, Any] = {}
        for action in parser._actions:
            if not action.option_strings or action.dest == "help":
                continue
            entry: dict[str, Any] = {"dest": action.dest, "value": action.nargs != 0}
            if action.nargs != 0:
                converts = getattr(action.type, "__name__", "str") if action.type else "str"
                entry["type"] = kinds.get(converts, "other")
            if action.nargs not in (None, 0):
                entry["nargs"] = action.nargs
            if action.choices:
                entry["choices"] = [jsonable(choice) for choice in action.choices]
            if not computed & set(action.option_strings):
                with contextlib.suppress(TypeError, ValueError):
                    json.dumps(action.default)
                    entry["default"] = action.default
            for option in action.option_strings:
                options[option] = entry
        entries[f"openrlhf.cli.{path.stem}"] = {"allow_abbrev": parser.allow_abbrev,
                                                "options": dict(sorted(options.items()))}
    return {"engine": "openrlhf", "version": importlib.metadata.version("openrlhf"), "entries": entries}


# --- writing and checking --------------------------------------------------------------------

BUILDERS = {"deepspeed": deepspeed_table, "accelerate": accelerate_table, "verl": verl_table, "hf": hf_table,
            "trl": trl_table, "openrlhf": openrlhf_table}


def render(table: dict[str, Any]) -> str:
    return json.dumps(table, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def changes(old: Any, new: Any, path: str = "") -> Iterator[str]:
    """The dotted paths where two tables differ, for a message a person can act on."""
    if isinstance(old, dict) and isinstance(new, dict):
        for key in sorted(set(old) | set(new)):
            where = f"{path}.{key}" if path else str(key)
            if key not in old:
                yield f"+ {where}"
            elif key not in new:
                yield f"- {where}"
            else:
                yield from changes(old[key], new[key], where)
    elif isinstance(old, list) and isinstance(new, list) and all(isinstance(v, str) for v in old + new) \
            and len(set(old)) == len(old) and len(set(new)) == len(new) and set(old) != set(new):
        yield from (f"- {path}: {v}" for v in old if v not in new)
        yield from (f"+ {path}: {v}" for v in new if v not in old)
    elif old != new:
        yield f"~ {path}: {json.dumps(old)} -> {json.dumps(new)}"


ENGINE_PACKAGES = {"deepspeed": "deepspeed", "accelerate": "accelerate", "verl": "verl", "hf": "transformers",
                   "trl": "trl", "openrlhf": "openrlhf"}
WITH_DEPS = frozenset({"hf"})
"""Engines installed with their own requirements: transformers checks the versions of
huggingface_hub and tokenizers at import, and each release wants its own (none needs torch)."""


APART = frozenset({"openrlhf"})
"""Engines installed apart from `.venv` (OpenRLHF pins vLLM, flash-attn and Ray builds that
cannot install here: `make openrlhf` puts the package alone in `.openrlhf/`); `--check` with
no engine named leaves them out when they are not on the path."""


def scratch_install(engine: str, version: str, into: Path) -> None:
    """`engine==version` in `into`, alone or with its requirements (`WITH_DEPS`); DeepSpeed
    builds from its sdist with no ops, on the environment's torch. Raises CalledProcessError."""
    package = ENGINE_PACKAGES[engine]
    alone = () if engine in WITH_DEPS else ("--no-deps",)
    argv = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *alone,
            "--no-build-isolation", "--target", str(into), f"{package}=={version}"]
    subprocess.run(argv, check=True, env={**os.environ, "DS_BUILD_OPS": "0"})


def build_release(engine: str, version: str, out: Path) -> Path:
    """Install `engine==version` in scratch and write its table under `out`; the table's path."""
    with tempfile.TemporaryDirectory(prefix=f"tables-{engine}-") as scratch:
        scratch_install(engine, version, Path(scratch))
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([scratch, os.environ.get("PYTHONPATH", "")])}
        subprocess.run([sys.executable, __file__, "--out", str(out), engine], check=True, env=env)
    return out / engine / f"{version}.json"


def installed_table(engine: str) -> dict[str, Any]:
    """The table of the release of `engine` this interpreter imports."""
    return BUILDERS[engine]()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with the stored tables, write nothing")
    parser.add_argument("--release", action="append", default=[], metavar="ENGINE==VERSION",
                        help="build this release's table in a scratch install (repeatable)")
    parser.add_argument("--out", type=Path, default=TABLES, help="the tables' folder (default: distrecipe's)")
    parser.add_argument("engines", nargs="*", help=f"some of {', '.join(sorted(BUILDERS))} (default: all)")
    args = parser.parse_args(argv)
    unknown = set(args.engines) - set(BUILDERS)
    if unknown:
        parser.error(f"unknown engine {sorted(unknown)[0]!r}")
    if args.release:
        for wanted in args.release:
            engine, _, version = wanted.partition("==")
            if engine not in BUILDERS or not version:
                names = ", ".join(sorted(BUILDERS))
                parser.error(f"--release takes ENGINE==VERSION with ENGINE one of {names}")
            print(f"wrote {build_release(engine, version, args.out)}")
        return 0
    status = 0
    for engine in args.engines or sorted(BUILDERS):
        if engine in APART and not args.engines and source_root(ENGINE_PACKAGES[engine]) is None:
            continue  # not in this environment: checked where it is installed (its own test)
        built = installed_table(engine)
        text = render(built)
        path = args.out / engine / f"{built['version']}.json"
        if args.check:
            if not path.exists():
                print(f"{engine} {built['version']} is installed but has no table: "
                      f"run python scripts/engine_tables.py {engine}")
                status = 1
                continue
            diff = list(changes(json.loads(path.read_text()), json.loads(text)))
            if diff:
                status = 1
                print(f"{path}: the installed {engine} differs from the stored table of its release:")
                print("\n".join(f"  {line}" for line in diff[:200]))
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            print(f"wrote {path}")
    return status


if __name__ == "__main__":
    sys.exit(main())
