"""The files of one lint run, each read once: texts, parsed documents, launch commands.

Relating files reads many of them only to see whether they matter (a sibling that may
be an Accelerate config, a script that may name a ds_config), so texts are kept apart
from documents: a text is parsed only if the file turns out to be linted or related.
"""

from __future__ import annotations

import os
from pathlib import Path

from distrecipe.engines.argv import LAUNCHER_WORDS, Launch, launch_of, launches
from distrecipe.engines.native import read
from distrecipe.engines.platforms import PlatformKind, job_commands, job_world, platform_kind
from distrecipe.engines.platforms import World as JobWorld
from distrecipe.engines.shell import is_script
from distrecipe.source import Document, SeveralDocuments, SourceError, parse_stream, read_text

_JOB_HINTS = ("apiVersion", "num_nodes", "run:")
"""Text a YAML file must hold to be worth parsing as a platform's job file."""


class Files:
    """A cache of texts, documents and launch commands, keyed by absolute path."""

    def __init__(self) -> None:
        self._documents: dict[str, Document] = {}
        self._texts: dict[str, str] = {}
        self._launches: dict[str, list[Launch]] = {}
        self._streams: dict[str, list[Document]] = {}
        self._jobs: dict[str, list[tuple[PlatformKind, JobWorld, Document]]] = {}
        self._job_launches: dict[str, list[tuple[Launch, JobWorld]]] = {}

    def text(self, path: Path) -> str:
        """The file's text; `SourceError` (or `OSError`) when it cannot be read as text."""
        key = os.path.abspath(path)
        if key not in self._texts:
            self._texts[key] = read_text(path)
        return self._texts[key]

    def document(self, path: Path) -> Document:
        """The file's document, parsed once per run (a YAML key written twice recorded, its last
        value kept, for DR303 and DR304 to judge); `SourceError` when unusable."""
        key = os.path.abspath(path)
        if key not in self._documents:
            self._documents[key] = read(path, self.text(path), keep_last=True)
        return self._documents[key]

    def documents(self, path: Path) -> list[Document]:
        """The file's documents: its one, or each of a YAML stream's (`---` between them, as a
        Kubernetes manifest file keeps several objects), parsed once per run; `SourceError`
        when unusable."""
        key = os.path.abspath(path)
        if key not in self._streams:
            try:
                self._streams[key] = [self.document(path)]
            except SeveralDocuments:
                self._streams[key] = parse_stream(self.text(path), str(path), keep_last=True)
        return self._streams[key]

    def launches(self, path: Path) -> list[Launch]:
        """The launch commands of a shell script or a platform's job file (none for any other
        file, or an unreadable one)."""
        key = os.path.abspath(path)
        if key not in self._launches:
            found: list[Launch] = []
            if is_script(path):
                try:
                    text = self.text(path)
                except (SourceError, OSError):
                    text = ""
                if any(word in text for word in LAUNCHER_WORDS):
                    found = launches(text, str(path))
            else:
                pairs = [(launch, world) for kind, world, doc in self.jobs(path)
                         for words in job_commands(kind, doc) if (launch := launch_of(words)) is not None]
                self._job_launches[key] = pairs
                found = [launch for launch, _ in pairs]
            self._launches[key] = found
        return self._launches[key]

    def job(self, path: Path) -> tuple[PlatformKind, JobWorld] | None:
        """A platform's job file (TrainJob, RayJob, PyTorchJob, SkyPilot task): its (first) job's
        kind and world."""
        jobs = self.jobs(path)
        return (jobs[0][0], jobs[0][1]) if jobs else None

    def jobs(self, path: Path) -> list[tuple[PlatformKind, JobWorld, Document]]:
        """Each job of a platform's job file (one, or several in a YAML stream): kind, world, document."""
        key = os.path.abspath(path)
        if key not in self._jobs:
            self._jobs[key] = []
            if path.suffix.lower() in (".yaml", ".yml"):
                try:
                    if any(hint in self.text(path) for hint in _JOB_HINTS):
                        for doc in self.documents(path):
                            data = doc.data
                            kind = platform_kind(data) if isinstance(data, dict) else None
                            if kind is not None and isinstance(data, dict):
                                self._jobs[key].append((kind, job_world(kind, data), doc))
                except (SourceError, OSError):
                    pass
        return self._jobs[key]

    def launch_job(self, path: Path, launch: Launch) -> JobWorld | None:
        """The world of the job in the file at `path` whose command `launch` is (`launches`)."""
        self.launches(path)
        return next((world for found, world in self._job_launches.get(os.path.abspath(path), [])
                     if found is launch), None)
