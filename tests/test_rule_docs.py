"""Every lint rule's documented examples are run: each `Fails:` fires it, each `Passes:` is clean.

A rule's docstring is what `distrecipe explain CODE` prints, so its examples are what
a user copies. Each is written in one form, which reads as it is and parses:

    Fails: deepspeed --world 4
    ```json
    {"train_batch_size": 32, "train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 4}
    ```

The header names the kind of the linted file and, as on the command line, the world
size; the first block is the linted file (`config.json`, `config.yaml`,
`overrides.txt` or `run.sh` by its language unless named), and any further blocks are files beside
it, each named (```` ```json ds.json ````), for rules that read two files together.
A passing example has no finding at all, not only none of its rule's: it is the fix a
user copies.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from distrecipe.engines import KINDS
from distrecipe.lint.config import LintConfig
from distrecipe.lint.engine import lint
from distrecipe.lint.rules import RULES
from distrecipe.lint.workspace import Workspace

HEADER = re.compile(r"(?P<verdict>Fails|Passes): (?P<kind>\w+)(?: --world (?P<world>\d+))?")
FENCE = re.compile(r"```(?P<language>json|yaml|text|sh)(?: (?P<name>[\w.-]+))?")
DEFAULT_NAME = {"json": "config.json", "yaml": "config.yaml", "text": "overrides.txt", "sh": "run.sh"}


@dataclass(frozen=True)
class Example:
    code: str
    fails: bool
    kind: str
    world: int | None
    files: tuple[tuple[str, str], ...]
    """(name, text) of each file; the first is the one linted."""


def examples(code: str) -> list[Example]:
    """The examples in `code`'s explanation; a malformed one fails the parse, naming the line."""
    lines = RULES[code].explanation.splitlines()
    found: list[Example] = []
    i = 0
    while i < len(lines):
        if not re.match(r"(Fails|Passes)\b", lines[i]):
            i += 1
            continue
        header = HEADER.fullmatch(lines[i])
        assert header and header["kind"] in KINDS, f"{code}: not an example header: {lines[i]!r}"
        files: list[tuple[str, str]] = []
        i += 1
        while i < len(lines) and (fence := FENCE.fullmatch(lines[i])):
            end = lines.index("```", i + 1)
            name = fence["name"] or DEFAULT_NAME[fence["language"]]
            assert fence["name"] or not files, f"{code}: a file beside the linted one needs a name"
            files.append((name, "\n".join(lines[i + 1:end]) + "\n"))
            i = end + 1
        assert files, f"{code}: {header[0]!r} is not followed by a ``` block"
        world = int(header["world"]) if header["world"] else None
        found.append(Example(code, header["verdict"] == "Fails", header["kind"], world, tuple(files)))
    return found


ALL = [example for code in RULES for example in examples(code)]


def example_id(n: int) -> str:
    """`DR321-fails-2`: the rule, the verdict, and which of the rule's examples with it."""
    e = ALL[n]
    verdict = "fails" if e.fails else "passes"
    return f"{e.code}-{verdict}-{1 + sum((x.code, x.fails) == (e.code, e.fails) for x in ALL[:n])}"


NO_FILE_FAILS = {"DR902": "the judge's own breakage on an engine release, never a file's: "
                          "tests/lint/rules/test_engines.py breaks a judge to show it"}
"""Rules no file can trigger, with where they are shown instead."""


@pytest.mark.parametrize("code", [code for code in RULES if code not in NO_FILE_FAILS])
def test_every_rule_shows_a_failing_and_a_passing_example(code: str) -> None:
    verdicts = {example.fails for example in examples(code)}
    assert verdicts == {True, False}, f"{code} needs at least one Fails: and one Passes: example"


ENGINE_RULES = frozenset({"DR900", "DR901"})
"""Rules only `lint --engines` runs: their examples run the installed engines (slow)."""


@pytest.mark.parametrize("example", [
    pytest.param(e, marks=pytest.mark.slow) if e.code in ENGINE_RULES else e for e in ALL
], ids=[example_id(n) for n in range(len(ALL))])
def test_example_does_what_it_says(example: Example, tmp_path: Path) -> None:
    for name, text in example.files:
        (tmp_path / name).write_text(text, encoding="utf-8")
    linted = tmp_path / example.files[0][0]
    source = Workspace(None, config=LintConfig()).source(linted)  # as lint reads it
    assert source is not None and source.kind == example.kind
    report = lint([linted], config=LintConfig(), world=example.world,
                  engines=example.code in ENGINE_RULES)
    assert not report.unusable, report.unusable
    codes = {finding.code for finding in report.findings}
    if example.fails:
        assert example.code in codes, report.findings
    else:
        # The fix a user copies: nothing to act on (an info such as DR315's "the Trainer
        # fills this" is the point of a template, not a finding against it).
        assert not {f.code for f in report.findings if f.severity != "info"} | (codes & {example.code}), \
            report.findings
