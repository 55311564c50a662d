"""`plan`'s text: every list it prints names something; an empty one is left out, never
printed as `at the peak: ` or `0 kB: ;`."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest

from tests.conftest import RECIPES, Result

EMPTY = re.compile(r":\s*(?:$|[;,)])|\(\s*\)|,\s*[;,)]")
"""A list item with nothing in it: a label's colon followed by nothing, `()`, `, ,`."""
ONE_RANK = ("--set", "cluster.nodes=1", "--set", "cluster.gpus_per_node=1", "--set", "batch.global=8",
            "--set", "batch.accumulation=auto")
VARIANTS = {
    "as written": (),
    "one rank": ONE_RANK,
    "one rank, ZeRO-3, all offloaded": (*ONE_RANK, "--set", "strategy=zero", "--set", "stage=3",
                                        "--set", "offload.params=cpu", "--set", "offload.optimizer=cpu"),
    "FSDP2, all offloaded": ("--set", "strategy=fsdp", "--set", "stage=3", "--set", "offload.params=cpu",
                             "--set", "offload.optimizer=cpu"),
}


def _empty_items(text: str) -> list[str]:
    return [line for line in text.splitlines() if EMPTY.search(line)]


def test_one_rank_sends_nothing_and_says_so_without_an_empty_list(cli: Callable[..., Result]) -> None:
    result = cli("plan", RECIPES / "tiny-cpu.yaml", "--set", "cluster.gpus_per_node=1", "--set", "batch.global=4")
    assert result.code == 0, result.err
    lines = result.out.splitlines()
    assert "  formula (seed)  0 kB" in lines
    assert "  engine          0 kB; 2 gradient reduction(s) per step" in lines
    assert _empty_items(result.out) == []


def test_fsdp2_offloaded_holds_nothing_at_its_peak_and_lists_nothing(cli: Callable[..., Result]) -> None:
    """FSDP2's CPU offload keeps no model state on the GPU: the peak is 0 kB, with no `at the
    peak:` line, and the optimizer step allocates nothing there."""
    result = cli("plan", RECIPES / "seed-8b-32gpu-zero2.yaml", *VARIANTS["FSDP2, all offloaded"])
    assert result.code == 0, result.err
    lines = result.out.splitlines()
    assert ("  engine          torch FSDP2 (reshard_after_forward=True, CPU offload): rest 0 kB, after backward "
            "0 kB, peak 0 kB (backward)") in lines
    assert not [line for line in lines if "at the peak" in line]
    assert "  optimizer step     allocated 0 kB" in lines
    assert _empty_items(result.out) == []


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("recipe", sorted(RECIPES.glob("*.yaml")), ids=lambda path: path.stem)
def test_no_list_is_printed_empty(cli: Callable[..., Result], recipe: object, variant: str) -> None:
    result = cli("plan", recipe, *VARIANTS[variant])
    assert result.code in (0, 1), result.err  # 1: it does not fit, still printed
    assert _empty_items(result.out) == []
