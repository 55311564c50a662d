"""Run the registered rules over files: positions, suppressions, severities, order.

Rules only say which key path is wrong and why; this module turns that into a
`Finding` at `file:line:col`, drops what is suppressed or disabled, applies the
configured severity and sorts, so output is the same for the same files every time.
A file that cannot be read at all is not a finding but an unusable input (exit 2).
"""

from __future__ import annotations

import fnmatch
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from distrecipe.engines import KINDS, Kind
from distrecipe.engines.native import DATA_SUFFIXES, OVERRIDE_SUFFIXES, is_file, unsupported
from distrecipe.errors import DistrecipeError, Position
from distrecipe.findings import Finding, Severity
from distrecipe.lint import native
from distrecipe.lint.config import Consumer, LintConfig, at_least
from distrecipe.lint.references import SKIPPED_DIRS
from distrecipe.lint.rules import RULES
from distrecipe.lint.suppress import EVERY, suppressions
from distrecipe.lint.workspace import Source, Workspace
from distrecipe.lint.world import World
from distrecipe.source import Document

if TYPE_CHECKING:
    from distrecipe.job import Plan


class NotAConfig(DistrecipeError):
    """A file named on the command line is none of the kinds lint reads."""


@dataclass(frozen=True)
class Report:
    findings: list[Finding]
    unusable: list[DistrecipeError] = field(default_factory=list)
    files: int = 0
    fail_on: Severity = "error"
    """The least severe finding that fails the run (`--fail-on`)."""
    hidden: int = 0
    """Findings below `--min-severity`, left out of `findings` (`shown`)."""
    skipped: list[str] = field(default_factory=list)
    """Files found in a walked directory that are no config distrecipe reads."""

    @property
    def exit_code(self) -> int:
        """2 when an input was unusable, 1 when a finding at `fail_on` or above was found, else 0."""
        if self.unusable:
            return 2
        return 1 if self.failing else 0

    @property
    def failing(self) -> bool:
        return any(at_least(f.severity, self.fail_on) for f in self.findings)

    def shown(self, min_severity: Severity) -> Report:
        """The report with findings below `min_severity` left out, except those that fail
        the run: an exit code of 1 always comes with the finding that caused it."""
        threshold = min_severity if at_least(self.fail_on, min_severity) else self.fail_on
        kept = [f for f in self.findings if at_least(f.severity, threshold)]
        return replace(self, findings=kept, hidden=self.hidden + len(self.findings) - len(kept))


def lint(paths: Sequence[str | Path], *, config: LintConfig, world: int | None = None,
         kind: Kind | None = None, ignore_unknown: bool = False, consumer: Consumer | None = None,
         engines: bool = False, fail_on: Severity | None = None) -> Report:
    """Lint files and directories; `world` (ranks), `kind` and `consumer` (who reads
    the ds_configs) override detection.

    A file named explicitly must be a config, unless `ignore_unknown` (pre-commit
    passes every JSON and YAML file of a commit, configs or not). `engines` also runs
    the engines' own judges (DR900, DR901); an engine that is not installed is an error.
    `fail_on` (else `[tool.distrecipe.lint] fail_on`) is the least severe finding that fails.
    """
    stated = (World(world, "--world", "option") if world is not None
              else World(config.world, "[tool.distrecipe] world", "project") if config.world is not None
              else None)
    workspace = Workspace(stated, consumer=consumer, config=config, engines=engines)
    try:
        report = _lint(paths, workspace, config, kind, ignore_unknown)
        return replace(report, fail_on=fail_on or config.fail_on)
    finally:
        workspace.close()


def _lint(paths: Sequence[str | Path], workspace: Workspace, config: LintConfig, kind: Kind | None,
          ignore_unknown: bool) -> Report:
    findings: list[Finding] = []
    unusable: list[DistrecipeError] = []
    skipped: list[str] = []
    count = 0
    files = list(_files(paths, config.exclude))
    workspace.references.linted = [path for path, _ in files]
    for path, root in files:  # launch scripts first: they say how the configs are used
        workspace.register(path, root or Path.cwd())
    named = [path for path, root in files if root is None and is_file(path)]
    real = workspace.references.real
    linted = {real(path) for path, _ in files}
    related = [path for path in workspace.references.related(named) if real(path) not in linted]
    for path, root in files:
        explicit = root is None
        try:
            sources = workspace.sources(path, kind)
            if not sources:
                if explicit and not ignore_unknown:
                    raise NotAConfig(f"not a config distrecipe reads (none of {', '.join(KINDS)}"
                                     f"{_unread(workspace, path)}): pass --kind if it is one", _start(path))
                if not explicit and path.suffix.lower() in DATA_SUFFIXES:
                    skipped.append(str(path))
                continue
        except DistrecipeError as exc:
            if not explicit and path.suffix.lower() in OVERRIDE_SUFFIXES:
                continue  # a walked script or text file that is not readable is not ours
            unusable.append(exc if exc.where else DistrecipeError(exc.message, _start(path)))
            continue
        count += 1
        for source in sources:
            findings.extend(check(_with_plan(source), config))
    for path in related:  # the other half of a pair a named file is in: the pair rules only
        try:
            sources = workspace.sources(path)
        except DistrecipeError:
            continue
        for source in sources:
            findings.extend(check(_with_plan(source), config, pairs_only=True))
    findings.sort(key=_order)
    return Report(findings, unusable, count, skipped=skipped)


