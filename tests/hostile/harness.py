"""Run one hostile input through the CLI in-process and hold it to the README's promises.

Every input runs in a sandbox directory (the working directory for the call): inputs
under `in/`, the only place a command may write is `out/`, the user cache is
`cache/`. After the call the sandbox is compared with its state before, so a write
anywhere else (or a half-written `out/` after a failure) is caught wherever it lands.

The promises checked for each input:

* the exit code is 0, 1 or 2, never 3 (an internal error) and never a traceback;
* on exit 2 every error is one line in distrecipe's format (`WHERE: error: ...`, never
  click's `Usage:`/`Error:`), and carries `file:line:col` when the input has one;
* nothing is written outside `out/`; a failed `compile -o out` leaves `out/` as it was;
* each input takes under `MAX_SECONDS` of CPU (process time, so a busy CI machine
  does not make it flaky) and never hangs (a wall-clock alarm ends it).
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import resource
import shutil
import signal
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

from distrecipe.cli import main

MAX_SECONDS = 2.0
"""CPU seconds one input may take (the issue's bound)."""
HANG_SECONDS = 20
"""Wall-clock seconds after which an input counts as hung (FIFOs, /dev/zero)."""
MAX_MEMORY = 512 << 20
"""Address space one input may add (the issue's bound); beyond it allocation fails."""

POSITIONED = re.compile(r"^.+:\d+:\d+: error: \S")
"""`file:line:col: error: message`, what every error about a place in an input looks like."""
ONE_LINE = re.compile(r"^\S.*: error: \S")
"""Any distrecipe error line (`file: error:` or `distrecipe: error:` where there is no place)."""
OTHER_LINES = re.compile(
    r"^(.+: (warning|info|note|DR\d{3})\b|wrote |distrecipe: (dry run|port|run directory)|\d+ files? checked)"
)
"""stderr lines that are not errors: findings, notes, `wrote PATH`, launch's remarks."""


@dataclass(frozen=True)
class Case:
    """One hostile input: the command line, the files it reads, what its error must carry.

    `args` name files relative to the sandbox (`in/recipe.yaml`). `positioned` says
    the fault sits at a place in an input, so an exit-2 error must say `file:line:col`.
    `special` makes files that are not plain text (FIFO, symlinks, directories).
    """

    label: str
    args: tuple[str, ...]
    files: dict[str, bytes] = field(default_factory=dict)
    positioned: bool = True
    special: tuple[tuple[str, str, str], ...] = ()
    """`(kind, name, target)`: kind is fifo, symlink, dir or copy-of-out (stale output)."""

    @property
    def command(self) -> str:
        return self.args[0]


@dataclass
class Tally:
    """What the sweeps saw, per command: printed at the end of the session."""

    inputs: Counter[str] = field(default_factory=Counter)
    codes: dict[str, Counter[int]] = field(default_factory=dict)
    slowest: tuple[float, str] = (0.0, "")
    unpositioned: int = 0
    outside_writes: int = 0
    partial_writes: int = 0
    crashes: int = 0

    def add(self, case: Case, code: int, seconds: float) -> None:
        self.inputs[case.command] += 1
        self.codes.setdefault(case.command, Counter())[code] += 1
        if seconds > self.slowest[0]:
            self.slowest = (seconds, f"{case.label} ({case.command})")

    def lines(self) -> list[str]:
        out = [f"hostile inputs: {sum(self.inputs.values())}"]
        for command in sorted(self.inputs):
            codes = ", ".join(f"exit {c}: {n}" for c, n in sorted(self.codes[command].items()))
            out.append(f"  {command:8} {self.inputs[command]:6}  ({codes})")
        out.append(f"crashes: {self.crashes}; errors without a position: {self.unpositioned}; "
                   f"writes outside out/: {self.outside_writes}; partial writes: {self.partial_writes}")
        out.append(f"slowest input: {self.slowest[0] * 1000:.0f} ms CPU, {self.slowest[1]}")
        return out


TALLY = Tally()


class Hung(BaseException):
    """Raised by the alarm; a BaseException so the CLI's `except Exception` cannot eat it."""


def _alarm(signum: int, frame: FrameType | None) -> None:
    raise Hung


def _snapshot(root: Path) -> dict[str, tuple[int, int, str]]:
    """Every entry under `root` with its size, mtime and kind: the state to compare with."""
    seen: dict[str, tuple[int, int, str]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = os.path.join(dirpath, name)
            st = os.lstat(path)
            kind = "dir" if os.path.isdir(path) and not os.path.islink(path) else "file"
            seen[os.path.relpath(path, root)] = (st.st_size, st.st_mtime_ns, kind)
    return seen


class Sandbox:
    """A working directory reset for every input (see the module docstring)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def prepare(self, case: Case) -> None:
        for part in ("in", "out", "cache", "runs"):
            shutil.rmtree(self.root / part, ignore_errors=True)
        for leftover in self.root.iterdir():  # anything a previous input wrote
            if leftover.is_dir() and not leftover.is_symlink():
                shutil.rmtree(leftover)
            else:
                leftover.unlink()
        (self.root / "in").mkdir()
        (self.root / "cache").mkdir()
        for name, data in case.files.items():
            path = self.root / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        for kind, name, target in case.special:
            path = self.root / name
            path.parent.mkdir(parents=True, exist_ok=True)
            if kind == "fifo":
                os.mkfifo(path)
            elif kind == "symlink":
                path.symlink_to(target)
            elif kind == "dir":
                path.mkdir()
            elif kind == "file":
                path.write_text(target, encoding="utf-8")


@contextlib.contextmanager
def _isolated(root: Path) -> Iterator[None]:
    """The sandbox as working directory and user cache; restored afterwards."""
    before = os.getcwd()
    saved = {k: os.environ.get(k) for k in ("XDG_CACHE_HOME", "HOME")}
    os.chdir(root)
    os.environ["XDG_CACHE_HOME"] = str(root / "cache")
    os.environ["HOME"] = str(root / "cache")
    try:
        yield
    finally:
        os.chdir(before)
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@contextlib.contextmanager
def _memory_bound() -> Iterator[None]:
    """Cap this process's address space at its current size + `MAX_MEMORY` while a case runs.

    An input that would grow memory without bound (`/dev/zero`) then meets a
    MemoryError, which the CLI reports as an internal error: a crash the sweep counts.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    with open("/proc/self/statm", encoding="ascii") as statm:
        size = int(statm.read().split()[0]) * resource.getpagesize()
    resource.setrlimit(resource.RLIMIT_AS, (size + MAX_MEMORY, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


@dataclass(frozen=True)
class Outcome:
    code: int
    out: str
    err: str
    seconds: float


def run_case(sandbox: Sandbox, case: Case) -> tuple[Outcome, list[str]]:
    """Run `case`; returns its outcome and every promise it broke (empty: all kept)."""
    sandbox.prepare(case)
    before = _snapshot(sandbox.root)
    out, err = io.StringIO(), io.StringIO()
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, HANG_SECONDS)
    start = time.process_time()
    try:
        with _isolated(sandbox.root), _memory_bound(), contextlib.redirect_stdout(out), \
                contextlib.redirect_stderr(err):
            code = main(list(case.args))
    except Hung:
        code = -1
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    seconds = time.process_time() - start
    after = _snapshot(sandbox.root)
    outcome = Outcome(code, out.getvalue(), err.getvalue(), seconds)
    TALLY.add(case, code, seconds)
    return outcome, _broken(case, outcome, before, after)


def _broken(case: Case, outcome: Outcome, before: dict[str, tuple[int, int, str]],
            after: dict[str, tuple[int, int, str]]) -> list[str]:
    problems: list[str] = []
    if outcome.code == -1:
        problems.append(f"hung for more than {HANG_SECONDS} s")
    elif outcome.code not in (0, 1, 2):
        TALLY.crashes += 1
        problems.append(f"exit {outcome.code}: {outcome.err.strip()[-300:]}")
    if "Traceback" in outcome.err:
        problems.append("traceback on stderr")
    if outcome.code == 2:
        problems += _error_lines(case, outcome.err)
    changed = {p for p in set(before) | set(after) if before.get(p) != after.get(p)}
    outside = sorted(p for p in changed if p != "out" and not p.startswith("out" + os.sep)
                     and not p.startswith("cache" + os.sep))
    if outside:
        TALLY.outside_writes += 1
        problems.append(f"wrote outside out/: {outside[:3]}")
    if outcome.code != 0 and any(p.startswith("out") for p in changed):
        TALLY.partial_writes += 1
        problems.append(f"failed, yet changed out/: {sorted(changed)[:3]}")
    if outcome.seconds > MAX_SECONDS:
        problems.append(f"took {outcome.seconds:.1f} s of CPU")
    return problems


def _error_lines(case: Case, err: str) -> list[str]:
    lines = err.splitlines()
    errors = [line for line in lines if ONE_LINE.match(line)]
    problems: list[str] = []
    if not errors:
        problems.append(f"exit 2 without a distrecipe error line: {err.strip()[:300]!r}")
    strays = [line for line in lines if not ONE_LINE.match(line) and not OTHER_LINES.match(line)]
    if strays:
        problems.append(f"error spread over several lines or in click's format: {err.strip()[:300]!r}")
    if case.positioned and errors and not all(POSITIONED.match(line) for line in errors):
        TALLY.unpositioned += 1
        problems.append(f"error without file:line:col: {errors[0][:300]!r}")
    return problems


def sweep(sandbox: Sandbox, cases: Sequence[Case], *, stride: int = 1) -> list[str]:
    """Run every `stride`-th case; returns one line per distinct broken promise."""
    failures: dict[str, str] = {}
    for case in cases[::stride]:
        _, problems = run_case(sandbox, case)
        for problem in problems:
            kind = re.sub(r"\d+", "N", problem)[:120]  # one line per class, not per input
            failures.setdefault(kind, f"{case.label}: {case.args}: {problem}")
    return list(failures.values())
