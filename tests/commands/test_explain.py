"""`distrecipe explain FIELD`: a recipe field's meaning from its one source, the `Recipe`
dataclasses (through the schema they generate), its default, and what each file distrecipe
writes does with it (the carry table, `translator/carry.py`)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from distrecipe.schemas import recipe_fields
from distrecipe.translator.carry import FIELDS
from tests.conftest import Result

Cli = Callable[..., Result]


def test_a_field_says_what_it_means_its_type_default_and_native_keys(cli: Cli) -> None:
    result = cli("explain", "batch.micro")
    assert result.code == 0, result.err
    assert result.out == (
        "batch.micro (recipe field)\n"
        "\n"
        "Samples per rank per forward pass. Default `auto` (derived).\n"
        "\n"
        "Type: an integer from 1 to 2,147,483,648 or 'auto'\n"
        "Default: auto (resolve decides it; `distrecipe resolve` shows the value and why)\n"
        "\n"
        "In each file distrecipe writes (docs/equivalence.md):\n"
        "  DeepSpeed   train_micro_batch_size_per_gpu\n"
        "  Accelerate  the header comment: the DataLoader's batch_size\n"
        "  verl actor  actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu\n"
        "  HF Trainer  per_device_train_batch_size\n"
        "  TRL config  per_device_train_batch_size\n"
        "  OpenRLHF    --train.micro_batch_size\n"
    )


def test_unset_defaults_choices_and_cells_not_carried(cli: Cli) -> None:
    stage = cli("explain", "stage").out.splitlines()
    assert "Type: an integer from 0 to 3" in stage and "Default: unset" in stage
    precision = cli("explain", "precision").out.splitlines()
    assert "Type: one of 'auto', 'bf16', 'fp16', 'fp32'" in precision
    assert "Default: bf16" in precision
    clip = cli("explain", "grad_clip").out
    assert ("  Accelerate  not carried: the script's clipping (accelerator.clip_grad_norm_) (DR222)\n" in clip)
    model = cli("explain", "model.params").out
    assert "  DeepSpeed   — (read by `plan` only)\n" in model


def test_a_required_field_and_a_section(cli: Cli) -> None:
    strategy = cli("explain", "strategy").out.splitlines()
    assert "Default: none: a recipe must state it" in strategy
    batch = cli("explain", "batch")
    assert batch.code == 0, batch.err
    assert batch.out.startswith("batch (recipe section)\n\n`micro × accumulation × DP = global`")
    assert ("Fields: batch.micro, batch.accumulation, batch.global, batch.seq_len, batch.micro_policy, "
            "batch.micro_tokens\n") in batch.out


@pytest.mark.parametrize("key", sorted(recipe_fields()))
def test_every_field_is_explained(cli: Cli, key: str) -> None:
    result = cli("explain", key)
    assert result.code == 0, result.err
    assert result.out.startswith(f"{key} (recipe ")
    assert ("In each file distrecipe writes" in result.out) == (key in FIELDS)


def test_an_unknown_name_is_refused_with_a_did_you_mean(cli: Cli) -> None:
    typo = cli("explain", "batch.mirco")
    assert typo.code == 2 and typo.out == ""
    assert typo.err == ("distrecipe: error: unknown recipe field or code 'batch.mirco'; did you mean 'batch.micro'? "
                        "(distrecipe explain --list for codes; distrecipe schema for every field)\n")
    assert "did you mean 'precision'?" in cli("explain", "precison").err
    assert cli("explain", "DR31").err.startswith("distrecipe: error: unknown code 'DR31'")  # a code's own path
    code = cli("explain", "dr101")
    assert code.code == 0 and code.out.startswith("DR101 ")
