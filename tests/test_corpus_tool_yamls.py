"""Axolotl and LLaMA-Factory YAMLs others wrote, linted in their repository's layout.

Each YAML of `tests/corpus/real/{axolotl,llamafactory}/` is placed at its path in a copy of
its repository's layout, beside every corpus file of that repository (the ds_configs and
Accelerate configs it names), and the copy is linted from its root, as the tools run:
lint raises an error on the YAML exactly where the tool's own validator refused it
(VERDICTS.csv, recorded from the tools' sources), none where it accepted it. No engine
is imported, so this runs in the fast suite (the engines' verdicts on the ds_configs are
held in tests/test_corpus_verdicts.py).
"""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

import pytest

from distrecipe.lint.config import LintConfig
from distrecipe.lint.engine import lint
from tests.corpus_verdicts import CORPUS, TABLE, TOOLS, provenance

with TABLE.open(newline="") as _f:
    ROWS = [row for row in csv.DictReader(_f) if row["kind"] in TOOLS]


def layout(tool: str, root: Path) -> dict[str, Path]:
    """The repository of `tool`'s folder, rebuilt under `root` from every corpus file of it
    (a file of the tool's own folder wins over an older copy elsewhere); corpus name → path."""
    origins = provenance()
    repo = next(row["repo"] for name, row in origins.items() if name.startswith(f"{tool}/"))
    placed: dict[str, Path] = {}
    for name, row in sorted(origins.items(), key=lambda item: not item[0].startswith(f"{tool}/")):
        target = root / row["path"]
        if row["repo"] != repo or target.exists():
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(CORPUS / name, target)
        placed[name] = target
    return placed


@pytest.fixture(scope="module")
def linted(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[str]]:
    """Corpus name → lint's errors on it, each tool's layout linted once from its root."""
    import os

    errors: dict[str, list[str]] = {}
    for tool in TOOLS:
        root = tmp_path_factory.mktemp(tool)
        placed = layout(tool, root)
        here = os.getcwd()
        os.chdir(root)
        try:
            report = lint(["."], config=LintConfig())
        finally:
            os.chdir(here)
        assert not report.unusable, report.unusable
        by_path = {os.path.realpath(path): name for name, path in placed.items()}
        for finding in report.findings:
            if finding.severity == "error" and finding.where:
                name = by_path.get(os.path.realpath(root / finding.where.file))
                errors.setdefault(name or finding.where.file, []).append(f"{finding.code} {finding}")
    return errors


def test_the_corpus_holds_twenty_or_more_of_both_kinds() -> None:
    assert len(ROWS) >= 20 and {row["kind"] for row in ROWS} == set(TOOLS)


@pytest.mark.parametrize("row", ROWS, ids=[row["file"] for row in ROWS])
def test_lint_agrees_with_the_tools_validator(row: dict[str, str], linted: dict[str, list[str]]) -> None:
    errors = linted.get(row["file"], [])
    if row["verdict"] == "refuses":
        assert errors, f"{row['engine']} refuses: {row['message']}; lint reports no error"
    else:
        assert not errors, f"{row['engine']}: {row['verdict']}; lint says {errors}"
