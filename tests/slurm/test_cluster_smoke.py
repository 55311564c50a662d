"""The fake two-node cluster itself: steps reach both nodes, sbatch --wait runs a 2-node job."""

from __future__ import annotations

import pytest

from tests.slurm.fixture import SlurmCluster

pytestmark = pytest.mark.slow  # one worker runs every cluster test (conftest.CLUSTERS)


def test_srun_reaches_both_nodes(slurm_cluster: SlurmCluster) -> None:
    result = slurm_cluster.run("srun", "-N2", "-l", "bash", "-c", "echo $SLURMD_NODENAME $SLURM_NODEID")
    assert result.returncode == 0, result.stderr
    assert sorted(result.stdout.splitlines()) == ["0: n1 0", "1: n2 1"]


def test_sbatch_wait_two_nodes(slurm_cluster: SlurmCluster) -> None:
    script = slurm_cluster.run_dir / "two.sbatch"
    script.write_text(
        "#!/bin/bash\n#SBATCH --nodes=2\n#SBATCH --ntasks-per-node=1\n#SBATCH --output=two.out\n"
        "srun bash -c 'echo $SLURMD_NODENAME $SLURM_NODEID $SLURM_JOB_NODELIST'\n",
        encoding="utf-8",
    )
    result = slurm_cluster.run("sbatch", "--wait", str(script))
    assert result.returncode == 0, result.stderr
    out = (slurm_cluster.run_dir / "two.out").read_text(encoding="utf-8")
    assert sorted(out.splitlines()) == ["n1 0 n[1-2]", "n2 1 n[1-2]"], out
