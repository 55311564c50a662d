"""The rollout phase `plan` prices: TRL's and OpenRLHF's colocated vLLM beside verl's hybrid engine."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from distrecipe import api
from distrecipe.engines.trl import vllm_defaults
from distrecipe.plan.allocator import CONTEXT
from distrecipe.plan.report import estimate
from distrecipe.plan.units import gb
from tests.conftest import Result
from tests.grpo import GRPO

Cli = Callable[..., Result]



def estimated(text: str, tmp_path: Path):  # type: ignore[no-untyped-def]
    path = tmp_path / "recipe.yaml"
    path.write_text(text)
    return estimate(api.load_plan(path))


def test_trl_keeps_its_colocated_vllm_through_training(tmp_path: Path) -> None:
    est = estimated(GRPO, tmp_path)
    phase = est.rollout
    assert phase is not None and (phase.trainer, phase.freed, phase.tensor) == ("TRL", False, 1)
    assert phase.engine == pytest.approx(0.3 * 80e9) and phase.in_training == phase.engine
    assert phase.actor == {part: size for part, size in phase.actor.items() if size}  # nothing offloaded
    assert est.training_need == pytest.approx(est.memory.needed + 0.3 * 80e9)
    assert est.need > 80e9  # the kept fraction leaves the update no room: plan says it does not fit


def test_trl_s_sleep_mode_gives_the_fraction_back(tmp_path: Path) -> None:
    est = estimated(GRPO.replace("rollout_memory: 0.3", "rollout_memory: 0.3, free_rollout_memory: true"), tmp_path)
    assert est.rollout is not None and est.rollout.in_training == 0.0
    assert est.training_need == pytest.approx(est.memory.needed)


@pytest.mark.parametrize(("change", "trainer"), [
    (("rl: {rollout_n: 8, prompts_per_step: 16, rollout_memory: 0.3}", "rl: {rollout_n: 8, prompts_per_step: 16}"),
     None),  # TRL generates with the trained model: no second engine
    (("launch: {backend: accelerate-deepspeed}", "launch: {backend: verl}"), "verl")])
def test_whose_rollout_engine_is_priced(change: tuple[str, str], trainer: str | None, tmp_path: Path) -> None:
    text = GRPO.replace(*change)
    if trainer == "verl":
        text = text.replace("strategy: zero", "strategy: fsdp")
    est = estimated(text, tmp_path)
    assert (est.rollout.trainer if est.rollout else None) == trainer


def test_the_defaults_are_grpoconfig_s() -> None:
    trl = pytest.importorskip("trl")
    fields = {f.name: f.default for f in dataclasses.fields(trl.GRPOConfig)}
    found = vllm_defaults()
    assert (found.memory, found.sleep, found.tensor) == (fields["vllm_gpu_memory_utilization"],
                                                         fields["vllm_enable_sleep_mode"],
                                                         fields["vllm_tensor_parallel_size"])


@pytest.mark.parametrize(("mode", "fraction", "stated"), [
    ("rl: {rollout_n: 8, prompts_per_step: 16, rollout_mode: colocate}", vllm_defaults().memory, False),
    ("rl: {rollout_n: 8, prompts_per_step: 16, rollout_mode: server}", None, False),
    ("rl: {rollout_n: 8, prompts_per_step: 16, rollout_mode: server, rollout_memory: 0.9}", None, False)])
def test_the_rollout_mode_says_whose_gpus_hold_vllm(mode: str, fraction: float | None, stated: bool,
                                                    tmp_path: Path) -> None:
    """Colocated without a fraction: GRPOConfig's default one; a server's GPUs are not the trainer's."""
    est = estimated(GRPO.replace("rl: {rollout_n: 8, prompts_per_step: 16, rollout_memory: 0.3}", mode), tmp_path)
    if fraction is None:
        assert est.rollout is None and est.need == est.training_need == pytest.approx(est.memory.needed)
    else:
        assert est.rollout is not None and (est.rollout.fraction, est.rollout.stated) == (fraction, stated)


