"""Hydra's override grammar read once (`engines/hydra.split_override`), with Hydra's own
parser as the judge, and every reader of an override line (`native.verl`, a script, an
override file, a user's argument after `--`) reading `~key` as Hydra does: a deletion."""

from __future__ import annotations

import re

import pytest

from distrecipe.engines.hydra import OVERRIDE_PATTERN, OverrideText, overrides, split_override

LINES: list[tuple[str, tuple[str, str, str | None] | None]] = [
    ("a.b=1", ("", "a.b", "1")),
    ("a.b=", ("", "a.b", "")),  # Hydra: the empty string
    ("+a.c=2", ("+", "a.c", "2")),
    ("++a.b='x=y'", ("++", "a.b", "'x=y'")),  # the first `=` ends the key
    ("~a.b", ("~", "a.b", None)),  # deletes whatever a.b holds
    ("~a.b=0", ("~", "a.b", "0")),  # deletes a.b where it holds 0
    ("~a.b=", ("~", "a.b", "")),
    ("a-b.c=1", ("", "a-b.c", "1")),
    ("a.0.b=1", ("", "a.0.b", "1")),
    ("hydra/launcher=basic", ("", "hydra/launcher", "basic")),
    ("model@actor=x", ("", "model@actor", "x")),
    ("a.b", None),  # Hydra: "missing EQUAL"
    ("+a.b", None),
    ("~~a.b", None),  # one prefix at most: the old override-file reader and the schema took these
    ("+~a.b=1", None),
    ("~+a.b=1", None),
    (" a.b=1", None),
    ("a.b =1", None),
    ("0a=1", None),
    ("--config-name=x", None),
]


@pytest.mark.parametrize(("line", "split"), LINES)
def test_an_override_splits_into_prefix_key_and_value_text(
        line: str, split: tuple[str, str, str | None] | None) -> None:
    assert split_override(line) == (None if split is None else OverrideText(*split))


@pytest.mark.parametrize(("line", "split"), LINES)
def test_the_split_is_hydras(line: str, split: tuple[str, str, str | None] | None) -> None:
    """Hydra reads the line iff `split_override` does, as the same kind of override of the same key."""
    parser = pytest.importorskip("hydra.core.override_parser.overrides_parser").OverridesParser.create()
    errors = pytest.importorskip("hydra.errors")
    try:
        parsed = parser.parse_override(line)
    except errors.HydraException:
        assert split is None
        return
    assert split is not None
    kinds = {"CHANGE": "", "ADD": "+", "FORCE_ADD": "++", "DEL": "~"}
    package = "" if parsed.package is None else f"@{parsed.package}"
    assert (kinds[parsed.type.name], parsed.key_or_group + package) == split[:2]
    assert (parsed.value() is None) == (split[2] is None) or split[2] == "null"


@pytest.mark.parametrize(("line", "split"), LINES)
def test_the_recipe_schema_admits_exactly_the_lines_the_grammar_reads(
        line: str, split: tuple[str, str, str | None] | None) -> None:
    assert (re.search(OVERRIDE_PATTERN, line) is not None) == (split is not None)


def test_a_script_and_an_override_file_read_the_same_overrides() -> None:
    """The old override-file reader wanted `=` after every key, so it missed `~key`."""
    lines = ["trainer.nnodes=1", "~trainer.val_generations_to_log", "+trainer.extra=2", "++data.seed=3",
             "~trainer.logger=console"]
    script = "python3 -m verl.trainer.main_ppo \\\n  " + " \\\n  ".join(lines) + "\n"

    def read(text: str, file: str) -> list[tuple[str, str, str | None]]:
        return [(item.prefix, item.key, item.value) for item in overrides(text, file)]

    expected = [tuple(split) for line in lines if (split := split_override(line)) is not None]
    assert read(script, "run.sh") == read("\n".join(lines) + "\n", "verl_overrides.txt") == expected
    (item,) = [item for item in overrides("\n".join(lines), "o.txt") if item.prefix == "~" and item.value is None]
    assert (item.key_at.line, item.key_at.col) == (2, 2)

