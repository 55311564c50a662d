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

from distrecipe.engines.openrlhf import PPO_ENTRY, DsBatch, colocated, ds_violation
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


EMITTED = ["--train.colocate_all", "--vllm.num_engines", "8", "--vllm.tensor_parallel_size", "1",
           "--ds.zero_stage", "3", "--actor.model_name_or_path", "$ACTOR", "--data.prompt_dataset", "$PROMPTS"]
"""What `compile --target openrlhf` writes that decides the models on each GPU (the batch aside)."""


@pytest.mark.parametrize("user", [
    ("--reward.model_name_or_path", "$REWARD"),  # the emitted command: critic from the reward model
    ("--reward.model_name_or_path", "$REWARD", "--vllm.gpu_memory_utilization", "0.4", "--vllm.enable_sleep",
     "--data.max_len", "4096"),
    ("--reward.remote_url", "http://rm"),  # no reward model: the critic is the actor's checkpoint
    ("--reward.model_name_or_path", "$REWARD", "--algo.advantage.estimator", "group_norm",
     "--rollout.n_samples_per_prompt", "8"),  # no critic
    ("--reward.model_name_or_path", "rm1,rm2", "--critic.model_name_or_path", "c", "--algo.kl.init_coef", "0"),
    ("--train.agent_func_path", "agent.py", "--ds.zero_stage", "2"),
], ids=["emitted", "stated-vllm", "remote-reward", "no-critic", "own-critic-no-ref", "agent"])
def test_the_colocated_models_are_train_ppo_ray_s(user: tuple[str, ...]) -> None:
    """Which models and vLLM settings `colocated` reads from a command line, against what
    OpenRLHF 0.11.2's own `__main__` block hands `train(args)`."""
    argv = [*EMITTED, *user]
    args = openrlhf_judge.main_args(PPO_ENTRY, argv)
    job = colocated(argv)
    assert (job.memory, job.sleep, job.tensor, job.max_len, job.zero_stage, job.estimator) == (
        args.vllm.gpu_memory_utilization, args.vllm.enable_sleep, args.vllm.tensor_parallel_size,
        args.data.max_len, args.ds.zero_stage, args.algo.advantage.estimator)
    assert job.reference == (args.algo.kl.init_coef > 0)  # train(): ref_model only then
    assert job.critic == args.critic.model_name_or_path
    assert job.reward == (None if args.reward.remote_url else args.reward.model_name_or_path)
