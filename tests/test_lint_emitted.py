"""What distrecipe writes, distrecipe's linter accepts: no error on any emitted config.

Valid generated recipes are compiled for every target at once (`--target all`), the
files written into one directory as a user would commit them, and linted there at
the recipe's world size. An error finding would mean an emitter writes something an
engine refuses or ignores, or a rule fires on a correct config.
"""

from __future__ import annotations

from typing import Any

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from distrecipe.errors import DistrecipeError
from distrecipe.translator.summary import ALL
from distrecipe.translator.targets import TARGETS, EmitOptions
from tests.emit_strategies import engine_documents, lint_errors, plan_of
from tests.strategies import recipe_documents


def errors_in_emitted(doc: dict[str, Any], hf_auto: bool) -> list[str]:
    plan = plan_of(doc)
    try:
        output = TARGETS[ALL](plan, EmitOptions(hf_auto=hf_auto))
    except DistrecipeError:
        assume(False)  # no target can express it; compile says so
        raise
    return lint_errors(plan, output)


@settings(max_examples=60, deadline=None)
@given(doc=recipe_documents(), hf_auto=st.booleans())
def test_generated_recipes_emit_clean_configs(doc: dict[str, Any], hf_auto: bool) -> None:
    # --hf-auto is for the Trainer, which uses the ds_config only for ZeRO recipes; for the
    # others the "auto" ds_config is raw DeepSpeed's, and DR310 rightly refuses it.
    assume(not hf_auto or doc["strategy"] == "zero")
    assert errors_in_emitted(doc, hf_auto) == []


@settings(max_examples=60, deadline=None)
@given(doc=engine_documents(rl=True))
def test_engine_shaped_recipes_emit_clean_configs(doc: dict[str, Any]) -> None:
    assert errors_in_emitted(doc, hf_auto=False) == []
