"""Accelerate as a judge, without GPUs: its loader, `accelerate launch`'s environment,
and the plugin every worker then builds from that environment.

Three steps, each Accelerate's own code: `load_config_from_file` (unknown keys, bad
values), `accelerate launch`'s argument merge and the environment it exports
(`_validate_launch_command`, then `prepare_deepspeed_cmd_env` or
`prepare_multi_gpu_env`), and `DeepSpeedPlugin()` / `FullyShardedDataParallelPlugin()`
constructed under that environment, as `Accelerator()` does in each worker. What
needs a live process group (the Accelerator itself) is not run.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from unittest import mock

from distrecipe.judges import Note, Verdict, first_line, needed, patched, version

SCRIPT = "train.py"
"""The training script named on the launch command line; never run."""


def launch_env(config_file: Path, flags: tuple[str, ...] = ()) -> tuple[Any, dict[str, str]]:
    """`accelerate launch --config_file FILE [flags] train.py`: the merged arguments and
    the environment the workers get. Raises what `accelerate launch` raises.

    The port is judged free: whether this machine has a process on it says nothing of
    the file, and Accelerate's check would make the verdict depend on what else runs.
    """
    from accelerate.commands import launch
    from accelerate.utils import launch as launch_utils

    args = launch.launch_command_parser().parse_args(["--config_file", str(config_file), *flags, SCRIPT])
    args, defaults, mp_from_config = needed(launch, "_validate_launch_command")(args)
    with patched(launch_utils, "is_port_in_use", return_value=False):
        if args.use_deepspeed:
            # What launch_command does before deepspeed_launcher (accelerate/commands/launch.py).
            fields = list(defaults.deepspeed_config.keys()) if defaults else []
            if mp_from_config:
                fields.append("mixed_precision")
            args.deepspeed_fields_from_accelerate_config = ",".join(fields)
            _, env = needed(launch_utils, "prepare_deepspeed_cmd_env")(args)
        elif args.use_fsdp or args.multi_gpu or args.use_megatron_lm:
            env = needed(launch_utils, "prepare_multi_gpu_env")(args)
        else:
            _, env = needed(launch_utils, "prepare_simple_launcher_cmd_env")(args)
    return args, {key: str(value) for key, value in env.items()}


def worker_plugin(args: Any, env: Mapping[str, str]) -> Any:
    """The plugin a worker builds from `env` (None for plain DDP); raises what it raises.

    Built as on a CUDA machine: FSDP's `sync_module_states` asks which accelerator
    this is, the one thing here a CPU cannot answer. torch's public API answers "CUDA,
    device 0", so no Accelerate private name is patched: Accelerate 1.15 asks
    `torch.cuda.is_available()` through its own helper, 1.16 `torch.accelerator`.
    """
    import torch
    from accelerate.utils import dataclasses as plugins

    cuda = torch.device("cuda", 0)
    with contextlib.ExitStack() as stack:
        stack.enter_context(mock.patch.dict(os.environ, dict(env), clear=True))
        stack.enter_context(patched(torch.cuda, "is_available", return_value=True))
        stack.enter_context(patched(torch.cuda, "current_device", return_value=0))
        stack.enter_context(patched(torch.cuda, "device_count", return_value=1))
        if hasattr(torch, "accelerator"):  # torch >= 2.6
            stack.enter_context(patched(torch.accelerator, "current_accelerator", return_value=cuda))
        if args.use_deepspeed:
            return plugins.DeepSpeedPlugin()
        if args.use_fsdp:
            return plugins.FullyShardedDataParallelPlugin()
    return None


def plugin_warnings(config_file: Path) -> list[str]:
    """What Accelerate logs as a warning while a worker builds its plugin from `config_file`
    (launched from the file's directory): `FullyShardedDataParallelPlugin` warns of the
    FSDP1 settings it drops under `fsdp_version: 2`, one line each. Raises what the
    launch or the plugin raises."""
    import logging

    lines: list[str] = []

    class _Kept(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.levelno >= logging.WARNING:
                lines.extend(line for line in record.getMessage().splitlines() if line.strip())

    logger = logging.getLogger("accelerate")
    handler = _Kept()
    logger.addHandler(handler)
    try:
        with contextlib.chdir(config_file.resolve().parent):
            args, env = launch_env(config_file.resolve())
            worker_plugin(args, env)
    finally:
        logger.removeHandler(handler)
    return lines


class _Initialized(Exception):
    """Raised in place of `deepspeed.initialize`: the config is the one it would be given."""

    def __init__(self, config: Any) -> None:
        super().__init__("deepspeed.initialize")
        self.config = config


def prepared_config(args: Any, env: Mapping[str, str], plugin: Any, *, batch_size: int = 4,
                    hidden_size: int = 64) -> dict[str, Any]:
    """The ds_config a plain Accelerate loop hands `deepspeed.initialize`: what
    `accelerator.prepare(model, optimizer, dataloader[, scheduler])` makes of the worker's
    `plugin`, in `Accelerator._prepare_deepspeed`, Accelerate's own code, run up to the
    call of `deepspeed.initialize` (which needs a process group). Raises what Accelerate
    raises on the way: an `"auto"` it does not fill ("not found in kwargs"), the
    arithmetic of a number written as a string (TypeError).

    The loop is the one Accelerate's examples write: a model with a `config.hidden_size`,
    `DummyOptim`/`DummyScheduler` where the ds_config has an optimizer/scheduler section
    (else a torch AdamW and no scheduler), a DataLoader of `batch_size`; the Accelerator's
    accumulation is what the launch exported, its processes the launch's.
    """
    import logging
    from types import SimpleNamespace

    import deepspeed
    import torch
    from accelerate import accelerator
    from accelerate.utils import DummyOptim, DummyScheduler

    def initialize(**kwargs: Any) -> Any:
        raise _Initialized(kwargs.get("config_params"))

    model = torch.nn.Linear(2, 2)
    model.config = SimpleNamespace(hidden_size=hidden_size)  # type: ignore[assignment]
    written = plugin.deepspeed_config
    optimizer: Any = (DummyOptim(model.parameters()) if "optimizer" in written
                      else torch.optim.AdamW(model.parameters()))
    objects: list[Any] = [torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(torch.zeros(2 * batch_size, 2)), batch_size=batch_size),
                          model, optimizer]
    if "scheduler" in written:
        objects.append(DummyScheduler(optimizer, total_num_steps=1000, warmup_num_steps=10))
    with mock.patch.dict(os.environ, dict(env)):
        plugin.set_mixed_precision(env.get("ACCELERATE_MIXED_PRECISION", "no"))
    stand_in = SimpleNamespace(
        deepspeed_plugin=plugin, parallelism_config=None, split_batches=False, fp8_backend=None,
        device=torch.device("cpu"), num_processes=int(args.num_processes or 1),
        gradient_accumulation_steps=int(env.get("ACCELERATE_GRADIENT_ACCUMULATION_STEPS", "1")),
        _prepare_one=lambda obj, first_pass=False, device_placement=None: obj)
    prepare = needed(accelerator.Accelerator, "_prepare_deepspeed")
    # Accelerate's logger wants an initialised state; the judge has none, and its log says nothing
    with patched(deepspeed, "initialize", new=initialize), \
            patched(accelerator, "logger", new=logging.getLogger("distrecipe.judges.accelerate")):
        try:
            prepare(stand_in, *objects)
        except _Initialized as done:
            return dict(done.config)
    raise AssertionError("Accelerator._prepare_deepspeed returned without calling deepspeed.initialize")


def refusals() -> tuple[type[BaseException], ...]:
    """What Accelerate raises on a config it cannot run: its own checks, and the crash of
    its code on a value of another type (`mixed_precision: false` is a YAML boolean, whose
    `.lower()` fails in `prepare_multi_gpu_env`)."""
    return (ValueError, TypeError, KeyError, AssertionError, NotImplementedError, FileNotFoundError,
            AttributeError)


def loader_refusal(config_file: Path) -> ValueError | None:
    """What Accelerate's config loader raises on `config_file` (unknown top-level keys, a
    missing `distributed_type`), or None when it reads the file: the first of the judge's
    three steps, alone, for the oracle tests that compare it with lint's key rules."""
    from accelerate.commands.config.config_args import load_config_from_file

    try:
        load_config_from_file(str(config_file))
    except ValueError as exc:
        return exc
    return None


