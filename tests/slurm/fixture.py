"""`slurm_cluster`: a real two-node SLURM cluster on this machine (tests/slurm/cluster.sh).

Skips unless it can work: Linux, root (slurmd and /etc/hosts need it), and either the SLURM
binaries already installed or apt-get to install them. Set DISTRECIPE_SLURM=0 to skip anyway.
A cluster that was already running is reused and left running.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

CLUSTER_SH = Path(__file__).with_name("cluster.sh")
BINARIES = ("slurmctld", "slurmd", "sbatch", "srun", "munged")


@dataclass(frozen=True)
class SlurmCluster:
    env: dict[str, str]
    """os.environ plus SLURM_CONF, with the interpreter's bin directory first on PATH."""
    run_dir: Path
    """An empty directory for job scripts, outputs and runs (every node sees it: one machine)."""
    state_dir: Path
    """The cluster's slurm.conf, logs and spool."""

    def run(self, *argv: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """Run a SLURM client command (srun, sbatch, ...) against this cluster, in run_dir."""
        return subprocess.run(argv, env=self.env, cwd=self.run_dir, capture_output=True, text=True,
                              timeout=timeout, check=False)


def _skip_reason() -> str | None:
    if os.environ.get("DISTRECIPE_SLURM") == "0":
        return "DISTRECIPE_SLURM=0"
    if not sys.platform.startswith("linux"):
        return "the SLURM test cluster needs Linux"
    if os.geteuid() != 0:
        return "the SLURM test cluster needs root (slurmd, munge, /etc/hosts)"
    if not all(shutil.which(b) for b in BINARIES) and not shutil.which("apt-get"):
        return "SLURM is not installed and apt-get is not available to install it"
    return None


def _cluster_sh(command: str, env: dict[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(CLUSTER_SH), command], env=env, capture_output=True, text=True,
                          timeout=timeout, check=False)


@pytest.fixture(scope="session")
def slurm_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    env = dict(os.environ)
    install = _cluster_sh("install", env, timeout=900)
    if install.returncode != 0:
        pytest.skip(f"could not install SLURM: {install.stderr.strip()[-500:]}")
    start = _cluster_sh("start", env, timeout=120)
    if start.returncode != 0:
        pytest.fail(f"cluster.sh start failed:\n{start.stdout}{start.stderr}")
    conf = start.stdout.strip().splitlines()[-1].removeprefix("export SLURM_CONF=")
    env["SLURM_CONF"] = conf
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    try:
        yield SlurmCluster(env=env, run_dir=tmp_path_factory.mktemp("slurm-runs"),
                           state_dir=Path(conf).parent)
    finally:
        if "already running" not in start.stderr:
            _cluster_sh("stop", env, timeout=120)
