"""Which files of a repository name which: the reference index of one lint run.

A ds_config is used through an Accelerate YAML or a TrainingArguments file beside it,
or through a launch script (`--deepspeed`, `--deepspeed_config`, `--config_file`),
which decides who fills its `"auto"` values and at which world it runs. References are
resolved as the tools resolve them: beside the referring file, else from the directory
jobs are launched from (the linted directory, or the repository's root: the nearest
directory above holding `.git`, else the project's pyproject.toml), never outside it.
"""

from __future__ import annotations

import fnmatch
import os
from dataclasses import dataclass
from pathlib import Path

from distrecipe.engines import Kind
from distrecipe.engines.argv import Launch, trainer_launch
from distrecipe.engines.native import (
    DATA_SUFFIXES,
    DS_REFERRERS,
    detect,
    ds_reference,
    referenced_path,
    repository_root,
)
from distrecipe.engines.shell import SCRIPT_SUFFIXES
from distrecipe.lint.config import Consumer, LintConfig
from distrecipe.lint.files import Files
from distrecipe.source import Document, SourceError

TRAINER_FILES: tuple[Kind, ...] = ("hf", "axolotl", "llamafactory")
"""The kinds of a config a program argument may name that make the program an HF Trainer."""
SIBLING_HINTS = ("distributed_type", "per_device_train_batch_size", '"deepspeed"', "deepspeed:")
"""Text that must occur in a file for it to be a sibling worth parsing."""
CONSUMER_KINDS: tuple[Kind, ...] = DS_REFERRERS
"""The kinds that name a ds_config and run it (all but Accelerate through the HF Trainer)."""


@dataclass(frozen=True, slots=True)
class Sibling:
    path: Path
    kind: Kind
    doc: Document

    def references(self) -> Path | None:
        """The ds_config this config points at (see `referenced_path`)."""
        ref = ds_reference(self.kind, self.doc.data)
        return referenced_path(self.path, ref) if ref else None


@dataclass(frozen=True, slots=True)
class Use:
    """Who reads a ds_config, and how lint knows (for messages)."""

    consumer: Consumer
    by: str
    launch: Launch | None = None
    """The launch command that names the file, when a script does."""
    script: Path | None = None
    decided: bool = True
    """False where lint inferred Accelerate from an Accelerate launch or config alone: that
    says who launches the job, not which program runs in it, and the HF Trainer (which
    fills more `"auto"` values than Accelerate alone) is as likely as a plain loop."""


PRECEDENCE: tuple[Consumer, ...] = ("raw", "hf", "accelerate")
"""When several files use one ds_config: raw DeepSpeed is the strictest reader, and the
Trainer fills more than Accelerate alone."""

FLAG: dict[Consumer, str] = {
    "raw": "deepspeed_config", "hf": "deepspeed", "accelerate": "deepspeed_config_file"}
"""The launch-command argument that names a ds_config for each consumer."""


def consumer_of(kind: Kind) -> Consumer:
    """Who fills a ds_config a config of `kind` names: Accelerate alone, or the HF Trainer
    (which Axolotl and LLaMA-Factory build their training on)."""
    return "accelerate" if kind == "accelerate" else "hf"