def judge(config_file: Path, *, directory: Path | None = None, flags: tuple[str, ...] = ()) -> Verdict:
    """Accelerate's verdict on one config file, launched from `directory` (where a
    relative `deepspeed_config_file` is found; default: the file's own directory)."""
    from accelerate.commands.config.config_args import load_config_from_file

    engine = version("accelerate")
    config_file = config_file.resolve()
    context = "launched from " + ("the file's directory" if directory is None else str(directory))
    with contextlib.chdir(directory or config_file.parent):
        try:
            load_config_from_file(str(config_file))
        except refusals() as exc:
            message = first_line(exc).replace(str(config_file), config_file.name)
            keys = re.findall(r"'([^']+)'", message.partition("unknown keys")[2].partition(")")[0])
            notes = tuple(Note((key,), f"{key}: not a key Accelerate's config knows") for key in keys)
            return Verdict("refuses", engine, f"loader: {message}", notes or (Note((), message),), context)
        try:
            args, env = launch_env(config_file, flags)
        except RuntimeError as exc:  # the machine lacks something (FP8 kernels), not the file
            return Verdict("not-judgeable", engine, f"launch: {first_line(exc)}", (), context)
        except refusals() as exc:
            return Verdict("refuses", engine, f"launch: {first_line(exc)}", (Note((), first_line(exc)),),
                           context)
        try:
            plugin = worker_plugin(args, env)
        except refusals() as exc:
            return Verdict("refuses", engine, f"{_plugin_name(args)}: {first_line(exc)}",
                           (Note((), first_line(exc)),), context)
        differs = _unread(config_file, args) + _differences(args, env, plugin)
    if differs:
        return Verdict("differs", engine, "; ".join(n.message for n in differs), tuple(differs), context)
    return Verdict("accepts", engine, "", (), context)


