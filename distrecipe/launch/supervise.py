"""Run a launcher so that nothing it starts outlives distrecipe.

The launcher runs in its own session (so a terminal's Ctrl-C reaches distrecipe
alone, which decides what happens); SIGINT, SIGTERM and SIGHUP are forwarded to its
process group, where DeepSpeed's runner and torchrun's agent shut their ranks down
cleanly. A second signal, the timeout, or a grace period after either kills every
process of the job. torchrun starts each rank in a new session and an agent killed
hard orphans its ranks, so "every process of the job" is not the process group: it
is every process carrying this launch's unique id in its environment (inherited
across sessions and re-parenting), plus the launcher's live descendants.

While the job runs, the supervisor reads each rank's peak resident memory (`VmHWM` in
`/proc/<pid>/status`, the kernel's own high-water mark, so a sample loses nothing that
happened before it; only growth after the last sample, at most `SAMPLE_SECONDS` before the
rank ended, is missed). A rank is the process carrying `RANK` in its environment whose
parent does not carry the same one (a data loader's workers inherit it).

SIGUSR1 asks the job to save and stop (SLURM sends it before the time limit,
`#SBATCH --signal`): it is passed to the ranks only (as above: `RANK`, which every
launcher sets for its ranks and not for itself), and nothing is killed. The launcher
starts with SIGUSR1 ignored (inherited by what it starts), since SLURM's step signal
reaches every process of the step and a launcher would die of it; a rank that saves on
it installs its own handler.

Exit code: the job's own; 128+N when it died of signal N or distrecipe received
signal N (143 for SIGTERM, 130 for Ctrl-C); 124 when the timeout ended it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

from distrecipe.errors import LaunchError
from distrecipe.launch.output import Tee

LAUNCH_ID = "DISTRECIPE_LAUNCH_ID"
FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
SAVE = signal.SIGUSR1
"""Passed to the ranks alone: save a checkpoint and stop (see the module's docstring)."""
TIMEOUT_EXIT = 124
POLL_SECONDS = 0.1
REAP_SECONDS = 30.0
SAMPLE_SECONDS = 0.25
"""How often the ranks' peak memory is read."""
"""How long distrecipe waits, after the job ended, for killed ranks to be torn down."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Outcome:
    exit_code: int
    signal: str | None = None
    """The signal that ended the job, by name: the first one distrecipe received and
    forwarded, else the one that killed the launcher or (passed on by it) a rank."""
    timed_out: bool = False
    peaks: dict[int, int] = field(default_factory=dict, compare=False)
    """Each rank of this node (by `RANK`) → its peak resident bytes (`VmHWM`), as sampled."""


def new_launch_id() -> str:
    return uuid.uuid4().hex


def _parents() -> dict[int, int]:
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            # comm, in parentheses, may itself hold spaces and parentheses
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    return parents


def descendants(pid: int) -> set[int]:
    """Live processes below `pid` (Linux /proc; empty elsewhere)."""
    if not Path("/proc/self/stat").exists():
        return set()
    children: dict[int, list[int]] = {}
    for child, parent in _parents().items():
        children.setdefault(parent, []).append(child)
    found: set[int] = set()
    stack = [pid]
    while stack:
        for child in children.get(stack.pop(), []):
            if child not in found:
                found.add(child)
                stack.append(child)
    return found


def carrying(launch_id: str) -> set[int]:
    """Processes whose environment holds this launch's id (only our own are readable)."""
    marker = f"{LAUNCH_ID}={launch_id}".encode()
    found: set[int] = set()
    if not Path("/proc/self/environ").exists():
        return found
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                if marker in (entry / "environ").read_bytes().split(b"\0"):
                    found.add(int(entry.name))
            except OSError:
                continue
    return found


def _ignore_save_signal() -> None:
    """In the launcher's process, before exec: SIGUSR1 ignored, which exec keeps and every
    process it starts inherits. SLURM signals every process of a step, launchers included,
    and a launcher dies of a signal it does not handle; a rank that handles SIGUSR1 (to save)
    installs its handler over this, and one that does not goes on unharmed."""
    signal.signal(SAVE, signal.SIG_IGN)


def job_processes(leader: int, launch_id: str) -> set[int]:
    return (descendants(leader) | carrying(launch_id) | {leader}) - {os.getpid()}


def peak_rss(pid: int) -> int | None:
    """The process's peak resident set (`VmHWM`), in bytes; None when it cannot be read."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    for line in status.splitlines():
        if line.startswith("VmHWM:"):
            value, unit = line.split()[1:3]
            return int(value) * 1024 if unit == "kB" else int(value)
    return None


def rank_of(pid: int) -> int | None:
    """`RANK` from the process's environment (only our own processes' are readable)."""
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return None
    for item in environ:
        if item.startswith(b"RANK="):
            value = item[5:].decode(errors="replace")
            return int(value) if value.isdigit() else None
    return None


def sample_peaks(pids: set[int], peaks: dict[int, int]) -> None:
    """Raise `peaks` (rank → bytes) to what the ranks among `pids` report now."""
    parents = _parents()
    ranks = {pid: rank_of(pid) for pid in pids}
    for pid, rank in ranks.items():
        if rank is None or ranks.get(parents.get(pid, 0)) == rank:
            continue  # not a rank, or a child a rank started (a data loader worker)
        peak = peak_rss(pid)
        if peak is not None:
            peaks[rank] = max(peaks.get(rank, 0), peak)


def kill_all(pids: set[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            continue


def running(pid: int) -> bool:
    """Alive or still dying; False once gone or a zombie (a zombie holds no memory or GPU).

    A process killed with SIGKILL keeps its memory, GPU contexts and sockets until the
    kernel has torn it down, after its environment has already become unreadable.
    Linux /proc, like `descendants` and `carrying`: elsewhere no job process is known.
    """
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def await_gone(pids: set[int], timeout: float) -> set[int]:
    """Wait until none of `pids` is running, at most `timeout` seconds; those still running."""
    deadline = time.monotonic() + timeout
    left = {pid for pid in pids if running(pid)}
    while left and time.monotonic() < deadline:
        time.sleep(POLL_SECONDS)
        left = {pid for pid in left if running(pid)}
    return left


def signal_group(leader: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(leader, signum)


@dataclass(kw_only=True)
class _Job:
    """The started launcher, and every process of the job seen so far.

    Ranks are remembered whenever distrecipe signals the job: once their launcher has
    stopped them they are re-parented and, while dying, their environment no longer
    names the launch, yet they hold memory, GPUs and ports until they are gone.
    """

    proc: subprocess.Popen[bytes]
    launch_id: str
    grace: float
    kill_at: list[float] = field(default_factory=list)
    seen: set[int] = field(default_factory=set)
    peaks: dict[int, int] = field(default_factory=dict)
    sampled: float = 0.0

    def sample(self, moment: float) -> None:
        """Read the ranks' peak memory, at most every `SAMPLE_SECONDS`."""
        if moment - self.sampled >= SAMPLE_SECONDS:
            self.sampled = moment
            sample_peaks(descendants(self.proc.pid), self.peaks)

    def processes(self) -> set[int]:
        found = job_processes(self.proc.pid, self.launch_id)
        self.seen |= found - {self.proc.pid}
        return found

    def stop(self, signum: int) -> None:
        """Forward `signum` to the launcher's group; kill everything after the grace period."""
        self.processes()
        signal_group(self.proc.pid, signum)
        self.kill_at.append(time.monotonic() + self.grace)

    def kill(self) -> None:
        kill_all(self.processes())

    def ask_to_save(self) -> None:
        """SIGUSR1 to the ranks (`rank_of`: `RANK` in their environment), not to the launchers,
        nor to a rank's own children (data-loader workers inherit the variable)."""
        parents = _parents()
        ranks = {pid: rank_of(pid) for pid in self.processes() - {self.proc.pid}}
        for pid, rank in ranks.items():
            if rank is not None and ranks.get(parents.get(pid, 0)) != rank:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, SAVE)


