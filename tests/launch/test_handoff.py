"""`launch` hands a TRL GRPO script the recipe's group and generation batch itself, judged
by TRL's own parser and GRPOConfig's `__post_init__` at the plan's world; and OpenRLHF's
`train_ppo_ray` the options the recipe decides, the user's own read as OpenRLHF's parser
reads them (`tests/openrlhf_judge.py`) and checked against them before the start."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from distrecipe import api
from distrecipe.errors import DistrecipeError
from distrecipe.launch.handoff import Handoff, handoff
from distrecipe.translator.openrlhf import ENTRY, decided
from tests import openrlhf_judge, trl_judge
from tests.translator.test_openrlhf import RECIPE
from tests.translator.test_trl import GRPO, LONG


@pytest.fixture
def trl() -> None:
    pytest.importorskip("trl")


def argv(text: str, tmp_path: Path, *user: str) -> tuple[str, ...]:
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(text)
    plan = api.load_plan(recipe)
    return handoff("hf", plan, user_args=("--model_name_or_path", "m", "--output_dir", str(tmp_path),
                                                "--report_to", "none", *user), run_dir=tmp_path,
                         configs={}).args


def test_a_grpo_script_gets_the_recipe_s_group_and_generation_batch(tmp_path: Path, trl: None) -> None:
    words = argv(LONG.replace("launch: {backend: accelerate-deepspeed}", "launch: {backend: accelerate}")
                       .replace("strategy: zero\nstage: 3", "strategy: ddp"), tmp_path)
    assert words[words.index("--num_generations") + 1] == "8"
    with trl_judge.world(8):
        _script, args, *_ = trl_judge.parser("grpo").parse_args_and_config(list(words))
    # 32 prompts × 8 = 256 completions a generation: 8 micro-steps of 4 × 8 ranks
    assert (args.num_generations, args.generation_batch_size, args.steps_per_generation) == (8, 256, 8)
    assert (args.use_vllm, args.vllm_mode, args.vllm_gpu_memory_utilization, args.vllm_enable_sleep_mode) == (
        True, "colocate", 0.3, True)


def test_a_user_s_other_group_is_refused_naming_the_recipe_s_key(tmp_path: Path, trl: None) -> None:
    with pytest.raises(DistrecipeError, match=r"program argument --num_generations 4 contradicts the recipe's 8 "
                                              r"\(rl\.rollout_n\)"):
        argv(GRPO, tmp_path, "--num_generations", "4")


def test_a_generation_batch_grpo_refuses_is_refused_before_the_start(tmp_path: Path, trl: None) -> None:
    with pytest.raises(DistrecipeError, match=r"DR208.*nearest valid rl\.prompts_per_step: 16 or 20"):
        argv(GRPO.replace("prompts_per_step: 16", "prompts_per_step: 18"), tmp_path)


MODELS = ("--actor.model_name_or_path", "Qwen/Qwen2.5-1.5B", "--reward.model_name_or_path", "OpenRLHF/rm",
          "--data.prompt_dataset", "OpenRLHF/prompt-collection-v0.1")
ONE_NODE = RECIPE.format(world=8, nodes=1, gpus=8, stage=3, micro=4, global_=128, n=8, prompts=16)


def openrlhf(tmp_path: Path, *user: str, allow_override: bool = False) -> Handoff:
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(ONE_NODE + "launch: {backend: openrlhf}\n")
    return handoff("openrlhf", api.load_plan(recipe), user_args=user, run_dir=tmp_path, configs={},
                   allow_override=allow_override)


@pytest.mark.parametrize(("user", "message"), [
    (("--train.batch_size", "64"), "program argument --train.batch_size 64 contradicts the recipe's 128 "
                                   "(batch.global)"),
    (("--train.micro", "8"), "program argument --train.micro 8 contradicts the recipe's 4 (batch.micro)"),
    (("--rollout.n_samples_per_prompt=4",), "program argument --rollout.n_samples_per_prompt 4 contradicts "
                                            "the recipe's 8 (rl.rollout_n)"),
    (("--rollout.batch_size", "32"), "--rollout.batch_size 32 contradicts the recipe's 16 (rl.prompts_per_step)"),
    (("--actor.num_gpus_per_node", "4"), "--actor.num_gpus_per_node 4 contradicts the recipe's 8 "
                                         "(cluster.gpus_per_node)"),
    (("--ds.zero_stage", "2"), "--ds.zero_stage 2 contradicts the recipe's 3 (stage)"),
    (("--actor.adam.lr", "2e-6"), "--actor.adam.lr 2e-6 contradicts the recipe's 1e-06 (optimizer.lr)"),
    (("--train.batch_size", "128", "--train.batch_size", "64"), "--train.batch_size 64 contradicts"),
], ids=["batch", "abbreviated", "equals", "prompts", "gpus", "stage", "lr", "last-wins"])
def test_an_openrlhf_option_that_contradicts_the_recipe_is_refused_naming_both(
        user: tuple[str, ...], message: str, tmp_path: Path) -> None:
    with pytest.raises(DistrecipeError, match=re.escape(message)):
        openrlhf(tmp_path, *MODELS, *user)
    overridden = openrlhf(tmp_path, *MODELS, *user, allow_override=True)
    (item,) = overridden.overridden
    assert item.argument == [word.split("=")[0] for word in user if word.startswith("--")][-1]
    option = next(option for option, _value, _key in decided(api.load_plan(tmp_path / "recipe.yaml"))
                  if option.startswith(item.argument))
    parsed = vars(openrlhf_judge.parser(ENTRY).parse_args(list(overridden.args)))[option.removeprefix("--")]
    assert parsed == type(parsed)(item.given), "the user's value reaches OpenRLHF"
    assert overridden.args.count(option) == user.count(option), "the recipe's word is dropped: no last-wins rule"


def test_the_same_value_in_another_spelling_is_no_contradiction(tmp_path: Path) -> None:
    given = openrlhf(tmp_path, *MODELS, "--actor.adam.lr", "1.0e-6", "--train.batch_size=128", "--train.colocate_all")
    assert given.overridden == ()
    assert given.args.count("--train.colocate_all") == 1 and "--train.batch_size" not in given.args
    assert openrlhf_judge.verdict(ENTRY, list(given.args)) is None


@pytest.mark.parametrize(("drop", "message"), [
    ("--actor.model_name_or_path", "needs --actor.model_name_or_path after `--`"),
    ("--reward.model_name_or_path", "needs --reward.model_name_or_path (or --reward.remote_url, "
                                    "--train.agent_func_path) after `--`"),
    ("--data.prompt_dataset", "needs --data.prompt_dataset after `--`"),
])
def test_a_missing_model_or_dataset_is_one_line_before_the_start(drop: str, message: str, tmp_path: Path) -> None:
    index = MODELS.index(drop)
    with pytest.raises(DistrecipeError, match=re.escape(f"OpenRLHF's {ENTRY} {message}")) as caught:
        openrlhf(tmp_path, *MODELS[:index], *MODELS[index + 2:])
    assert "\n" not in str(caught.value)


def test_a_remote_reward_stands_in_for_the_reward_model(tmp_path: Path) -> None:
    given = openrlhf(tmp_path, *MODELS[:2], *MODELS[4:], "--reward.remote_url", "http://rm:5000/get_reward")
    assert openrlhf_judge.verdict(ENTRY, list(given.args)) is None


@pytest.mark.parametrize(("option", "message"), [
    ("--micro_train_batch_size", "program argument --micro_train_batch_size is not an option of OpenRLHF 0.11.2's "
                                 f"{ENTRY} (removed in OpenRLHF 0.10.2"),
    ("--train.batchsize", "program argument --train.batchsize is not an option of OpenRLHF 0.11.2's "
                          f"{ENTRY}; did you mean '--train.batch_size'?"),
    ("train.py", f"program argument train.py is no option: OpenRLHF 0.11.2's {ENTRY} takes options only"),
], ids=["renamed", "misspelt", "positional"])
def test_an_option_openrlhf_does_not_have_is_refused_before_the_start(option: str, message: str,
                                                                      tmp_path: Path) -> None:
    assert openrlhf_judge.refusal(ENTRY, [*MODELS, option, "4"]) is not None, "OpenRLHF refuses it too"
    with pytest.raises(DistrecipeError, match=re.escape(message)):
        openrlhf(tmp_path, *MODELS, option, "4")
