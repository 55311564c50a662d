"""The deterministic sweeps: every family of hostile input through every command.

The slow set runs every input (over 10,000); the fast set every `stride`-th, about
500 in all, so `make test-fast` still meets each family and each command.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.hostile import inputs
from tests.hostile.harness import Case, Sandbox, sweep

FAMILIES: dict[str, tuple[Callable[[], list[Case]], int]] = {
    "fields": (inputs.field_cases, 30),
    "set": (inputs.set_cases, 40),
    "damage": (inputs.damage_cases, 25),
    "native": (inputs.native_cases, 80),
    "overrides": (inputs.override_cases, 10),
    "names": (inputs.name_cases, 3),
    "special": (inputs.special_cases, 2),
    "pyproject": (inputs.pyproject_cases, 1),
    "hf_arguments": (inputs.hf_arguments_cases, 1),
    "argv": (inputs.argv_cases, 4),
    "numeric": (inputs.numeric_cases, 40),
}
"""Family → (its inputs, the fast set's stride)."""


def _check(sandbox: Sandbox, family: str, stride: int) -> None:
    cases, _ = FAMILIES[family]
    failures = sweep(sandbox, cases(), stride=stride)
    assert not failures, f"{len(failures)} kinds of broken promise:\n" + "\n".join(failures[:40])


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_sample(sandbox: Sandbox, family: str) -> None:
    _check(sandbox, family, FAMILIES[family][1])


@pytest.mark.slow
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_every_input(sandbox: Sandbox, family: str) -> None:
    _check(sandbox, family, 1)
