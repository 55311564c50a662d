"""The `distrecipe` command line: thin click wrappers around the library.

`main(argv) -> int` is the only entry point. User errors (`DistrecipeError`) become
one line, `file:line:col: error: message`, and exit code 2. Anything else escaping a
command is a bug in distrecipe: the user gets one line saying so and where the
traceback was saved, never a raw traceback. Ctrl-C exits 130.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Sequence

import click

from distrecipe import __version__
from distrecipe.errors import DistrecipeError
from distrecipe.output import one_line

COMMANDS: dict[str, str] = {
    "calibrate": "distrecipe.commands.calibrate",
    "compile": "distrecipe.commands.compile",
    "launch": "distrecipe.commands.launch",
    "plan": "distrecipe.commands.plan",
    "resolve": "distrecipe.commands.resolve",
    "schema": "distrecipe.commands.schema",
    "lint": "distrecipe.commands.lint",
    "explain": "distrecipe.commands.explain",
    "import": "distrecipe.commands.import_",
    "diff": "distrecipe.commands.diff",
    "init": "distrecipe.commands.init",
    "checkpoint": "distrecipe.commands.checkpoint",
}
"""Command name → module defining `command`. Imported only when that command runs,
so `distrecipe compile` never pays for what `launch` or `plan` import."""


class _LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        module = COMMANDS.get(cmd_name)
        if module is None:
            return None
        command: click.Command = importlib.import_module(module).command
        return command


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="distrecipe")
def cli() -> None:
    """One declarative recipe for distributed training: validate, resolve, emit, launch."""


def _never_fail_to_print() -> None:
    """Print what a terminal's encoding cannot show as escapes instead of crashing.

    Output holds Ψ, ×, → and names from user files; on a cp1252 or ASCII console
    Python's default `strict` handler would turn a finished command into a traceback.
    """
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None and getattr(stream, "errors", "strict") == "strict":
            reconfigure(errors="backslashreplace")


def main(argv: Sequence[str] | None = None) -> int:
    _never_fail_to_print()
    try:
        result = cli.main(args=list(argv) if argv is not None else None,
                          prog_name="distrecipe", standalone_mode=False)
    except DistrecipeError as exc:
        prefix = f"{exc.where}: " if exc.where else "distrecipe: "
        click.echo(one_line(f"{prefix}error: {exc.message}"), err=True)
        return exc.exit_code
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.ClickException as exc:  # a usage error: the same one line as every other error
        click.echo(one_line(f"distrecipe: error: {exc.format_message()}"), err=True)
        return exc.exit_code
    except (click.exceptions.Abort, KeyboardInterrupt):
        click.echo("distrecipe: interrupted", err=True)
        return 130
    except Exception:  # the one place that turns a bug into a report
        log = save_crash_report()
        kind = sys.exc_info()[0]
        click.echo(
            f"distrecipe: internal error ({kind.__name__ if kind else 'unknown'}); this is a bug "
            f"in distrecipe, please report it with the traceback saved in {log}",
            err=True,
        )
        return 3
    return result if isinstance(result, int) else 0


def save_crash_report() -> str:
    """Save the current traceback to a new file only this user can read; returns its path.

    The file is per user (the user's cache directory, `$XDG_CACHE_HOME/distrecipe`)
    and per run (`crash-<pid>-<time>.log`), created exclusively with mode 0600 and
    without following symlinks: concurrent crashes never overwrite each other, and a
    link planted by another user cannot redirect the write. Without a usable cache
    directory a fresh temporary file (`tempfile.mkstemp`, the same guarantees) is used.
    """
    import time
    import traceback
    from pathlib import Path

    text = traceback.format_exc().encode("utf-8", "backslashreplace")
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "distrecipe"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    try:
        cache.mkdir(mode=0o700, parents=True, exist_ok=True)
        path = str(cache / f"crash-{os.getpid()}-{time.time_ns()}.log")
        fd = os.open(path, flags, 0o600)
    except (OSError, RuntimeError):  # no home, a read-only cache: a private temporary instead
        import tempfile

        fd, path = tempfile.mkstemp(prefix="distrecipe-crash-", suffix=".log")
    with os.fdopen(fd, "wb") as handle:
        handle.write(text)
    return path
