"""The engines judge lint on configs others wrote: `tests/corpus/real/`.

`VERDICTS.csv` records each engine's verdict on each corpus file (see
`tests/corpus_verdicts.py` for how each file is judged, as its repository uses it).
The first test computes the verdicts again and requires the table unchanged, so an
engine upgrade shows as a failure, not as drift. The second holds lint to them: an
error only where the engine refuses or silently differs, none where it accepts as
written, at least one for every refusal. Today's known disagreements are strict
xfails naming the rule codes involved; when a fix lands, the xfail turns into a
failure and is removed.
"""

from __future__ import annotations

import csv
import warnings
from pathlib import Path

import pytest

from distrecipe.lint.config import LintConfig
from distrecipe.lint.engine import lint
from tests import corpus_verdicts

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore")]  # imports every engine

for engine in ("deepspeed", "accelerate", "transformers", "verl"):
    pytest.importorskip(engine)

with corpus_verdicts.TABLE.open(newline="") as _f:
    TABLE = list(csv.DictReader(_f))

KNOWN: dict[str, str] = {
}
"""Corpus file → why lint disagrees with the engine today (rule codes), until fixed."""


def test_verdicts_table_is_current() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fresh = corpus_verdicts.render(list(corpus_verdicts.rows()))
    assert fresh == corpus_verdicts.TABLE.read_text(), "regenerate: python -m tests.corpus_verdicts"


def _cases() -> list[object]:
    cases = []
    for row in TABLE:
        if row["verdict"] == "not-judgeable":
            continue
        marks = [pytest.mark.xfail(strict=True, reason=KNOWN[row["file"]])] if row["file"] in KNOWN else []
        cases.append(pytest.param(row, id=row["file"], marks=marks))
    return cases


IGNORED = "DeepSpeed never reads this key"
"""The judge's note for a key DeepSpeed ignores: lint warns (DR311), since a key another
program reads from the same file (gpt-neox's `logging`) looks the same as a typo."""


def lint_errors(row: dict[str, str]) -> list[str]:
    """lint's error findings on the file, at the world the engine was judged at (and its
    warnings, where the only difference is a key DeepSpeed ignores)."""
    path = corpus_verdicts.CORPUS / row["file"]
    world = None
    if row["kind"] == "deepspeed" and row["context"].startswith("world "):
        world = int(row["context"].split()[1].rstrip(";"))
    kind = "hf" if row["kind"] == "hf-script" else row["kind"]  # a launch script's TrainingArguments flags
    report = lint([Path(path)], config=LintConfig(), world=world, kind=kind)  # type: ignore[arg-type]
    notes = row["why"].split("; ") if row["verdict"] == "differs" else []
    severities = {"error", "warning"} if notes and all(note.endswith(IGNORED) for note in notes) else {"error"}
    return [f"{f.code} {f.where}: {f.message}" for f in report.findings if f.severity in severities] + [
        f"unusable: {u.message}" for u in report.unusable]


@pytest.mark.parametrize("row", _cases())
def test_lint_agrees_with_the_engine(row: dict[str, str]) -> None:
    errors = lint_errors(row)
    if row["verdict"] == "accepts":
        assert not errors, f"the engine accepts this file as written; lint says {errors}"
    else:
        assert errors, f"the engine {row['verdict']}: {row['message']}; lint reports no error"


def test_lint_engines_reports_the_verdicts() -> None:
    """`lint --engines` gives DR900 exactly on refusals and DR901 exactly on differences.

    Judged as `lint` sees a file alone (no launch script, no repository layout), so the
    files whose table verdict depends on such context are left out: ds_configs a
    corpus script names, and Accelerate YAMLs (launched from their repository's layout).
    """
    rows = [row for row in TABLE if row["kind"] in ("deepspeed", "hf", "verl")
            and row["file"] not in corpus_verdicts.PAIRS and row["verdict"] != "not-judgeable"]
    paths = [corpus_verdicts.CORPUS / row["file"] for row in rows]
    report = lint(paths, config=LintConfig(), engines=True)
    found: dict[str, set[str]] = {}
    for finding in report.findings:
        if finding.where is not None:
            found.setdefault(finding.where.file, set()).add(finding.code)
    expected = {"refuses": {"DR900"}, "differs": {"DR901"}, "accepts": set()}
    wrong = {row["file"]: (row["verdict"], sorted(found.get(str(path), set()) & {"DR900", "DR901"}))
             for row, path in zip(rows, paths, strict=True)
             if found.get(str(path), set()) & {"DR900", "DR901"} != expected[row["verdict"]]}
    assert not wrong