def supervise(argv: Sequence[str], env: Mapping[str, str], *, launch_id: str,
              timeout: float | None = None, grace: float = 30.0, keep_output: Path | None = None) -> Outcome:
    """Run `argv` with `env` (which must carry `LAUNCH_ID=launch_id`) to its end;
    `keep_output`: a directory that keeps the job's stdout and stderr (`launch.output`)."""
    if env.get(LAUNCH_ID) != launch_id:
        raise ValueError(f"env must carry {LAUNCH_ID}={launch_id} so the job's processes can be found")
    received: list[int] = []
    started: list[_Job] = []

    def on_signal(signum: int, frame: FrameType | None) -> None:
        received.append(signum)
        if not started:  # forwarded as soon as the job exists
            return
        if len(received) == 1:
            started[0].stop(signum)
        else:
            started[0].kill()

    # Handlers go in before the start: a signal in between would otherwise kill
    # distrecipe by default and leave the job, in its own session, running alone.
    def on_save(signum: int, frame: FrameType | None) -> None:
        if started:
            started[0].ask_to_save()

    main_thread = threading.current_thread() is threading.main_thread()
    previous = {sig: signal.signal(sig, on_signal) for sig in FORWARDED} if main_thread else {}
    if main_thread:
        previous[SAVE] = signal.signal(SAVE, on_save)
    try:
        try:
            piped = subprocess.PIPE if keep_output is not None else None
            proc = subprocess.Popen(list(argv), env=dict(env), start_new_session=True,
                                    preexec_fn=_ignore_save_signal, stdout=piped, stderr=piped)
        except OSError as exc:
            raise LaunchError(f"cannot start {argv[0]}: {exc.strerror or exc}") from None
        tee = Tee(keep_output, {"stdout": proc.stdout, "stderr": proc.stderr}) if keep_output else None
        job = _Job(proc=proc, launch_id=launch_id, grace=grace)
        started.append(job)
        if received:  # arrived before `started` said whom to tell
            job.stop(received[0])
        try:
            return _wait(job, received, timeout)
        finally:
            if tee is not None:
                tee.join()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _wait(job: _Job, received: list[int], timeout: float | None) -> Outcome:
    """Poll the launcher to its end, escalating on timeout or grace; then clear up."""
    proc = job.proc
    deadline = None if timeout is None else time.monotonic() + timeout
    timed_out = False
    try:
        while proc.poll() is None:
            time.sleep(POLL_SECONDS)
            moment = time.monotonic()
            if deadline is not None and moment > deadline and not timed_out:
                timed_out = True
                job.stop(signal.SIGTERM)
            if job.kill_at and moment > min(job.kill_at):
                job.kill()
            job.sample(moment)
    finally:
        kill_all(job.processes() - {proc.pid})
        if proc.poll() is None:
            kill_all({proc.pid})
        proc.wait()
        # Wait until the kernel has torn the ranks down, so that a launch that follows
        # finds their GPUs and ports free.
        await_gone(job.seen, REAP_SECONDS)
    if timed_out:
        return Outcome(exit_code=TIMEOUT_EXIT, timed_out=True, peaks=job.peaks)
    if received:
        return Outcome(exit_code=128 + received[0], signal=signal.Signals(received[0]).name, peaks=job.peaks)
    return dataclasses.replace(exit_outcome(proc.returncode), peaks=job.peaks)


WRAPPED: dict[int, signal.Signals] = {256 - s: s for s in (
    signal.SIGKILL, signal.SIGSEGV, signal.SIGABRT, signal.SIGBUS, signal.SIGFPE, signal.SIGILL,
    signal.SIGTERM, signal.SIGINT)}
"""Exit statuses 256 − N that mean "a rank died of signal N": DeepSpeed's launcher passes a
rank's −9 to `sys.exit`, which the system wraps to 247. Only the signals that end ranks
(kill, crash, abort, stop) are read this way; a program's own 255 (`exit(-1)`) is not."""


def exit_outcome(status: int) -> Outcome:
    """The launcher's status as the README promises it: 128+N after signal N, named.

    `subprocess` reports a launcher killed by N as −N; a launcher that passed a rank's
    −N on gives 256 − N (see `WRAPPED`).
    """
    if status < 0:
        return Outcome(exit_code=128 - status, signal=signal.Signals(-status).name)
    if status in WRAPPED:
        return Outcome(exit_code=128 + WRAPPED[status], signal=WRAPPED[status].name)
    return Outcome(exit_code=status)
