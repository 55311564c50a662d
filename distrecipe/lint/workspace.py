"""The files of one lint run and what they say about each other.

Configs are rarely alone: a ds_config is used through an Accelerate YAML, a
TrainingArguments file or a launch script, which decides whether `"auto"` is filled and
at which world the job runs. The workspace puts together the file cache (`files`), the
reference index (`references`) and the world each file runs at (`world`), and hands
each rule a `Source` that carries them: a Source holds its workspace and the workspace
makes Sources, so the two live in one module.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from distrecipe.engines import Kind, tables
from distrecipe.engines.argv import Launch
from distrecipe.engines.hf import FLAG_TYPES
from distrecipe.engines.native import STREAM_KINDS, detect, is_file
from distrecipe.engines.shell import is_script
from distrecipe.errors import DistrecipeError
from distrecipe.keys import get, integer, section
from distrecipe.lint.config import Consumer, LintConfig
from distrecipe.lint.files import Files
from distrecipe.lint.references import References, Sibling, Use
from distrecipe.lint.world import World, WorldFrom, own_world
from distrecipe.source import Document, KeyPath, SeveralDocuments, SourceError

if TYPE_CHECKING:
    from distrecipe.job import Plan
    from distrecipe.judges import Verdict

__all__ = ["Sibling", "Source", "Use", "Workspace"]


@dataclass(frozen=True)
class Source:
    """A config to lint: its document, its kind, and the world size it runs at."""

    doc: Document
    kind: Kind
    workspace: Workspace
    worlds: tuple[World, ...] = ()
    """Every statement of the world this file runs at, in precedence order (`lint.world`)."""
    plan: Plan | None = field(default=None, compare=False)
    """The resolved Plan, for recipes that resolve (plan-based rules need it)."""
    error: DistrecipeError | None = field(default=None, compare=False)
    """Why a recipe did not resolve."""
    within: KeyPath = ()
    """Where this config sits inside its file when it is a section of another (a recipe's
    `native.deepspeed`); rules read it as a whole file, positions are the file's."""

    @property
    def world(self) -> World | None:
        """The world the file is checked at: the first of `worlds`."""
        return self.worlds[0] if self.worlds else None

    @property
    def ranks(self) -> int | None:
        """The number of ranks of `world`, None when unknown."""
        return self.worlds[0].ranks if self.worlds else None

    @property
    def path(self) -> Path:
        return Path(self.doc.file)

    @property
    def data(self) -> dict[str, Any]:
        return self.doc.data if isinstance(self.doc.data, dict) else {}

    def get(self, *path: str | int, default: Any = None) -> Any:
        """The value at `path`, or `default` when a section or the key is missing."""
        return get(self.data, *path, default=default)

    def section(self, *path: str | int) -> dict[str, Any]:
        """The mapping at `path`, or an empty one when it is missing or not a mapping."""
        return section(self.data, *path)


