from tests.slurm.fixture import slurm_cluster  # noqa: F401
