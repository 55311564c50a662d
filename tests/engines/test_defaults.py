"""`engines.defaults`: two spellings of one setting compare as one key, as the engine reads them."""

from __future__ import annotations

import pytest

from distrecipe.engines.defaults import canonical


@pytest.mark.parametrize(("kind", "written", "read"), [
    ("deepspeed", ("bfloat16", "enabled"), ("bf16", "enabled")),  # DeepSpeed's legacy name
    ("deepspeed", ("zero_optimization", "stage3_max_live_parameters"), ("zero_optimization", "max_live_parameters")),
    ("deepspeed", ("bf16", "enabled"), ("bf16", "enabled")),
    ("accelerate", ("fsdp_config", "version"), ("fsdp_config", "fsdp_version")),
])
def test_a_key_is_compared_under_the_name_the_engine_reads(kind: str, written: tuple[str, ...],
                                                           read: tuple[str, ...]) -> None:
    assert canonical(kind, written) == read  # type: ignore[arg-type]
