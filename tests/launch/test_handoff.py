"""`launch` hands a TRL GRPO script the recipe's group and generation batch itself, judged
by TRL's own parser and GRPOConfig's `__post_init__` at the plan's world."""

from __future__ import annotations

from pathlib import Path

import pytest

from distrecipe import api
from distrecipe.errors import DistrecipeError
from distrecipe.launch.handoff import handoff
from tests import trl_judge
from tests.translator.test_trl import GRPO, LONG

pytest.importorskip("trl")


def argv(text: str, tmp_path: Path, *user: str) -> tuple[str, ...]:
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(text)
    plan = api.load_plan(recipe)
    return handoff("hf", plan, user_args=("--model_name_or_path", "m", "--output_dir", str(tmp_path),
                                                "--report_to", "none", *user), run_dir=tmp_path,
                         configs={}).args


def test_a_grpo_script_gets_the_recipe_s_group_and_generation_batch(tmp_path: Path) -> None:
    words = argv(LONG.replace("launch: {backend: accelerate-deepspeed}", "launch: {backend: accelerate}")
                       .replace("strategy: zero\nstage: 3", "strategy: ddp"), tmp_path)
    assert words[words.index("--num_generations") + 1] == "8"
    with trl_judge.world(8):
        _script, args, *_ = trl_judge.parser("grpo").parse_args_and_config(list(words))
    # 32 prompts × 8 = 256 completions a generation: 8 micro-steps of 4 × 8 ranks
    assert (args.num_generations, args.generation_batch_size, args.steps_per_generation) == (8, 256, 8)
    assert (args.use_vllm, args.vllm_mode, args.vllm_gpu_memory_utilization, args.vllm_enable_sleep_mode) == (
        True, "colocate", 0.3, True)


def test_a_user_s_other_group_is_refused_naming_the_recipe_s_key(tmp_path: Path) -> None:
    with pytest.raises(DistrecipeError, match=r"program argument --num_generations 4 contradicts the recipe's 8 "
                                              r"\(rl\.rollout_n\)"):
        argv(GRPO, tmp_path, "--num_generations", "4")


def test_a_generation_batch_grpo_refuses_is_refused_before_the_start(tmp_path: Path) -> None:
    with pytest.raises(DistrecipeError, match=r"DR208.*nearest valid rl\.prompts_per_step: 16 or 20"):
        argv(GRPO.replace("prompts_per_step: 16", "prompts_per_step: 18"), tmp_path)
