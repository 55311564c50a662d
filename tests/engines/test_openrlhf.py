"""OpenRLHF's facts against OpenRLHF itself (`.openrlhf`): the stored table is the parser its
entry modules build, and `ds_violation` refuses exactly the batches DeepSpeed refuses in the
ds_config OpenRLHF's strategy writes."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from distrecipe.engines.openrlhf import DsBatch, ds_violation
from tests import openrlhf_judge

ROOT = Path(__file__).resolve().parents[2]


def test_the_stored_table_is_the_installed_release_s() -> None:
    openrlhf_judge.require()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(openrlhf_judge.HOME), os.environ.get("PYTHONPATH", "")])}
    run = subprocess.run([sys.executable, str(ROOT / "scripts" / "engine_tables.py"), "--check", "openrlhf"],
                         capture_output=True, text=True, cwd=ROOT, timeout=300, check=False, env=env)
    assert run.returncode == 0, run.stdout + run.stderr


BATCHES = [  # train batch, micro, world, ring, tp
    (256, 2, 7, 1, 1), (252, 2, 7, 1, 1), (128, 4, 8, 1, 1), (128, 4, 16, 1, 1), (128, 16, 16, 1, 1),
    (96, 4, 8, 1, 1), (64, 2, 8, 2, 1), (60, 2, 8, 2, 1), (32, 1, 8, 1, 2), (33, 1, 8, 1, 2),
]


@pytest.mark.parametrize("numbers", BATCHES, ids=["-".join(map(str, n)) for n in BATCHES])
def test_the_batch_rule_is_deepspeed_s_on_openrlhf_s_config(numbers: tuple[int, int, int, int, int]) -> None:
    from distrecipe.judges import deepspeed as deepspeed_judge

    train, micro, world, ring, tp = numbers
    config = openrlhf_judge.ds_config(train, micro, ring, tp)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            deepspeed_judge.parse(config, world)
        refused = None
    except deepspeed_judge.refusals() as error:
        refused = str(error)
    said = ds_violation(DsBatch("actor", train, micro, world, "test", ring, tp))
    assert (said is None) == (refused is None), (said, refused)
    if said is not None and refused is not None and "!=" in refused:
        assert refused.split("world_size ")[-1].strip() in said
