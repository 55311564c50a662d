"""What each kind of program carries of a plan's parallelism (`translator.programs`)."""

from __future__ import annotations

import pytest

from distrecipe.api import load_plan
from distrecipe.translator.programs import refusal, script_duties
from tests.conftest import RECIPES

SEED = RECIPES / "seed-8b-32gpu-zero2.yaml"
SIXTEEN = ("cluster.nodes=2", "batch.global=512", "batch.micro=1", "batch.accumulation=auto")
FSDP_CP4 = (*SIXTEEN, "strategy=fsdp", "stage=3", "parallel.sequence=4")


def test_the_trainer_under_torchrun_drops_context_parallelism_and_says_the_batch_it_would_run() -> None:
    found = refusal(load_plan(str(SEED), FSDP_CP4), "hf")
    assert found is not None and found.keys == ("parallel.sequence",)
    assert found.message.startswith("parallel.sequence 4: the HF Trainer takes tensor and context parallelism "
                                    "only from `accelerate launch`'s parallelism_config")
    assert found.message.endswith("it would run DP 16, global 1 × 128 × 16 = 2048, not 512")


def test_the_trainer_under_accelerate_carries_context_parallelism() -> None:
    assert refusal(load_plan(str(SEED), (*FSDP_CP4, "launch.backend=accelerate")), "hf") is None


@pytest.mark.parametrize(("sets", "key", "words"), [
    (("parallel.sequence=2",), "parallel.sequence", "DR208 hf: cannot express this recipe (the Trainer counts"),
    (("strategy=megatron", "stage=1", "parallel.tensor=2"), "strategy", "DR208 hf"),
    (("strategy=fsdp", "stage=3", "parallel.pipeline=2"), "parallel.pipeline", "no Megatron or pipeline"),
])
def test_what_the_trainer_cannot_express_is_refused_at_its_key(sets: tuple[str, ...], key: str,
                                                               words: str) -> None:
    found = refusal(load_plan(str(SEED), (*SIXTEEN, *sets)), "hf")
    assert found is not None and found.keys == (key,) and words in found.message


def test_the_trainer_carries_autotp_beside_zero() -> None:
    assert refusal(load_plan(str(SEED), (*SIXTEEN, "parallel.tensor=2")), "hf") is None


@pytest.mark.parametrize(("sets", "key"), [(("parallel.sequence=2",), "parallel.sequence"),
                                           (("parallel.tensor=2",), "parallel.tensor")])
def test_a_torchrun_script_builds_no_ulysses_or_autotp(sets: tuple[str, ...], key: str) -> None:
    found = refusal(load_plan(str(SEED), (*SIXTEEN, *sets)), "torchrun")
    assert found is not None and found.keys == (key,)
    assert "no deepspeed.initialize" in found.message and "DP 16, global 1 × 64 × 16 = 1024, not 512" \
        in found.message


def test_a_torchrun_script_under_fsdp2_builds_its_own_mesh() -> None:
    assert refusal(load_plan(str(SEED), FSDP_CP4), "torchrun") is None
    assert refusal(load_plan(str(SEED), (*FSDP_CP4, "parallel.pipeline=2")), "torchrun") is None


def test_a_raw_deepspeed_script_has_no_pipeline_but_ulysses() -> None:
    found = refusal(load_plan(str(SEED), (*FSDP_CP4, "parallel.sequence=1", "parallel.pipeline=2")), "deepspeed")
    assert found is not None and found.keys == ("parallel.pipeline",)
    assert refusal(load_plan(str(SEED), (*SIXTEEN, "parallel.sequence=2")), "deepspeed") is None


@pytest.mark.parametrize(("kind", "backend"), [("accelerate", "deepspeed"), ("verl", "torchrun"),
                                               ("deepspeed", "accelerate")])
def test_a_launcher_the_kind_cannot_run_under_is_named(kind: str, backend: str) -> None:
    found = refusal(load_plan(str(SEED), (*SIXTEEN, f"launch.backend={backend}")), kind)  # type: ignore[arg-type]
    assert found is not None and found.keys == ("launch.backend",)
    assert found.message.startswith(f"program kind {kind} cannot run under launch.backend {backend}")


def test_only_a_torchrun_program_that_reads_no_file_is_told_to_checkpoint_itself() -> None:
    fsdp = load_plan(str(SEED), (*FSDP_CP4, "activation_checkpointing=selective"))
    (duty,) = script_duties(fsdp, "torchrun")
    assert (duty.code, duty.severity) == ("DR222", "warning")
    assert "activation_checkpointing selective: the program reads it from the plan" in duty.message
    assert script_duties(load_plan(str(SEED), (*FSDP_CP4, "activation_checkpointing=none")), "torchrun") == []
    assert script_duties(fsdp, "hf") == []  # --gradient_checkpointing / fsdp_config carry it
    assert script_duties(load_plan(str(SEED), SIXTEEN), "torchrun") == []  # the ds_config's DR222 says it
