"""Supervision with plain Python children (no torch): codes, signals, timeouts, orphans."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from distrecipe.errors import LaunchError
from distrecipe.launch.supervise import (
    LAUNCH_ID,
    Outcome,
    await_gone,
    carrying,
    new_launch_id,
    running,
    supervise,
)


def run(code: str, *, timeout: float | None = None, grace: float = 30.0,
        signals: tuple[tuple[float, int], ...] = ()) -> tuple[Outcome, str]:
    """Supervise `python -c code`; `signals` are (delay, signum) sent to this process."""
    launch_id = new_launch_id()
    env = {**os.environ, LAUNCH_ID: launch_id}
    for delay, signum in signals:
        threading.Timer(delay, os.kill, (os.getpid(), signum)).start()
    outcome = supervise([sys.executable, "-c", code], env, launch_id=launch_id, timeout=timeout, grace=grace)
    return outcome, launch_id


def wait_for(path: Path) -> str:
    deadline = time.monotonic() + 20
    while not path.exists() or not path.read_text():
        assert time.monotonic() < deadline, f"{path} never written"
        time.sleep(0.05)
    return path.read_text()


def test_the_job_exit_code_comes_back() -> None:
    assert run("raise SystemExit(7)")[0] == Outcome(exit_code=7)
    assert run("pass")[0] == Outcome(exit_code=0)


def test_a_child_killed_by_a_signal_reads_128_plus_n() -> None:
    assert run("import os, signal; os.kill(os.getpid(), signal.SIGKILL)")[0].exit_code == 128 + 9


def test_sigterm_is_forwarded_and_recorded(tmp_path: Path) -> None:
    seen = tmp_path / "seen"
    code = ("import signal, sys, time, pathlib\n"
            f"def stop(n, f): pathlib.Path({str(seen)!r}).write_text(str(n)); sys.exit(0)\n"
            "signal.signal(signal.SIGTERM, stop)\n"
            f"pathlib.Path({str(tmp_path / 'ready')!r}).write_text('1')\n"
            "time.sleep(60)\n")
    launch_id = new_launch_id()
    env = {**os.environ, LAUNCH_ID: launch_id}

    def terminate_when_ready() -> None:
        wait_for(tmp_path / "ready")
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=terminate_when_ready).start()
    outcome = supervise([sys.executable, "-c", code], env, launch_id=launch_id)
    assert outcome == Outcome(exit_code=128 + signal.SIGTERM, signal="SIGTERM")
    assert seen.read_text() == str(int(signal.SIGTERM)), "the job got the signal itself"


def test_a_second_signal_kills_a_job_that_ignores_the_first(tmp_path: Path) -> None:
    code = "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\ntime.sleep(60)\n"
    start = time.monotonic()
    outcome, launch_id = run(code, signals=((1.0, signal.SIGINT), (1.5, signal.SIGINT)))
    assert outcome == Outcome(exit_code=130, signal="SIGINT")
    assert time.monotonic() - start < 10
    assert carrying(launch_id) == set()


def test_timeout_stops_the_job() -> None:
    start = time.monotonic()
    outcome, _ = run("import time; time.sleep(60)", timeout=1.0)
    assert outcome == Outcome(exit_code=124, timed_out=True)
    assert time.monotonic() - start < 10


def test_timeout_then_grace_kills_a_job_that_ignores_sigterm() -> None:
    code = "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\ntime.sleep(60)\n"
    start = time.monotonic()
    assert run(code, timeout=0.5, grace=0.5)[0].exit_code == 124
    assert time.monotonic() - start < 10


def test_no_process_outlives_the_command(tmp_path: Path) -> None:
    """A grandchild in its own session (as torchrun starts ranks) is still ended."""
    pid_file = tmp_path / "pid"
    code = ("import subprocess, sys, pathlib\n"
            "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'],"
            " start_new_session=True)\n"
            f"pathlib.Path({str(pid_file)!r}).write_text(str(p.pid))\n")
    outcome, launch_id = run(code)
    assert outcome.exit_code == 0
    grandchild = int(pid_file.read_text())
    # Gone when the command returns, not merely signalled: its memory and ports are free.
    assert not running(grandchild)
    assert carrying(launch_id) == set()


def test_running_tells_live_zombie_and_reaped_apart() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    assert running(child.pid)
    child.kill()
    assert await_gone({child.pid}, timeout=10) == set(), "a zombie holds nothing: not running"
    child.wait()
    assert not running(child.pid)


def test_a_missing_launcher_is_a_launch_error() -> None:
    launch_id = new_launch_id()
    with pytest.raises(LaunchError, match="cannot start"):
        supervise(["/nonexistent/deepspeed"], {LAUNCH_ID: launch_id}, launch_id=launch_id)


def test_signal_handlers_are_restored() -> None:
    before = signal.getsignal(signal.SIGTERM)
    run("pass")
    assert signal.getsignal(signal.SIGTERM) == before
