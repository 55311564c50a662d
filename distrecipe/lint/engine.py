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

from distrecipe.engines import Kind
from distrecipe.engines.native import DATA_SUFFIXES, OVERRIDE_SUFFIXES
from distrecipe.errors import DistrecipeError, Position
from distrecipe.findings import Finding
from distrecipe.lint import native
from distrecipe.lint.config import Consumer, LintConfig
from distrecipe.lint.rule import Source
from distrecipe.lint.rules import RULES
from distrecipe.lint.suppress import EVERY, suppressions
from distrecipe.lint.workspace import Workspace
from distrecipe.source import Document

if TYPE_CHECKING:
    from distrecipe.job import Plan

SKIPPED_DIRS = frozenset({".git", ".venv", "venv", "node_modules", "__pycache__", ".mypy_cache", ".tox"})


class NotAConfig(DistrecipeError):
    """A file named on the command line is none of the kinds lint reads."""


@dataclass(frozen=True)
class Report:
    findings: list[Finding]
    unusable: list[DistrecipeError] = field(default_factory=list)
    files: int = 0

    @property
    def exit_code(self) -> int:
        """2 when an input was unusable, 1 when an error was found, else 0."""
        if self.unusable:
            return 2
        return 1 if any(f.severity == "error" for f in self.findings) else 0


def lint(paths: Sequence[str | Path], *, config: LintConfig, world: int | None = None,
         kind: Kind | None = None, ignore_unknown: bool = False, consumer: Consumer | None = None,
         engines: bool = False) -> Report:
    """Lint files and directories; `world` (ranks), `kind` and `consumer` (who reads
    the ds_configs) override detection.

    A file named explicitly must be a config, unless `ignore_unknown` (pre-commit
    passes every JSON and YAML file of a commit, configs or not). `engines` also runs
    the engines' own judges (DR900, DR901); an engine that is not installed is an error.
    """
    workspace = Workspace(world if world is not None else config.world,
                          "--world" if world is not None else "[tool.distrecipe] world",
                          consumer=consumer, config=config, engines=engines)
    try:
        return _lint(paths, workspace, config, kind, ignore_unknown)
    finally:
        workspace.close()


def _lint(paths: Sequence[str | Path], workspace: Workspace, config: LintConfig, kind: Kind | None,
          ignore_unknown: bool) -> Report:
    findings: list[Finding] = []
    unusable: list[DistrecipeError] = []
    count = 0
    files = list(_files(paths, config.exclude))
    for path, root in files:  # launch scripts first: they say how the configs are used
        workspace.register(path, root or Path.cwd())
    for path, root in files:
        explicit = root is None
        try:
            source = workspace.source(path, kind)
            if source is None:
                if explicit and not ignore_unknown:
                    raise NotAConfig("cannot tell which kind of config this is "
                                     "(recipe, deepspeed, accelerate, verl, hf): pass --kind", _start(path))
                continue
        except DistrecipeError as exc:
            if not explicit and path.suffix.lower() in OVERRIDE_SUFFIXES:
                continue  # a walked script or text file that is not readable is not ours
            unusable.append(exc if exc.where else DistrecipeError(exc.message, _start(path)))
            continue
        count += 1
        findings.extend(check(_with_plan(source), config))
    findings.sort(key=_order)
    return Report(findings, unusable, count)


def check(src: Source, config: LintConfig) -> list[Finding]:
    """Every enabled rule's findings for one source, suppressions applied; for a recipe,
    also the key rules' findings on each of its `native` sections (`lint/native.py`)."""
    out = _check(src, config)
    if src.kind == "recipe":
        for section in native.sections(src):
            out.extend(_check(section, config))
    return out


def _check(src: Source, config: LintConfig) -> list[Finding]:
    quiet = suppressions(src.doc)
    out = []
    for code, rule in RULES.items():
        if src.kind not in rule.kinds or code in config.disable or (src.within and not rule.section):
            continue
        for problem in rule.check(src):
            where = problem.where or src.doc.where(problem.path, key=problem.key)
            if quiet.covers(code, where.line):
                continue
            out.append(Finding(code, problem.message, config.severity.get(code, rule.severity), where))
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
        plan = review_plan(src.doc, src.path.parent, world=src.workspace.world)
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
