"""The lint corpus: every case produces exactly the findings its `expect` file lists.

Each directory under `tests/lint_corpus/CODE/` is a realistic broken config (with
its siblings when the rule is about two files); `expect` names every finding as
`FILE:LINE CODE`. Nothing more may be reported, so a rule that starts firing where it
should not breaks another rule's case.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from distrecipe.lint.config import LintConfig
from distrecipe.lint.engine import lint
from distrecipe.lint.rules import RULES

CORPUS = Path(__file__).parent / "lint_corpus"
CASES = sorted(p.parent for p in CORPUS.rglob("expect"))


def expected(case: Path) -> tuple[int | None, set[tuple[str, int, str]]]:
    world = None
    found = set()
    for line in (case / "expect").read_text().splitlines():
        if line.startswith("# world:"):
            world = int(line.split(":")[1])
        elif line.strip():
            place, code = line.split()
            file, number = place.rsplit(":", 1)
            found.add((file, int(number), code))
    return world, found


@pytest.mark.parametrize("case", CASES, ids=[str(c.relative_to(CORPUS)) for c in CASES])
def test_case_reports_exactly_its_findings(case: Path) -> None:
    world, want = expected(case)
    report = lint([case], config=LintConfig(), world=world)
    assert not report.unusable
    got = {(Path(f.where.file).relative_to(case).as_posix(), f.where.line, f.code)
           for f in report.findings if f.where}
    assert got == want, "\n".join(map(str, report.findings))


def test_every_rule_has_two_cases() -> None:
    per_code: dict[str, int] = {}
    for case in CASES:
        per_code[case.parent.name] = per_code.get(case.parent.name, 0) + 1
        assert case.parent.name in RULES, case
        assert any(code == case.parent.name for *_, code in expected(case)[1]), case
    # The engines' own verdicts (`lint --engines`) are held to the real-world corpus instead,
    # in tests/test_corpus_verdicts.py (slow: they import the engines).
    by_engines = {code for code, rule in RULES.items() if rule.check.__module__.endswith("rules.engines")}
    assert {code for code, n in per_code.items() if n >= 2} == set(RULES) - by_engines