def _unread(workspace: Workspace, path: Path) -> str:
    """What the file is instead, when lint can tell (`engines.native.unsupported`)."""
    what = next(filter(None, map(unsupported, workspace.files.documents(path))), None)
    return f"; {what}" if what else ""


def check(src: Source, config: LintConfig, *, pairs_only: bool = False) -> list[Finding]:
    """Every enabled rule's findings for one source, suppressions applied; for a recipe,
    also the key rules' findings on each of its `native` sections (`lint/native.py`).
    `pairs_only`: only the rules that judge the file with another (`Rule.pair`)."""
    out = _check(src, config, pairs_only)
    if src.kind == "recipe" and not pairs_only:
        for section in native.sections(src):
            out.extend(_check(section, config, pairs_only))
    return out


def _check(src: Source, config: LintConfig, pairs_only: bool = False) -> list[Finding]:
    quiet = suppressions(src.doc)
    out = []
    for code, rule in RULES.items():
        if src.kind not in rule.kinds or (src.within and not rule.section) or (pairs_only and not rule.pair):
            continue
        level = config.level(code, rule.severity)
        if level == "off" or config.ignored(code, src.doc.file):
            continue
        for problem in rule.check(src):
            where = problem.where or src.doc.where(problem.path, key=problem.key)
            if quiet.covers(code, where.line):
                continue
            out.append(Finding(code, problem.message, level, where))
    return out


def check_recipe(doc: Document, plan: Plan, config: LintConfig) -> list[Finding]:
    """Lint's findings on a recipe document (its `native` sections included), judged with
    the Plan the caller resolved: what `lint recipe.yaml` says, for compile to refuse."""
    workspace = Workspace(None, config=config)
    try:
        return check(Source(doc=doc, kind="recipe", workspace=workspace, plan=plan), config)
    finally:
        workspace.close()


def check_written(files: Mapping[str, str], *, recipe: Document, said: Iterable[Finding],
                  config: LintConfig, world: int | None, consumer: Consumer | None = None,
                  written_as: Path | None = None) -> Report:
    """Lint's findings on the files compiled from `recipe`, linted in a private directory
    side by side as a user commits them (so each ds_config's reader is known) at `world`,
    the ranks that read them; each placed at `written_as / name`.

    A fact already `said` at the recipe (a `native` key carried into the file) is said once,
    there, where it is fixed; a code the recipe silences (`ignore[CODE]`, `ignore-file`)
    is silenced in what it compiles to, since the files cannot hold the comment.
    """
    known = {(f.code, f.message) for f in said}
    quiet = suppressions(recipe)
    silenced = quiet.file | {code for codes in quiet.lines.values() for code in codes if code != EVERY}
    with tempfile.TemporaryDirectory(prefix="distrecipe-compile-") as tmp:
        for name, text in files.items():
            (Path(tmp) / name).write_bytes(text.encode("utf-8"))
        own = replace(config, exclude=(), ds_config=())  # compile knows the files' reader
        emitted = lint([tmp], config=own, world=world, consumer=consumer)

        def placed(where: Position | None) -> Position | None:
            if where is None or written_as is None:
                return where
            return replace(where, file=str(written_as / Path(where.file).relative_to(tmp)))

        findings = [replace(f, where=placed(f.where)) for f in emitted.findings
                    if (f.code, f.message) not in known and f.code not in silenced
                    and EVERY not in quiet.file]
        unusable = [DistrecipeError(e.message, placed(e.where)) for e in emitted.unusable]
    return Report(findings, unusable, emitted.files)


def _with_plan(src: Source) -> Source:
    """A recipe source with its Plan (or the reason it has none) attached."""
    if src.kind != "recipe":
        return src
    from distrecipe.api import review_plan

    try:
        stated = src.workspace.world
        plan = review_plan(src.doc, src.path.parent, world=stated.ranks if stated else None)
        return src if plan is None else replace(src, plan=plan)
    except DistrecipeError as exc:
        return replace(src, error=exc)


def _files(paths: Iterable[str | Path], exclude: Sequence[str]) -> Iterable[tuple[Path, Path | None]]:
    """Named files as given (root None); directories walked in sorted order for
    config-looking files, each with the directory it was found under (its root)."""
    for given in paths:
        path = Path(given)
        if not path.is_dir():
            yield path, None
            continue
        for found in sorted(path.rglob("*")):
            relative = found.relative_to(path)
            if any(part in SKIPPED_DIRS for part in relative.parts) or not found.is_file():
                continue
            if any(fnmatch.fnmatch(found.as_posix(), pattern) or fnmatch.fnmatch(relative.as_posix(), pattern)
                   for pattern in exclude):
                continue
            if found.suffix.lower() in DATA_SUFFIXES + OVERRIDE_SUFFIXES:
                yield found, path


def _start(path: Path) -> Position:
    return Position(str(path), 1, 1)


def _order(finding: Finding) -> tuple[str, int, int, str]:
    where = finding.where
    return (where.file, where.line, where.col, finding.code) if where else ("", 0, 0, finding.code)