OPENRLHF = GRPO.replace("launch: {backend: accelerate-deepspeed}", "launch: {backend: openrlhf}")
"""The GRPO recipe as OpenRLHF's colocated job (`--train.colocate_all`, one vLLM engine per GPU)."""
DEFAULT_SHARE = OPENRLHF.replace(", rollout_memory: 0.3}", "}")
"""No share stated: OpenRLHF's `--vllm.gpu_memory_utilization` default, and no sleep."""
SLEEPING = OPENRLHF.replace("rollout_memory: 0.3}", "rollout_memory: 0.3, free_rollout_memory: true}")
MODELS = ("--actor.model_name_or_path", "m", "--reward.model_name_or_path", "rm", "--data.prompt_dataset", "d")


def test_openrlhf_s_default_share_is_kept_through_training_and_does_not_fit(tmp_path: Path) -> None:
    """0.95 of the GPU to vLLM (OpenRLHF's default, read from its parser), never slept: the
    update has no room, whatever the error band."""
    from tests import openrlhf_judge

    default = openrlhf_judge.parser("openrlhf.cli.train_ppo_ray").get_default("vllm.gpu_memory_utilization")
    est = estimated(DEFAULT_SHARE, tmp_path)
    phase = est.rollout
    assert phase is not None and (phase.trainer, phase.fraction, phase.stated, phase.freed) == (
        "OpenRLHF", default, False, False)
    assert phase.engine == pytest.approx(default * 80e9) and phase.kept == phase.engine
    assert est.training_need == pytest.approx(est.memory.needed + phase.engine + 7.6e9 * 2 / 8)
    assert est.verdict is not None and est.verdict.word == "does not fit"


def test_a_stated_share_with_sleep_is_given_back_for_training(tmp_path: Path) -> None:
    est = estimated(SLEEPING, tmp_path)
    phase = est.rollout
    assert phase is not None and (phase.fraction, phase.stated, phase.freed, phase.kept) == (0.3, True, True, 0.0)
    reference = 7.6e9 * 2 / 8  # the actor's checkpoint in bf16, ZeRO-3 over the 8 GPUs
    assert phase.beside == {"reference model": pytest.approx(reference)}
    assert est.training_need == pytest.approx(est.memory.needed + reference)
    assert phase.need == pytest.approx(0.3 * 80e9 + sum(phase.actor.values()) + reference + CONTEXT)
    assert est.verdict is not None and est.verdict.word == "fits"


@pytest.mark.parametrize(("stage", "shards"), [(3, 8), (2, 1)])
def test_the_reference_model_is_sharded_only_under_zero_3(stage: int, shards: int, tmp_path: Path) -> None:
    """OpenRLHF's inference config is ZeRO-3 when training is, else stage 0: a whole copy per GPU."""
    est = estimated(SLEEPING.replace("stage: 3", f"stage: {stage}"), tmp_path)
    assert est.rollout is not None and est.rollout.beside["reference model"] == pytest.approx(7.6e9 * 2 / shards)


def test_plan_shows_tensor_1_where_verl_takes_2(cli: Cli, tmp_path: Path) -> None:
    """The same model and share: OpenRLHF's vLLM holds the whole 16-bit model on each GPU,
    verl's default rollout tensor parallelism halves it."""
    (tmp_path / "openrlhf.yaml").write_text(SLEEPING)
    (tmp_path / "verl.yaml").write_text(SLEEPING.replace("launch: {backend: openrlhf}", "launch: {backend: verl}")
                                        .replace("strategy: zero", "strategy: fsdp"))
    ours, verl = (cli("plan", tmp_path / f"{name}.yaml") for name in ("openrlhf", "verl"))
    assert (ours.code, verl.code) == (0, 0), ours.err + verl.err
    assert ("rollout (OpenRLHF) rl.rollout_memory 0.3 = 24 GB [weights 15.2 GB (Ψ × 2 bytes ÷ rollout tensor "
            "parallelism 1, --vllm.tensor_parallel_size, one engine per GPU)") in ours.out
    assert "one sequence's KV cache 0.12 GB (--data.max_len 2048, OpenRLHF's default)" in ours.out
    assert "reference model 1.9 GB (the actor's checkpoint, Ψ × 2 bytes ÷ 8 under ZeRO-3)" in ours.out
    assert ("rollout (verl)     rl.rollout_memory 0.3 = 24 GB [weights 7.6 GB (Ψ × 2 bytes ÷ rollout tensor "
            "parallelism 2, verl's default)") in verl.out


