"""Output formats: one small function each, keyed by name (as yamllint's are).

* `text`: `file:line:col: severity CODE message`, then a one-line summary.
* `json`: the findings as objects, for scripts and `jq`.
* `sarif`: SARIF 2.1.0, for GitHub code scanning (`github/codeql-action/upload-sarif`).
* `github`: workflow commands, so findings appear as annotations on the pull request.
* `auto`: `github` inside GitHub Actions, else `text`.

Every format is a pure function of the report: the same files give the same bytes.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from distrecipe import __version__
from distrecipe.findings import SEVERITIES, Finding
from distrecipe.lint.engine import Report
from distrecipe.lint.rule import Rule
from distrecipe.lint.rules import RULES
from distrecipe.output import to_json

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
SARIF_LEVEL = {"error": "error", "warning": "warning", "info": "note"}
GITHUB_LEVEL = {"error": "error", "warning": "warning", "info": "notice"}
INFO_URI = "https://github.com/distrecipe/distrecipe"


def text(report: Report) -> str:
    lines = [str(f) for f in report.findings]
    counts = {level: sum(f.severity == level for f in report.findings) for level in SEVERITIES}
    summary = (f"{_count(report.files, 'file')} checked: "
               + ", ".join(_count(n, level) for level, n in counts.items()))
    if report.hidden:
        summary += f" ({_count(report.hidden, 'finding')} below --min-severity not shown)"
    if report.skipped:
        summary += f"; {_count(len(report.skipped), 'other file')} skipped: not configs distrecipe reads"
    lines.append(summary)
    return "\n".join(lines) + "\n"


def _count(n: int, what: str) -> str:
    return f"{n} {what}{'s' if n != 1 else ''}"


def as_json(report: Report) -> str:
    findings = [
        {"file": f.where.file if f.where else None, "line": f.where.line if f.where else None,
         "col": f.where.col if f.where else None, "code": f.code, "name": RULES[f.code].name,
         "severity": f.severity, "message": f.message}
        for f in report.findings
    ]
    return to_json({"files": report.files, "findings": findings, "hidden": report.hidden,
                    "skipped": report.skipped})


def sarif(report: Report) -> str:
    codes = sorted(RULES)
    rules = [_sarif_rule(RULES[code]) for code in codes]
    index = {code: i for i, code in enumerate(codes)}
    results = [_sarif_result(f, index) for f in report.findings]
    log = {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {"name": "distrecipe", "version": __version__, "informationUri": INFO_URI,
                                "rules": rules}},
            "columnKind": "unicodeCodePoints",
            "results": results,
        }],
    }
    return to_json(log)


def _sarif_rule(rule: Rule) -> dict[str, Any]:
    return {
        "id": rule.code,
        "name": rule.name,
        "shortDescription": {"text": rule.summary},
        "fullDescription": {"text": rule.explanation},
        "help": {"text": rule.explanation},
        "defaultConfiguration": {"level": SARIF_LEVEL[rule.severity]},
    }


def _sarif_result(f: Finding, index: dict[str, int]) -> dict[str, Any]:
    result: dict[str, Any] = {
        "ruleId": f.code,
        "ruleIndex": index[f.code],
        "level": SARIF_LEVEL[f.severity],
        "message": {"text": f.message},
    }
    if f.where:
        result["locations"] = [{"physicalLocation": {
            "artifactLocation": {"uri": _uri(f.where.file)},
            "region": {"startLine": f.where.line, "startColumn": f.where.col},
        }}]
    return result


def _uri(file: str) -> str:
    """A relative URI (code scanning resolves it against the checkout), `/`-separated."""
    path = Path(file)
    if path.is_absolute():
        try:
            path = path.relative_to(Path.cwd())
        except ValueError:
            return path.as_uri()
    return path.as_posix()


def github(report: Report) -> str:
    lines = []
    for f in report.findings:
        where = f",file={_prop(f.where.file)},line={f.where.line},col={f.where.col}" if f.where else ""
        lines.append(f"::{GITHUB_LEVEL[f.severity]} title={f.code}{where}::{_data(f.message)}")
    return "".join(line + "\n" for line in lines)


def _data(value: str) -> str:
    return value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _prop(value: str) -> str:
    return _data(value).replace(":", "%3A").replace(",", "%2C")


FORMATS: dict[str, Callable[[Report], str]] = {
    "text": text,
    "json": as_json,
    "sarif": sarif,
    "github": github,
}


def pick(name: str) -> Callable[[Report], str]:
    """The formatter for `name`; `auto` is GitHub annotations inside GitHub Actions."""
    if name == "auto":
        name = "github" if os.environ.get("GITHUB_ACTIONS") == "true" else "text"
    return FORMATS[name]
