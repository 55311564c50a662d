"""A two-raylet Ray cluster on this machine, on loopback, stopped by process group.

`ray start --head --block` and a second `ray start --block --address` each run in a
session of their own (`start_new_session`), so everything a raylet spawns is in its
process group and `stop` ends exactly those: SIGTERM to the second node's leader,
then the head's, a wait, then SIGKILL to whatever is left of the two groups. Never
`ray stop`: it kills Ray processes machine-wide by name.

Pitfalls met on this machine (`/work/research/platforms/ray_local.sh`): the second
raylet needs its own dashboard-agent port, the job's `python` comes from the raylet's
PATH, and `--node-ip-address 127.0.0.1` is rewritten to the routable address (so
nothing here keys on a node's address).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.ports import free_port


@dataclass
class RayCluster:
    """Two nodes with `gpus` fake GPUs each (Ray counts them; nothing uses them)."""

    workdir: Path
    gpus: int = 1
    cpus: int = 2
    extra_path: str = ""
    """Prepended to the nodes' PYTHONPATH (the jobs' Python reads it from the raylet)."""
    gcs_port: int = field(default_factory=free_port)
    dashboard_port: int = field(default_factory=free_port)
    leaders: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def env(self) -> dict[str, str]:
        bin_dir = str(Path(sys.executable).parent)
        python_path = os.pathsep.join(p for p in (self.extra_path, os.environ.get("PYTHONPATH", "")) if p)
        return {**os.environ, "PATH": os.pathsep.join([bin_dir, os.environ["PATH"]]), "PYTHONPATH": python_path,
                "RAY_USAGE_STATS_ENABLED": "0", "RAY_ENABLE_UV_RUN_RUNTIME_ENV": "0"}

    @property
    def address(self) -> str:
        return f"http://127.0.0.1:{self.dashboard_port}"

    def ray(self) -> str:
        return str(Path(sys.executable).parent / "ray")

    def _start(self, name: str, *args: str) -> None:
        log = (self.workdir / f"{name}.log").open("wb")
        self.leaders.append(subprocess.Popen(
            [self.ray(), "start", "--block", "--node-ip-address=127.0.0.1", f"--num-cpus={self.cpus}",
             f"--num-gpus={self.gpus}", "--disable-usage-stats", *args],
            env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True))

    def start(self, timeout: float = 180) -> None:
        self._start("head", "--head", f"--port={self.gcs_port}", "--include-dashboard=true",
                    "--dashboard-host=127.0.0.1", f"--dashboard-port={self.dashboard_port}",
                    f"--temp-dir={self.workdir / 'ray'}", '--resources={"node_a": 1}')
        self._wait(1, timeout)
        self._start("worker", f"--address=127.0.0.1:{self.gcs_port}", '--resources={"node_b": 1}',
                    f"--dashboard-agent-listen-port={free_port()}", "--metrics-export-port=0",
                    "--runtime-env-agent-port=0", "--dashboard-agent-grpc-port=0")
        self._wait(2, timeout)

    def nodes(self) -> int:
        done = subprocess.run([self.ray(), "status", f"--address=127.0.0.1:{self.gcs_port}"], env=self.env,
                              capture_output=True, text=True, timeout=60, check=False)
        active = done.stdout.partition("Active:")[2].partition("Pending:")[0]
        return sum(1 for line in active.splitlines() if "node_" in line)

    def _wait(self, count: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while self.nodes() < count:
            for leader in self.leaders:
                assert leader.poll() is None, f"ray start exited with {leader.returncode}: see {self.workdir}"
            assert time.monotonic() < deadline, f"the Ray cluster has fewer than {count} nodes after {timeout}s"
            time.sleep(2)

    def submit(self, entrypoint: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
        """`ray job submit -- ENTRYPOINT` pasted into `bash -c`, as KubeRay's submitter does."""
        line = f"{self.ray()} job submit --address {self.address} -- {entrypoint}"
        submitter = subprocess.Popen(["/bin/bash", "-ce", "--", line], env=self.env, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, start_new_session=True)
        try:
            out, err = submitter.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _signal(submitter.pid, signal.SIGKILL)
            out, err = submitter.communicate()
            err += f"\n(ray job submit still running after {timeout}s: stopped)\n" + self.logs()
        return subprocess.CompletedProcess(submitter.args, submitter.returncode, out, err)

    def logs(self) -> str:
        """Every job's driver log so far (for a message when a job does not end)."""
        logs = sorted((self.workdir / "ray").glob("session_*/logs/job-driver-*.log"))
        return "".join(f"--- {log.name}\n{log.read_text(errors='replace')[-6000:]}" for log in logs)

    def stop(self) -> None:
        """The second node, then the head, by process group; SIGKILL what is left after 5 s.

        No longer: the head's `ray start --block`, GCS server and autoscaler monitor
        outlast SIGTERM (still there 25 s on, on this machine), so a longer grace only
        delays the SIGKILL that ends them."""
        for leader in reversed(self.leaders):
            _signal(leader.pid, signal.SIGTERM)
            time.sleep(2)
        sessions = {leader.pid for leader in self.leaders}
        deadline = time.monotonic() + 5
        while session_members(sessions) and time.monotonic() < deadline:
            time.sleep(0.5)
        for pid in session_members(sessions):  # what did not stop: ours by session, never by name
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        for leader in self.leaders:
            with contextlib.suppress(subprocess.TimeoutExpired):
                leader.wait(timeout=10)
        deadline = time.monotonic() + 10
        while session_members(sessions) and time.monotonic() < deadline:  # killed, not yet gone
            time.sleep(0.2)


def _signal(group: int, number: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(group, number)


def session_members(sessions: set[int]) -> list[int]:
    """Live processes whose session is one of `sessions` (field 6 of /proc/PID/stat)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rpartition(")")[2].split()
        except OSError:
            continue
        if int(fields[3]) in sessions and fields[0] != "Z":
            found.append(int(stat.parent.name))
    return found
