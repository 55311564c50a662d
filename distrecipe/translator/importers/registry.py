"""Which importer reads which kind of native config, and reading one from a file."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from distrecipe.engines.native import detect, read_file
from distrecipe.errors import DistrecipeError
from distrecipe.source import Document, read_document
from distrecipe.translator.importers import Context, Imported, World, accelerate, deepspeed, hf, verl

Importer = Callable[[dict[str, Any], Context], Imported]

IMPORTERS: dict[str, Importer] = {
    "deepspeed": deepspeed.to_recipe,
    "accelerate": accelerate.to_recipe,
    "verl": verl.to_recipe,
    "hf": hf.to_recipe,
}
"""Native kind (as `engines.native.detect` tells it) → importer."""


class NotNative(DistrecipeError):
    """The file is a recipe already, or no config distrecipe can import."""


def read_native(path: str | Path) -> tuple[str, Document]:
    """The file's kind and document; a recipe is returned as kind `recipe`."""
    doc = read_file(Path(path))
    kind = detect(doc)
    if kind is None:
        raise NotNative("cannot tell which kind of config this is (deepspeed, accelerate, verl, hf)",
                        doc.where(()))
    return kind, doc


def import_document(kind: str, doc: Document, world: World | None) -> Imported:
    """Run the importer for `kind` on a document read by `read_native`."""
    return IMPORTERS[kind](doc.data, Context(doc=doc, world=world, read=read_document))