def _unread(config_file: Path, args: Any) -> list[Note]:
    """Keys of the file's nested sections that `accelerate launch` sets on its arguments
    and nothing reads: `_validate_launch_command` copies each key of `fsdp_config`,
    `parallelism_config`, ... onto the parsed arguments, where a name no launch option
    has is set and never read (observed: attributes the launch parser does not define)."""
    import dataclasses

    import yaml
    from accelerate.commands import launch
    from accelerate.commands.config.config_args import ClusterConfig

    options = {action.dest for action in launch.launch_command_parser()._actions}
    top = {f.name for f in dataclasses.fields(ClusterConfig)} | {"nondefault"}
    unread = set(vars(args)) - options - top
    data = yaml.safe_load(config_file.read_text()) if config_file.suffix != ".json" else json.loads(
        config_file.read_text())
    notes = []
    for section, keys in (data.items() if isinstance(data, dict) else ()):
        for key in keys if isinstance(keys, dict) else ():
            if any(name == key or name.endswith(f"_{key}") for name in unread):
                notes.append(Note((section, key), f"{section}.{key}: no accelerate launch option reads it "
                                                  "(set on the launch arguments and never read)"))
    return notes


def _plugin_name(args: Any) -> str:
    return "DeepSpeedPlugin()" if args.use_deepspeed else "FullyShardedDataParallelPlugin()"


def _differences(args: Any, env: Mapping[str, str], plugin: Any) -> list[Note]:
    """What the worker runs that the file does not say: a ds_config file without
    `gradient_accumulation_steps` is run with 1, whatever else the config says."""
    ds_file = env.get("ACCELERATE_DEEPSPEED_CONFIG_FILE", "none")
    if plugin is None or not args.use_deepspeed or ds_file == "none":
        return []
    written = json.loads(Path(ds_file).read_text())
    if "gradient_accumulation_steps" in written:
        return []
    return [Note(("deepspeed_config", "deepspeed_config_file"),
                 "the ds_config states no gradient_accumulation_steps: DeepSpeedPlugin runs with 1")]