def test_plan_names_the_models_it_cannot_price(cli: Cli, tmp_path: Path) -> None:
    """The critic (OpenRLHF's default estimator gae keeps one, from the reward model) and the
    reward model are $REWARD's size: named in the text, the fit line, the advice and JSON."""
    (tmp_path / "recipe.yaml").write_text(SLEEPING)
    text = cli("plan", tmp_path / "recipe.yaml")
    assert text.code == 0
    assert ("not priced, the recipe states only the actor's shape: the critic (a trained DeepSpeed engine from "
            "$REWARD: --algo.advantage.estimator gae, OpenRLHF's default), the reward model ($REWARD)") in text.out
    [fits] = [line for line in text.out.splitlines() if line.startswith("fits? ")]
    assert fits.startswith("fits? yes") and fits.endswith("; at least: the critic and the reward model not "
                                                          "priced (above)")
    assert "  - a lower bound: OpenRLHF also holds the critic" in text.out
    shown = json.loads(cli("plan", tmp_path / "recipe.yaml", "--format", "json").out)
    assert shown["rollout"]["trainer"] == "OpenRLHF" and len(shown["rollout"]["unpriced"]) == 2


@pytest.mark.parametrize(("recipe", "refused"), [(DEFAULT_SHARE, True), (SLEEPING, False)],
                         ids=["default-share", "stated-share-sleeping"])
def test_launch_judges_the_figure_plan_prints(recipe: str, refused: bool, cli: Cli, tmp_path: Path) -> None:
    """`launch`'s fit check reads the recipe as `plan` does: one figure, refused or not alike."""
    path = tmp_path / "recipe.yaml"
    path.write_text(recipe)
    shown = json.loads(cli("plan", path, "--format", "json").out)
    launched = cli("launch", path, "--dry-run", "--run-dir", tmp_path / "run", "--", *MODELS)
    need = gb(shown["need"])
    if refused:
        assert shown["fits"] is False and launched.code == 2
        assert f"the plan does not fit: ZeRO-3 needs {need} (" in launched.err
    else:
        assert shown["fits"] is True and launched.code == 0, launched.err
        assert "distrecipe: the plan fits as a lower bound: it prices the command distrecipe writes, not the " \
               "critic" in launched.err
        assert "--vllm.gpu_memory_utilization 0.3" in launched.out and "--vllm.enable_sleep" in launched.out


def test_a_model_whose_vllm_copy_fills_the_gpu_is_told_more_gpus_do_not_help(tmp_path: Path) -> None:
    """70B at tensor 1 is 140 GB of vLLM weights on every GPU: sharding the actor over more
    GPUs never brings the floor under 80 GB."""
    from distrecipe.plan.advice import advise

    path = tmp_path / "recipe.yaml"
    path.write_text(SLEEPING.replace("params: 7.6e9, hidden_size: 3584, layers: 28, heads: 28, kv_heads: 4",
                                     "params: 70e9, hidden_size: 8192, layers: 80, heads: 64, kv_heads: 8"))
    first = advise(api.load_plan(path))[0]
    assert first.startswith("does not fit: the rollout engine needs at least 142.82 GB per GPU (weights 140 GB")
    assert first.endswith("more GPUs do not help: the floor alone fills the GPU, and OpenRLHF's command here runs "
                          "vLLM at tensor parallelism 1 (one engine per GPU), which the recipe does not set")
