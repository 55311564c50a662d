"""Lint on configs no rule was written against: `tests/corpus/unseen/` (see its README.md).

Runs `tests/unseen_report.py` once for the module: lint on every file from a copy of its
repository's layout, the engines' verdicts and the import round trip (not `lint --engines`,
the slow part; `python -m tests.unseen_report` runs that too). The gate is that lint reads
every file: no traceback, no exit 2. Today's crashes are strict xfails naming why; when a fix
lands the xfail turns into a failure and its entry is removed. The other figures (false
errors, misses, import losses) are printed, not asserted: `pytest -rA` shows them, and the
README records them with the commit they were measured at.
"""

from __future__ import annotations

import csv
import hashlib
import re

import pytest

from tests import unseen_report

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore")]

ENTRIES = unseen_report.entries()

KNOWN_CRASHES: dict[str, str] = {}
"""Corpus file → why lint cannot read it today, until fixed."""


@pytest.fixture(scope="module")
def results() -> dict[str, unseen_report.Result]:
    return {r.entry.file: r for r in unseen_report.run(engines=False)}


def test_the_files_are_the_provenance_bytes() -> None:
    """Every file has a PROVENANCE.csv row, and its bytes are the ones the row's sha256 names."""
    with (unseen_report.CORPUS / "PROVENANCE.csv").open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    on_disk = {f"{path.parent.name}/{path.name}" for kind in unseen_report.KINDS
               for path in (unseen_report.CORPUS / kind).iterdir()}
    assert on_disk == {row["file"] for row in rows}
    for row in rows:
        digest = re.search(r"sha256 ([0-9a-f]{16})", row["notes"])
        assert digest, f"{row['file']}: no sha256 in its notes"
        data = (unseen_report.CORPUS / row["file"]).read_bytes()
        assert hashlib.sha256(data).hexdigest()[:16] == digest.group(1), f"{row['file']} changed"
    assert len(rows) >= 60 and len({row["repo"] for row in rows}) >= 15


@pytest.mark.parametrize("entry", [
    pytest.param(entry, id=entry.file,
                 marks=[pytest.mark.xfail(strict=True, reason=KNOWN_CRASHES[entry.file])]
                 if entry.file in KNOWN_CRASHES else [])
    for entry in ENTRIES])
def test_lint_reads_the_file(entry: unseen_report.Entry, results: dict[str, unseen_report.Result]) -> None:
    assert not results[entry.file].crash, results[entry.file].crash


def test_figures(results: dict[str, unseen_report.Result]) -> None:
    """The report's table and lists (shown by `pytest -rA`); only the crashes are a gate."""
    ordered = list(results.values())
    print(unseen_report.table(ordered))
    print(unseen_report.listing(ordered))
    figures = unseen_report.figures(ordered)
    print(figures)
    assert figures["files"] == len(ENTRIES)
    assert {r.entry.file for r in ordered if r.crash} <= set(KNOWN_CRASHES)