class Workspace:
    """Reads, caches and relates the files of one lint run."""

    def __init__(self, world: World | None = None, *, consumer: Consumer | None = None,
                 config: LintConfig | None = None, engines: bool = False) -> None:
        self.world = world
        """The world the user states (`--world`, else `[tool.distrecipe] world`), if any."""
        self.config = config or LintConfig()
        tables.state(self.config.releases())  # the releases that judge this run's files
        self.files = Files()
        self.references = References(self.files, self.config, consumer)
        self.engines = engines
        """Run the engines' own judges too (`lint --engines`: DR900, DR901)."""
        self.verdicts: dict[str, Verdict] = {}
        """Each file's engine verdict, judged once for both engine rules."""
        self._verl: Any = None
        self._worlds: dict[tuple[str, Kind], tuple[World, ...]] = {}
        """Each file's worlds (`worlds`), by its real path and the kind it is read as."""
        self.roots: dict[str, Path] = {}
        """Each linted file → the directory it was found under (the working directory for a
        named file): where a tool that opens paths from its working directory runs."""

    def document(self, path: Path) -> Document:
        return self.files.document(path)

    def source(self, path: Path, kind: Kind | None = None) -> Source | None:
        """A `Source` for `path`, or None when it is not a config distrecipe knows."""
        doc = self.document(path)
        kind = kind or detect(doc) or self._launch_script(path)
        if kind is None:
            return None
        return Source(doc=doc, kind=kind, workspace=self, worlds=self.worlds(path, kind, doc))

    def sources(self, path: Path, kind: Kind | None = None) -> list[Source]:
        """A `Source` for each config in `path`: its one (`source`), or each document of a YAML
        stream that is a job file (`engines.native.STREAM_KINDS`: `kubectl apply` and `sky
        launch` read every one), positioned in the file; documents of no kind lint reads (a
        Service, a ConfigMap) are passed over. A document of another kind in a stream is
        refused, as its reader (`yaml.safe_load`, OmegaConf) refuses the stream."""
        try:
            source = self.source(path, kind)
            return [] if source is None else [source]
        except SeveralDocuments as exc:
            another = exc.where
        documents = self.files.documents(path)
        found = []
        for doc in documents:
            its = kind or detect(doc)
            if its is None:
                continue
            if its not in STREAM_KINDS:
                raise SeveralDocuments(f"a stream of {len(documents)} YAML documents (`---` between them) "
                                       f"holding a config of kind {its}, whose reader takes one document and "
                                       "refuses the stream", another)
            found.append(Source(doc=doc, kind=its, workspace=self, worlds=self.worlds(path, its, doc)))
        return found

    def _launch_script(self, path: Path) -> Kind | None:
        """`hf` for a shell script whose commands pass nothing lint reads as a config (no
        TrainingArguments flag, no verl override: `torchrun prog.py --config x.yaml`), or
        run no launcher lint knows (a command built in a string and run by `bash -c`, a
        fork's own trainer module): it is still a script, judged by the rules that read
        one (DR363 to DR365, DR368 says when none applied), never refused as no config: a
        repository's CI lints every script it holds."""
        return "hf" if is_script(path) else None

    def companion(self, referrer: Path, ref: str, *, beside: bool = True) -> Source | None:
        """The ds_config `referrer` names as `ref`, or None when it cannot be found or read;
        `beside=False` for a tool that opens it only from where it runs (`References.resolve`)."""
        root = None if beside else self.roots.get(os.path.abspath(referrer))
        path = self.references.resolve(referrer, ref, root, beside=beside)
        try:
            return self.source(path, "deepspeed") if path is not None and is_file(path) else None
        except SourceError:
            return None

    def register(self, path: Path, root: Path | None) -> None:
        """Note what `path` names, and the directory it is linted from (where its jobs run)."""
        if root is not None:
            self.roots.setdefault(os.path.abspath(path), root)
        self.references.register(path, root)

    def use(self, path: Path) -> Use | None:
        return self.references.use(path)

    def accelerate_launches(self, path: Path) -> list[tuple[str, Launch]]:
        return self.references.accelerate_launches(path)

    def worlds(self, path: Path, kind: Kind, doc: Document) -> tuple[World, ...]:
        """Every statement of the world `path` runs at, in precedence order (`lint.world`):
        its own, the user's, its launch scripts', the Accelerate configs' around it; read
        once per file and kind, so every rule that judges the file in this run judges it at
        one world, whichever file it was reached from."""
        key = (self.references.real(path), kind)
        if key not in self._worlds:
            self._worlds[key] = self._read_worlds(path, kind, doc)
        return self._worlds[key]

    def _read_worlds(self, path: Path, kind: Kind, doc: Document) -> tuple[World, ...]:
        found: list[World] = []
        own = own_world(kind, doc)
        if own is not None:
            found.append(own)
        for launch in self.files.launches(path) if kind == "hf" else ():
            if any(name in FLAG_TYPES for name in launch.flags):  # the launch `script_arguments` read
                world = self.launch_world(launch, path, None, "file")
                if world is not None:
                    found.append(world)
                break
        if self.world is not None:
            found.append(self.world)
        if kind == "deepspeed":
            for use in self.references.launch_uses(path):
                if use.launch is not None and use.script is not None:
                    world = self.launch_world(use.launch, use.script, None, "launch")
                    if world is not None:
                        line = f"{use.script.name}:{use.launch.start.where.line}"
                        found.append(World(world.ranks, f"{world.source} in {line}", "launch", world.where))
            found += self._naming_worlds(path)
            return tuple(found)
        if kind == "trl":  # `accelerate launch --num_processes 7 grpo.py --config FILE`
            for line, launch, script in self.references.config_launches(path):
                world = self.launch_world(launch, script, None, "launch")
                if world is not None:
                    found.append(World(world.ranks, f"{world.source} in {line}", "launch", world.where))
        if kind == "accelerate":
            for line, launch in self.references.accelerate_launches(path):
                processes = launch.world()[0] if launch.option("num_processes") is not None else None
                if processes is not None:
                    found.append(World(processes, f"--num_processes {processes} in {line}", "launch",
                                       launch.start.where))
        for sibling in self.references.siblings(path.parent):
            if sibling.kind == "accelerate" and sibling.path != path and \
                    (n := integer(sibling.doc.data.get("num_processes"))):
                found.append(World(n, f"num_processes in {sibling.path.name}", "sibling",
                                   sibling.doc.where(("num_processes",))))
        return tuple(found)

    def _naming_worlds(self, path: Path) -> list[World]:
        """The worlds of the Accelerate configs that name the ds_config at `path`
        (`deepspeed_config_file`), beside it or elsewhere in the run: each config's
        `num_processes`, else the `--num_processes` of the launch that runs it. An
        Accelerate config that names another ds_config, or none (DDP, FSDP), runs another
        job, and says nothing of this file's world."""
        configs = [(s.path, s.doc) for s in self.references.consumers(path) if s.kind == "accelerate"]
        for use in self.references.launch_uses(path):
            if use.launch is None and use.consumer == "accelerate" and use.script is not None:
                try:
                    configs.append((use.script, self.document(use.script)))
                except SourceError:
                    continue
        found: list[World] = []
        for config, doc in configs:
            data = doc.data if isinstance(doc.data, dict) else {}
            if (n := integer(data.get("num_processes"))) and n > 0:
                found.append(World(n, f"num_processes in {config.name}", "named",
                                   doc.where(("num_processes",))))
                continue
            for line, launch in self.references.accelerate_launches(config):
                processes = launch.world()[0] if launch.option("num_processes") is not None else None
                if processes is not None:
                    found.append(World(processes, f"--num_processes {processes} in {line} (running "
                                                  f"{config.name})", "named", launch.start.where))
                    break
        return found

    def launch_world(self, launch: Launch, path: Path, root: Path | None, by: WorldFrom) -> World | None:
        """The launch's world, from its options or (accelerate) the config file it names."""
        ranks, how = launch.world()
        if ranks is not None:
            return World(ranks, how, by, launch.start.where)
        if (job := self.files.launch_job(path, launch)) is not None and job.ranks is not None:
            return World(job.ranks, job.said, by, launch.start.where)
        if launch.launcher == "accelerate" and (file := launch.option("config_file")) and file.value:
            target = self.references.resolve(path, file.value, root)
            try:
                data = self.document(target).data if target is not None else None
            except SourceError:
                data = None
            if isinstance(data, dict) and (n := integer(data.get("num_processes"))) and target is not None:
                return World(n, f"num_processes in {target.name}", by, launch.start.where)
        return None

    def verl_verdict(self, path: Path, text: str) -> Verdict:
        """verl's verdict on override lines; one verl judge (≈ 8 s to start) per run."""
        from distrecipe.judges import verl

        if self._verl is None:
            self._verl = verl.VerlJudge()
        verdict: Verdict = verl.judge_script(self._verl, text)
        return verdict

    def close(self) -> None:
        """Release what the judges hold (verl's Hydra context)."""
        if self._verl is not None:
            self._verl.close()
            self._verl = None

