"""`engines.defaults`: two spellings of one setting compare as one key, as the engine reads them."""

from __future__ import annotations

import pytest

from distrecipe.engines.defaults import canonical, lookup
from distrecipe.engines.tables import label


@pytest.mark.parametrize(("kind", "written", "read"), [
    ("deepspeed", ("bfloat16", "enabled"), ("bf16", "enabled")),  # DeepSpeed's legacy name
    ("deepspeed", ("zero_optimization", "stage3_max_live_parameters"), ("zero_optimization", "max_live_parameters")),
    ("deepspeed", ("bf16", "enabled"), ("bf16", "enabled")),
    ("accelerate", ("fsdp_config", "version"), ("fsdp_config", "fsdp_version")),
])
def test_a_key_is_compared_under_the_name_the_engine_reads(kind: str, written: tuple[str, ...],
                                                           read: tuple[str, ...]) -> None:
    assert canonical(kind, written) == read  # type: ignore[arg-type]


@pytest.mark.parametrize(("config", "overlap"), [
    ({"zero_optimization": {"stage": 3}}, True),
    ({"zero_optimization": {"stage": 2}}, False),
    ({"train_batch_size": 8}, False),  # no zero_optimization: stage 0
    ({"zero_optimization": {"stage": "auto"}}, None),  # no stage DeepSpeed could derive it from
])
def test_overlap_comm_defaults_to_on_at_zero_3_only(config: dict[str, object], overlap: bool | None) -> None:
    """`DeepSpeedZeroConfig.overlap_comm_valid`: left out (or null), it is `stage == 3`."""
    found = lookup("deepspeed", config)(("zero_optimization", "overlap_comm"))
    if overlap is None:
        assert found is None
    else:
        assert found is not None and (found.value, found.source) == (overlap, f"{label('deepspeed')} default")
