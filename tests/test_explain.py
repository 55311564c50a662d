"""`distrecipe explain CODE` prints, for any code, every equivalence-table row that reports it."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from distrecipe.engines import ENGINES
from distrecipe.lint.rules import RULES
from distrecipe.translator.codes import CODES
from distrecipe.translator.equivalence import TABLE
from tests.conftest import Result


def rows_of(code: str) -> list[str]:
    """The table's rows where any engine's cell reports `code`."""
    return [row.recipe for row in TABLE if any(row.cell(engine).code == code for engine in ENGINES)]


@pytest.mark.parametrize("code", sorted(set(CODES) | set(RULES)))
def test_explain_lists_every_row_of_its_code(cli: Callable[..., Result], code: str) -> None:
    result = cli("explain", code)
    assert result.code == 0
    rows = rows_of(code)
    if rows:
        listed = result.out.split("Equivalence table rows: ", 1)[1].strip().removesuffix(".")
        assert listed.split("; ") == list(dict.fromkeys(rows))
    else:
        assert "Equivalence table rows" not in result.out


def test_dr214_has_rows_only_the_trainer_reports() -> None:
    """DR214 is hf's alone: an engine list without hf would print no row for it."""
    assert rows_of("DR214")
    assert all(row.cell("hf").code == "DR214" for row in TABLE if row.recipe in rows_of("DR214"))
