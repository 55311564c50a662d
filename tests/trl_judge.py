"""TRL's own verdict on a config file: `TrlParser.parse_args_and_config` over the dataclasses
of the command that reads it (`trl NAME --config FILE`), at a world size.

The world is the one `GRPOConfig.__post_init__` reads (`TrainingArguments.world_size`, a
property of the process group), set as `lint --engines` sets it for the Trainer
(`judges.hf.on_gpus`), since the CPU runs one process. Imports TRL and transformers, so only oracle tests use it.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any


@contextlib.contextmanager
def world(size: int) -> Iterator[None]:
    """TRL's configs as built on `size` bf16-capable GPUs (`judges.hf.on_gpus`: TRL 1.16's
    configs default to bf16, which a CPU refuses)."""
    from distrecipe.judges.hf import on_gpus

    with on_gpus(size):
        yield


def parser(command: str) -> Any:
    """The `TrlParser` the installed TRL's `trl COMMAND` builds."""
    module = importlib.import_module(f"trl.scripts.{command}")
    return module.make_parser()


def refusal(command: str, config: Path, size: int = 1) -> str | None:
    """Why `trl COMMAND --config CONFIG` stops at start-up at `size` processes, or None."""
    return parser_refusal(parser(command), config, size)


def parser_refusal(trl_parser: Any, config: Path, size: int = 1) -> str | None:
    """Why `trl_parser` (a `TrlParser`, TRL's or a project's own) refuses CONFIG at `size`
    processes, or None."""
    env = dict(os.environ)
    said = io.StringIO()
    try:
        with world(size), contextlib.redirect_stderr(said):
            trl_parser.parse_args_and_config(["--config", str(config), "--report_to", "none"])
    except SystemExit:
        return said.getvalue().strip().splitlines()[-1]
    except ValueError as error:
        return str(error)
    finally:
        os.environ.clear()
        os.environ.update(env)  # `env:` in a config sets variables
    return None


def refusal_of(values: dict[str, Any], command: str, tmp: Path, size: int = 1) -> str | None:
    """`refusal` of a config holding `values`."""
    import yaml

    path = tmp / f"{command}.yaml"
    path.write_text(yaml.safe_dump(values))
    return refusal(command, path, size)


def command_refusal(command: str, argv: list[str], cwd: Path) -> str | None:
    """Why `trl COMMAND ARGV`, run in `cwd`, stops before training: what its CLI does up to
    launching (`TrainingCommand.run`: the command's parser with the remaining arguments
    kept apart, `--accelerate_config` resolved, `accelerate launch`'s parser over the rest),
    then the training script's own parse in each of the processes it starts."""
    import yaml
    from accelerate.commands.launch import launch_command_parser
    from trl.cli.accelerate_config import resolve_accelerate_config_argument
    from trl.cli.commands.training import _subtract_subsequence

    said = io.StringIO()
    here = os.getcwd()
    env = dict(os.environ)
    os.chdir(cwd)
    try:
        with world(1), contextlib.redirect_stderr(said):  # the `trl` process itself
            *_, config_remaining, cli_remaining = parser(command).parse_args_and_config(
                [*argv, "--report_to", "none"], return_remaining_strings=True, separate_remaining_strings=True)
            launch_args = resolve_accelerate_config_argument(config_remaining + cli_remaining)
            script_args = _subtract_subsequence([*argv, "--report_to", "none"], cli_remaining)
            launched = launch_command_parser().parse_args([*launch_args, f"{command}.py", *script_args])
        processes = launched.num_processes
        if processes is None and launched.config_file:
            loaded = yaml.safe_load(Path(launched.config_file).read_text()) or {}
            # `distributed_type: "NO"` starts one process whatever num_processes says
            processes = 1 if loaded.get("distributed_type") == "NO" else loaded.get("num_processes")
        with world(processes or 1), contextlib.redirect_stderr(said):  # each process it launches
            parser(command).parse_args_and_config(script_args)
    except SystemExit:
        return said.getvalue().strip().splitlines()[-1]
    except ValueError as error:
        return str(error)
    finally:
        os.chdir(here)
        os.environ.clear()
        os.environ.update(env)
    return None