class References:
    """Resolves references and remembers who names which file."""

    def __init__(self, files: Files, config: LintConfig, consumer: Consumer | None = None) -> None:
        self.files = files
        self.config = config
        self.consumer = consumer
        self._uses: dict[str, list[Use]] = {}
        self._accelerate_launches: dict[str, list[tuple[str, Launch, Path]]] = {}
        self._siblings: dict[str, list[Sibling]] = {}
        self._registered: set[str] = set()
        self._searched: set[str] = set()
        """The Accelerate configs whose launch scripts were looked for (`_find_launches`)."""
        self._real: dict[str, str] = {}
        self._passed: dict[str, list[tuple[str, bool]]] = {}
        """Each config a launch passes its program as an argument → (`script:line`, whether
        it is the program's sole argument)."""
        self._names: dict[str, set[str]] = {}
        """Each registered script → the real paths of the configs it names."""
        self._config_flags: dict[str, list[tuple[str, Launch, Path]]] = {}
        """Each config a launch hands its program as `--config FILE` (TrlParser's scripts,
        open-r1's) → (`script:line`, the launch, the script)."""
        self.linted: list[Path] = []
        """The files of this lint run, given or walked: where a reference no launch directory
        resolves may still be (`_opened_from_elsewhere`)."""

    def real(self, path: str | Path) -> str:
        """`os.path.realpath(path)`, once per path in this run: one ds_config is asked about
        by every rule that relates files, and each answer costs a stat per path component."""
        key = os.fspath(path)
        found = self._real.get(key)
        if found is None:
            found = self._real[key] = os.path.realpath(key)
        return found

    def launch_directories(self, referrer: Path, root: Path | None) -> list[Path]:
        """Where jobs using `referrer` may be launched from: the linted directory, the
        repository's root, the project's (where pyproject.toml is)."""
        found: list[Path] = []
        for base in (root, repository_root(Path(os.path.abspath(referrer.parent))), self.config.root):
            if base is not None and base not in found:
                found.append(base)
        return found

    def resolve(self, referrer: Path, ref: str, root: Path | None = None, *,
                beside: bool = True) -> Path | None:
        """The file `ref` names: beside `referrer`, else from a launch directory, never
        outside the linted directory or the repository; else as `referenced_path` finds it.
        `beside=False`: only from where the job runs (Axolotl and LLaMA-Factory open the
        path from their working directory), then the working directory itself. The path is
        written as `referrer` is: absolute for an absolute one, else relative to the working
        directory when the file is below it, so a file reached from another is named in
        findings as it is when given or walked."""
        found = self._resolve(referrer, ref, root, beside=beside)
        if found is None:
            return None
        return Path(os.path.abspath(found)) if referrer.is_absolute() else _shown(found)

    def _resolve(self, referrer: Path, ref: str, root: Path | None, *, beside: bool) -> Path | None:
        launched = self.launch_directories(referrer, root)
        fences = [self.real(base) for base in launched]
        if not beside:
            for base in launched:
                candidate = base / ref
                if _is_file(candidate) and any(self.real(candidate).startswith(fence + os.sep)
                                               for fence in fences):
                    return candidate
            found = Path(ref)
            return found if root is None and _is_file(found) else self._opened_from_elsewhere(referrer, ref)
        for base in (referrer.parent, *launched):
            candidate = base / ref
            if not _is_file(candidate):
                continue
            if base == referrer.parent and root is None:
                return candidate
            if any(self.real(candidate).startswith(fence + os.sep) for fence in fences):
                return candidate
        found = referenced_path(referrer, ref)
        return found if root is None and _is_file(found) else None

    def _opened_from_elsewhere(self, referrer: Path, ref: str) -> Path | None:
        """A path a tool opens from the directory it runs in, where no launch directory holds
        it (no checkout or project says where jobs run, or the file lies elsewhere): a
        linted file that `ref` names, else `ref` under the nearest directory at or above
        `referrer`'s (up to its checkout's root, when it has one) where that file exists,
        the directory the tool must run in for the path to open."""
        parts = Path(ref).parts
        if not parts or Path(ref).is_absolute() or ".." in parts:
            return None
        for path in self.linted:
            if Path(os.path.abspath(path)).parts[-len(parts):] == parts and _is_file(path):
                return path
        directory = Path(os.path.abspath(referrer.parent))
        top = repository_root(directory)
        for base in (directory, *directory.parents):
            if _is_file(base / ref):
                return base / ref
            if base == top:
                break
        return None

    def register(self, path: Path, root: Path | None) -> None:
        """Note which ds_configs and Accelerate configs a launch script or a job file names, and how; and
        the ds_config a Trainer, Accelerate, Axolotl or LLaMA-Factory config names."""
        key = os.path.abspath(path)
        if key in self._registered:
            return
        self._registered.add(key)
        named = self._names.setdefault(key, set())
        if path.suffix.lower() in DATA_SUFFIXES and self.files.job(path) is None:
            self._register_config(path, root, named)
            return
        for launch in self.files.launches(path):  # a script's, or a platform's job file's
            line = f"{path.name}:{launch.start.where.line}"
            for argument in launch.configs():  # `train.py args.json`: the program reads the file
                passed = self.resolve(path, argument.value, root) if argument.value else None
                if passed is not None:
                    alone = len(launch.program) == 2 and launch.program[1] is argument
                    self._passed.setdefault(self.real(passed), []).append((line, alone))
                    named.add(self.real(passed))
            if (flag := launch.flags.get("config", (None, None))[1]) is not None and flag.value:
                passed = self.resolve(path, flag.value, root)
                if passed is not None:
                    self._config_flags.setdefault(self.real(passed), []).append((line, launch, path))
                    named.add(self.real(passed))
            if launch.launcher == "accelerate" and (file := launch.option("config_file")) and file.value:
                config = self.resolve(path, file.value, root)
                if config is not None:
                    self._accelerate_launches.setdefault(self.real(config), []).append(
                        (line, launch, path))
                    named.add(self.real(config))
            for consumer, name in FLAG.items():  # the launcher's option, or the program's flag
                word = (launch.option(name) if consumer == "accelerate"
                        else launch.flags.get(name, (None, None))[1])
                ref = word.value if word is not None else None
                target = self.resolve(path, ref, root) if ref else None
                if target is not None:
                    use = Use(consumer, f"--{FLAG[consumer]} in {line}", launch, path,
                              decided=consumer != "accelerate")
                    self._uses.setdefault(self.real(target), []).append(use)
                    named.add(self.real(target))

    def _register_config(self, path: Path, root: Path | None, named: set[str]) -> None:
        try:
            if "deepspeed" not in self.files.text(path):
                return
            doc = self.files.document(path)
        except (SourceError, OSError):
            return
        kind = detect(doc)
        ref = ds_reference(kind, doc.data) if kind in CONSUMER_KINDS else None
        target = self.resolve(path, ref, root, beside=kind in ("accelerate", "hf")) if kind and ref else None
        if kind is not None and target is not None:
            real = self.real(target)
            if os.path.dirname(real) != os.path.dirname(self.real(path)):  # siblings are found apart
                self._uses.setdefault(real, []).append(Use(consumer_of(kind), path.name, None, path,
                                                           decided=kind != "accelerate"))
            named.add(real)

    def related(self, named: list[Path]) -> list[Path]:
        """The files that name one of `named` (a launch script, an Accelerate or Trainer
        config naming a ds_config) and those `named` name, in the repository around each:
        what pre-commit's changed files are checked together with (`Rule.pair`)."""
        wanted = {self.real(path) for path in named}
        found: dict[str, Path] = {}
        by_root: dict[tuple[Path, bool], list[Path]] = {}
        for path in named:
            by_root.setdefault(self.scan_root(path), []).append(path)
        for (root, recursive), targets in sorted(by_root.items()):
            aimed = {self.real(path) for path in targets}
            names = {path.name for path in targets}
            for candidate in map(_shown, mentions(root, names, recursive=recursive)):
                if self.real(candidate) not in wanted and self.names(candidate, root) & aimed:
                    found.setdefault(self.real(candidate), candidate)
        for path in named:
            for target in sorted(self.names(path, self.scan_root(path)[0])):
                if target not in wanted:
                    found.setdefault(target, _shown(Path(target)))
        return [found[key] for key in sorted(found)]

    def scan_root(self, path: Path) -> tuple[Path, bool]:
        """Where to look for the files that name `path`, and whether below it too: its
        repository (the checkout's root), else the project (pyproject.toml's directory)
        holding it, else only its own directory (never a whole home directory)."""
        directory = Path(os.path.abspath(path.parent))
        repository = repository_root(directory)
        if repository is not None:
            return repository, True
        if self.config.root is not None and directory.is_relative_to(Path(os.path.abspath(self.config.root))):
            return Path(os.path.abspath(self.config.root)), True
        return directory, False

    def names(self, path: Path, root: Path) -> set[str]:
        """The real paths of the configs `path` names: a launch script's, or the ds_config
        an Accelerate, Trainer, Axolotl or LLaMA-Factory config points at."""
        if path.suffix.lower() not in SCANNED_SUFFIXES:
            return set()
        self.register(path, root)
        return self._names.get(os.path.abspath(path), set())

    def launch_uses(self, path: Path) -> list[Use]:
        """The launch commands that name the ds_config at `path`."""
        return self._uses.get(self.real(path), [])

    def accelerate_launches(self, path: Path) -> list[tuple[str, Launch]]:
        """The `accelerate launch --config_file` commands that name the Accelerate config at
        `path`, each with where it is (`script:line`)."""
        runs = self._accelerate_launches.get(self.real(path), [])
        return [(line, launch) for line, launch, _ in runs]

    def config_launches(self, path: Path) -> list[tuple[str, Launch, Path]]:
        """The launch commands that hand their program the file at `path` as `--config`,
        each with where it is (`script:line`) and its script."""
        return self._config_flags.get(self.real(path), [])

    def passed_alone(self, path: Path) -> str | None:
        """Where a launch passes the file at `path` as its program's sole argument
        (`script:line`): what a Trainer script reads with `HfArgumentParser.parse_json_file`
        or `parse_yaml_file` (`if len(sys.argv) == 2 and sys.argv[1].endswith(".json")`)."""
        return next((line for line, alone in self._passed.get(self.real(path), []) if alone), None)

    def program(self, use: Use) -> Use:
        """`use` with the program settled, where an Accelerate launch or config was all lint
        knew (`Use.decided`): the HF Trainer when a launch that runs it shows a Trainer
        program (its own flags, `--per_device_train_batch_size`, or a TrainingArguments,
        Axolotl or LLaMA-Factory file as its argument); else `use` as it is."""
        if use.decided or use.consumer != "accelerate":
            return use
        if use.script is None:
            return use
        if use.launch is None:
            self._find_launches(use.script)
        runs = self._accelerate_launches.get(self.real(use.script), [])
        if use.launch is not None:
            runs = [(f"{use.script.name}:{use.launch.start.where.line}", use.launch, use.script)]
        for line, launch, script in runs:
            if self._runs_trainer(launch, script):
                return Use("hf", f"{use.by}, run by an HF Trainer program in {line}", use.launch, use.script)
        return use

    def _find_launches(self, config: Path) -> None:
        """Register the launch scripts in `config`'s repository that name it, once: the
        program an Accelerate config runs is in them, when only the ds_config it names
        was linted (a pre-commit hook given one changed file)."""
        key = self.real(config)
        if key in self._searched:
            return
        self._searched.add(key)
        root, recursive = self.scan_root(config)
        for candidate in mentions(root, {config.name}, recursive=recursive):
            if candidate.suffix.lower() == ".sh":
                self.register(candidate, None)

    def _runs_trainer(self, launch: Launch, script: Path) -> bool:
        if trainer_launch(launch):
            return True
        for word in launch.configs():
            target = self.resolve(script, word.value or "", None)
            try:
                if target is not None and detect(self.files.document(target)) in TRAINER_FILES:
                    return True
            except (SourceError, OSError):
                continue
        return False

    def use(self, path: Path) -> Use | None:
        """Who reads the ds_config at `path`: declared (flag, then `[tool.distrecipe]`
        ds_config), else inferred from the files that name it; None when unknown."""
        if self.consumer is not None:
            return Use(self.consumer, "--ds-config-consumer")
        relative = path
        if self.config.root is not None and self.config.ds_config:
            try:
                relative = path.resolve().relative_to(self.config.root.resolve())
            except ValueError:
                relative = path
        for glob, consumer in self.config.ds_config:
            if fnmatch.fnmatch(relative.as_posix(), glob) or fnmatch.fnmatch(path.name, glob):
                return Use(consumer, f"[tool.distrecipe] ds_config {glob!r}")
        found = list(self.launch_uses(path))
        found += [Use(consumer_of(s.kind), s.path.name, None, s.path, decided=s.kind != "accelerate")
                  for s in self.consumers(path)]
        found = [self.program(use) for use in found]
        for consumer in PRECEDENCE:
            for use in found:
                if use.consumer == consumer:
                    return use
        return None

    def siblings(self, directory: Path) -> list[Sibling]:
        """The configs in `directory` that name a ds_config or state a world
        (`CONSUMER_KINDS`), sorted by name."""
        key = os.path.abspath(directory)
        if key not in self._siblings:
            found = []
            for path in sorted(directory.iterdir()) if directory.is_dir() else []:
                if path.suffix.lower() not in DATA_SUFFIXES or not path.is_file():
                    continue
                try:
                    if not any(hint in self.files.text(path) for hint in SIBLING_HINTS):
                        continue
                    doc = self.files.document(path)
                except (SourceError, OSError):
                    continue
                kind = detect(doc)
                if kind in CONSUMER_KINDS:
                    found.append(Sibling(path, kind, doc))
            self._siblings[key] = found
        return self._siblings[key]

    def consumers(self, path: Path) -> list[Sibling]:
        """Siblings that use the ds_config at `path` (so it is not read by raw DeepSpeed)."""
        target = self.real(path)
        return [s for s in self.siblings(path.parent)
                if (ref := s.references()) and self.real(ref) == target]


