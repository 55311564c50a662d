"""Pipeline stages: the embedding on the first, the head on the last, uneven end stages,
and the stage that needs the most is the one `plan` judges."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from distrecipe.job import Plan
from distrecipe.plan.report import estimate
from distrecipe.plan.stages import binding, in_flight, stage
from distrecipe.translator.load import recipe_from_text
from distrecipe.translator.resolve import resolve

LAYERS, H, V = 32, 4096, 128256


def plan_of(**parallel: Any) -> Plan:
    doc = {
        "recipe": 1, "name": "pp",
        "model": {"params": 8_030_261_248, "hidden_size": H, "layers": LAYERS, "heads": 32, "kv_heads": 8,
                  "intermediate_size": 14336, "vocab": V},
        "cluster": {"nodes": 1, "gpus_per_node": 8, "gpu_memory": "80GB", "gpu": "h100"},
        "strategy": "megatron", "parallel": {"tensor": 2, "pipeline": 4, **parallel},
        "batch": {"micro": 1, "global": 16, "seq_len": 4096},
    }
    return resolve(recipe_from_text(yaml.safe_dump(doc), "pp.yaml"))


def test_the_end_stages_carry_the_embedding_and_the_head() -> None:
    plan = plan_of()
    first, middle, last = stage(plan, 0), stage(plan, 1), stage(plan, 3)
    embedding = V * H / 2
    assert (first.embedding, first.head, last.head, middle.embedding or middle.head) == (True, False, True, False)
    assert first.params - middle.params == pytest.approx(embedding)
    assert last.params - middle.params == pytest.approx(embedding)  # the untied head, V × h
    whole = sum(stage(plan, r).params for r in range(4))
    assert whole == pytest.approx(8_030_261_248 / 2)


def test_uneven_end_stages_move_layers_to_the_middle() -> None:
    plan = plan_of(first_stage_layers=5, last_stage_layers=5)
    assert [stage(plan, r).layers for r in range(4)] == [5, 11, 11, 5]
    assert [st.rank for st in binding(plan)] == [0, 1, 3]


def test_one_f_one_b_holds_p_minus_rank_in_flight() -> None:
    plan = plan_of()
    assert [in_flight(plan, r) for r in range(4)] == [4, 3, 2, 1]


def test_the_judged_stage_is_the_one_that_needs_the_most() -> None:
    """With 5 layers and the embedding on the first stage, the second (11 layers, 3 in flight)
    needs the most; evenly split, the first (8 layers, 4 in flight, the embedding)."""
    assert estimate(plan_of(first_stage_layers=5, last_stage_layers=5)).stage.rank == 1  # type: ignore[union-attr]
    even = estimate(plan_of())
    assert even.stage is not None and even.stage.rank == 0
