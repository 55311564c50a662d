"""Compile never emits what an engine or distrecipe's own lint rejects.

For generated recipes and every target, the files `compile --target T -o DIR` would
write are put in one directory and judged twice, in the context they are used in:
distrecipe's `lint` at the world the job is launched at (`launch_world`: every rank, or
the data-parallel ranks a Megatron mpu reports), and the engine's own judge:
DeepSpeed's `DeepSpeedConfig` for a ds_config (every target that writes one),
Accelerate's loader, launcher and plugins for `accelerate_config.yaml`, the Trainer's
`TrainingArguments` and `HfTrainerDeepSpeedConfig` for `training_args.json`, and verl's
Hydra composition and `validate_config` for the overrides. A target that refuses the
recipe (an error finding, nothing written) is counted apart; nothing it writes may be
refused. The module's last test prints the tally.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings

from distrecipe.engines.deepspeed import CONFIG_FILE, autotp_size, batch_ranks
from distrecipe.errors import RecipeError
from distrecipe.job import Plan
from distrecipe.judges import deepspeed as deepspeed_judge
from distrecipe.translator.targets import TARGETS, EmitOptions
from tests.emit_strategies import engine_documents, launch_world, lint_errors, plan_of
from tests.test_accelerate_emit import check_accepted
from tests.test_hf_emit import build
from tests.test_verl_emit import QUIET, check_numbers, composed

pytestmark = pytest.mark.slow  # imports DeepSpeed, Accelerate, transformers and verl

JUDGED = ("deepspeed", "accelerate", "hf", "verl")


@pytest.fixture(scope="module")
def tally() -> Counter[str]:
    """What the property test judged, for the module's last test to report. Module-scoped,
    so the two tests run in one worker (`tests/conftest.py`)."""
    return Counter()


def judge_ds_config(plan: Plan, text: str) -> None:
    import json

    config = json.loads(text)
    parsed = deepspeed_judge.parse(config, launch_world(plan))
    assert parsed.train_micro_batch_size_per_gpu == plan.batch.micro
    assert parsed.gradient_accumulation_steps == plan.batch.accumulation
    assert parsed.train_batch_size in ("auto", plan.batch.micro * plan.batch.accumulation * batch_ranks(plan))
    assert parsed.tensor_parallel_config.autotp_size == autotp_size(plan)
    assert parsed.zero_optimization_stage == plan.stage


@QUIET
@settings(max_examples=200, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(doc=engine_documents(rl=True))
def test_every_target_emits_what_lint_and_the_engine_accept(judge: Any, tally: Counter[str],
                                                            doc: dict[str, Any]) -> None:
    plan = plan_of(doc)
    tally["recipes"] += 1
    for target in JUDGED:
        try:
            output = TARGETS[target](plan, EmitOptions())
        except RecipeError:
            tally[f"{target} refused by distrecipe"] += 1
            event(f"{target}: refused by distrecipe")
            continue
        assert lint_errors(plan, output) == [], target
        if CONFIG_FILE in output.files:
            judge_ds_config(plan, output.files[CONFIG_FILE])
        if target == "accelerate":
            check_accepted(plan)
        elif target == "hf":
            build(plan, hf_auto=False)
        elif target == "verl":
            cfg = composed(judge, plan)
            judge.validate(cfg)
            check_numbers(judge, plan, cfg)
        tally[f"{target} emitted and accepted"] += 1
        tally["pairs accepted"] += 1
        event(f"{target}: accepted")


def test_tally(tally: Counter[str]) -> None:
    """Runs after the property test (file order): the count the closing note reports."""
    if not tally["recipes"]:
        pytest.skip("the property test was deselected")
    print("\nrecipes × targets judged:", dict(sorted(tally.items())))
    assert tally["pairs accepted"] > 0
