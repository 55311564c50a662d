"""Resume at launch: the hand-over per program kind, the attempts log, and SLURM's save-then-requeue."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from distrecipe.job import Plan
from distrecipe.launch.attempts import ATTEMPTS, first_directory, record_attempt
from distrecipe.launch.resume import (
    CHECKPOINT_DIR_ENV,
    KEEP_ENV,
    RESUME_ENV,
    SAVE_EVERY_ENV,
    TRAINER_FLAG,
    check,
    resume,
)
from distrecipe.launch.slurm import batch_script, sbatch_lines
from distrecipe.launch.spec import Program
from distrecipe.translator.load import load_recipe
from distrecipe.translator.resolve import resolve
from tests.checkpoints import trees
from tests.conftest import RECIPES

SLURM = ["launch.slurm.partition=p", "launch.slurm.account=a", "launch.slurm.time=5", "launch.slurm.cpus_per_task=1"]


def plan(*sets: str) -> Plan:
    return resolve(load_recipe(RECIPES / "tiny-cpu.yaml", list(sets)))


@pytest.mark.parametrize(("kind", "flag"), [("hf", True), ("deepspeed", False), ("torchrun", False)])
def test_the_checkpoint_goes_to_the_program_its_kinds_way(tmp_path: Path, kind: str, flag: bool) -> None:
    trees.dcp(tmp_path / "ck", 4, world=2)
    job = plan("strategy=fsdp", "stage=3", "launch.backend=torchrun", "checkpoint.dir=ck", "checkpoint.every=4",
               "checkpoint.keep=3", "checkpoint.resume=auto")
    program = Program(target="train.py", args=("--x", "1"))
    got = resume(job, kind, program, {}, cwd=tmp_path, found=check(job, kind, program.args, cwd=tmp_path, deep=True))
    chosen = str((tmp_path / "ck" / "step-4").resolve())
    assert got.program.env == {RESUME_ENV: chosen, CHECKPOINT_DIR_ENV: str((tmp_path / "ck").resolve()),
                               SAVE_EVERY_ENV: "4", KEEP_ENV: "3"}
    assert got.program.args == (("--x", "1", TRAINER_FLAG, chosen) if flag else ("--x", "1"))
    assert got.record["step"] == 4 and got.record["verdict"] == "resumes as is"


def test_auto_with_nothing_saved_starts_from_scratch_and_says_so(tmp_path: Path) -> None:
    job = plan("checkpoint.dir=ck", "checkpoint.resume=auto")
    got = resume(job, "deepspeed", Program(target="t.py"), {}, cwd=tmp_path,
                 found=check(job, "deepspeed", (), cwd=tmp_path, deep=True))
    assert RESUME_ENV not in got.program.env and got.record == {"path": None, "said": got.said}
    assert "no complete checkpoint in ck yet; starting from scratch" in got.said


def test_a_universal_checkpoint_turns_on_load_universal(tmp_path: Path) -> None:
    tag = trees.touch(tmp_path / "ck" / "global_step4_universal", "mp_rank_00_model_states.pt")
    (tag / "zero").mkdir()
    (tmp_path / "ck" / "latest_universal").write_text(tag.name)
    job = plan("checkpoint.dir=ck", "checkpoint.resume=auto")
    got = resume(job, "deepspeed", Program(target="t.py"), {"ds_config.json": '{"train_batch_size": 8}'},
                 cwd=tmp_path, found=check(job, "deepspeed", (), cwd=tmp_path, deep=True))
    assert json.loads(got.configs["ds_config.json"]) == {"train_batch_size": 8, "checkpoint": {"load_universal": True}}


def test_attempts_are_appended_in_the_first_attempts_directory(tmp_path: Path) -> None:
    first = tmp_path / "tiny-slurm7" / "node1"
    again = tmp_path / "tiny-slurm7-restart1" / "node1"
    assert first_directory(again, 1) == first and first_directory(first, 0) == first
    record_attempt(first, {"SLURM_RESTART_COUNT": "0"}, {"start": "a", "end": "b", "exit_code": 143,
                                                         "signal": "SIGTERM", "checkpoint": None})
    record_attempt(again, {"SLURM_RESTART_COUNT": "1"}, {"start": "c", "end": "d", "exit_code": 0,
                                                         "checkpoint": {"path": "/ck/global_step4", "step": 4}})
    lines = [json.loads(line) for line in (first / ATTEMPTS).read_text().splitlines()]
    assert [(x["attempt"], x["exit_code"], x["checkpoint_step"]) for x in lines] == [(0, 143, None), (1, 0, 4)]
    assert lines[1]["run_dir"] == str(again)


def test_a_resuming_job_asks_for_a_warning_and_requeue() -> None:
    lines, _ = sbatch_lines(plan("checkpoint.dir=ck", "checkpoint.resume=auto", *SLURM), Path("/r"), Path("/w"))
    assert "#SBATCH --signal=B:USR1@300" in lines and "#SBATCH --requeue" in lines
    lines, _ = sbatch_lines(plan("checkpoint.dir=ck", *SLURM), Path("/r"), Path("/w"))
    assert not any("--signal" in line or "--requeue" in line for line in lines)


FAKE_SRUN = """#!/bin/bash
# The step: note SIGUSR1 (as a rank would, to save), then end as a saved rank ends.
trap 'echo USR1 >> "$STATE/srun"; exit 0' USR1
echo started >> "$STATE/srun"
while true; do sleep 0.1; done
"""
FAKE_SCONTROL = """#!/bin/bash
echo "$@" >> "$STATE/scontrol"
"""


def test_the_batch_shell_passes_usr1_to_the_step_then_requeues(tmp_path: Path) -> None:
    """The script under bash, with srun and scontrol standing in: SLURM's `--signal=B:USR1`
    reaches the batch shell, which hands it to the step and, once the step has ended,
    requeues the job."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, text in (("srun", FAKE_SRUN), ("scontrol", FAKE_SCONTROL)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    script = batch_script(plan("checkpoint.dir=ck", "checkpoint.resume=auto", *SLURM), ["train"],
                          runs_root=tmp_path, chdir=tmp_path, ray="/bin/false")
    (tmp_path / "job.sbatch").write_text(script)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "STATE": str(tmp_path), "SLURM_JOB_ID": "42"}
    job = subprocess.Popen(["bash", str(tmp_path / "job.sbatch")], cwd=tmp_path, env=env, start_new_session=True,
                           stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while not (tmp_path / "srun").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        os.kill(job.pid, signal.SIGUSR1)
        code = job.wait(timeout=30)
    finally:
        with pytest.raises(ProcessLookupError):
            os.killpg(job.pid, signal.SIGKILL)
    assert code == 0
    assert (tmp_path / "srun").read_text().split() == ["started", "USR1"]
    assert (tmp_path / "scontrol").read_text().split() == ["requeue", "42"]
    assert job.stderr is not None and "asking the ranks to save" in job.stderr.read()
