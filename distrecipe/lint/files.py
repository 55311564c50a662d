"""The files of one lint run, each read once: texts, parsed documents, launch commands.

Relating files reads many of them only to see whether they matter (a sibling that may
be an Accelerate config, a script that may name a ds_config), so texts are kept apart
from documents: a text is parsed only if the file turns out to be linted or related.
"""

from __future__ import annotations

import os
from pathlib import Path

from distrecipe.engines.argv import LAUNCHER_WORDS, Launch, launches
from distrecipe.engines.native import read
from distrecipe.source import Document, SourceError, read_text


class Files:
    """A cache of texts, documents and launch commands, keyed by absolute path."""

    def __init__(self) -> None:
        self._documents: dict[str, Document] = {}
        self._texts: dict[str, str] = {}
        self._launches: dict[str, list[Launch]] = {}

    def text(self, path: Path) -> str:
        """The file's text; `SourceError` (or `OSError`) when it cannot be read as text."""
        key = os.path.abspath(path)
        if key not in self._texts:
            self._texts[key] = read_text(path)
        return self._texts[key]

    def document(self, path: Path) -> Document:
        """The file's document, parsed once per run; `SourceError` when unusable."""
        key = os.path.abspath(path)
        if key not in self._documents:
            self._documents[key] = read(path, self.text(path))
        return self._documents[key]

    def launches(self, path: Path) -> list[Launch]:
        """The launch commands of a shell script (none for any other file, or an unreadable one)."""
        key = os.path.abspath(path)
        if key not in self._launches:
            found: list[Launch] = []
            if path.suffix.lower() == ".sh":
                try:
                    text = self.text(path)
                except (SourceError, OSError):
                    text = ""
                if any(word in text for word in LAUNCHER_WORDS):
                    found = launches(text, str(path))
            self._launches[key] = found
        return self._launches[key]