def _shown(path: Path) -> Path:
    """`path` relative to the working directory when it is below it (as a walk names files)."""
    relative = os.path.relpath(path)
    return Path(relative) if not relative.startswith("..") else path


def _is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except (OSError, ValueError):
        return False


SCANNED_SUFFIXES = (*DATA_SUFFIXES, *SCRIPT_SUFFIXES)
"""Files that may name another config: configs themselves and launch scripts."""
SCAN_LIMIT = 5000
"""The most files a search without git reads for references (a repository's configs)."""
SKIPPED_DIRS = frozenset({".git", ".venv", "venv", "node_modules", "__pycache__", ".mypy_cache", ".tox"})


def mentions(root: Path, names: set[str], *, recursive: bool = True) -> list[Path]:
    """Files under `root` (configs and scripts) whose text holds any of `names`: what git
    grep finds in a checkout (tracked and untracked, not ignored), else a walk that reads
    at most `SCAN_LIMIT` files (`recursive=False`: `root`'s own files only)."""
    if not names:
        return []
    if recursive and (root / ".git").exists():
        found = _git_grep(root, names)
        if found is not None:
            return found
    out: list[Path] = []
    for path in _walk(root, recursive):
        try:
            if path.stat().st_size > 1 << 20:
                continue
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        if any(name in text for name in names):
            out.append(path)
    return out


def _walk(root: Path, recursive: bool) -> list[Path]:
    """Config and script files below `root`, in sorted order, at most `SCAN_LIMIT`; the
    directories lint never walks (`SKIPPED_DIRS`) are left out."""
    found: list[Path] = []
    pending = [root]
    while pending and len(found) < SCAN_LIMIT:
        directory = pending.pop(0)
        try:
            entries = sorted(directory.iterdir())
        except OSError:
            continue
        for entry in entries:
            if entry.name in SKIPPED_DIRS or entry.is_symlink():
                continue
            if entry.is_dir():
                if recursive:
                    pending.append(entry)
            elif entry.suffix.lower() in SCANNED_SUFFIXES and _is_file(entry):
                found.append(entry)
                if len(found) >= SCAN_LIMIT:
                    break
    return found


def _git_grep(root: Path, names: set[str]) -> list[Path] | None:
    import subprocess  # only a run that names files searches for who names them

    patterns = [arg for name in sorted(names) for arg in ("-e", name)]
    globs = [f"*{suffix}" for suffix in SCANNED_SUFFIXES]
    try:
        done = subprocess.run(["git", "-C", str(root), "grep", "--untracked", "-I", "-l", "-F", "-z",
                               *patterns, "--", *globs], capture_output=True, timeout=60, check=False)
    except (OSError, ValueError, subprocess.SubprocessError):  # ValueError: a name no argv can hold
        return None
    if done.returncode not in (0, 1):  # 1: nothing found
        return None
    return sorted(root / os.fsdecode(name) for name in done.stdout.split(b"\0") if name)
