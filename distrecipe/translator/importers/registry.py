"""Which importer reads which kind of native config, and reading one from a file."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from distrecipe.engines import accelerate as accelerate_engine
from distrecipe.engines import hf as hf_engine
from distrecipe.engines.native import detect, read_file
from distrecipe.errors import DistrecipeError
from distrecipe.recipe import batch_from_script
from distrecipe.source import Document, read_document
from distrecipe.translator.importers import (
    Context,
    Imported,
    World,
    accelerate,
    axolotl,
    deepspeed,
    hf,
    llamafactory,
    openrlhf,
    trl,
    verl,
)
from distrecipe.translator.importers.residue import residue
from distrecipe.translator.load import apply_overrides, recipe_from_document
from distrecipe.translator.resolve import resolve

Importer = Callable[[dict[str, Any], Context], Imported]

IMPORTERS: dict[str, Importer] = {
    "deepspeed": deepspeed.to_recipe,
    "accelerate": accelerate.to_recipe,
    "verl": verl.to_recipe,
    "hf": hf.to_recipe,
    "axolotl": axolotl.to_recipe,
    "llamafactory": llamafactory.to_recipe,
    "trl": trl.to_recipe,
    "openrlhf": openrlhf.to_recipe,
}
"""Native kind (as `engines.native.detect` tells it) → importer."""
BATCH_FILL = {"deepspeed": hf_engine.BATCH_FILL, "hf": hf_engine.BATCH_FILL,
              "accelerate": accelerate_engine.BATCH_FILL, "axolotl": hf_engine.BATCH_FILL,
              "llamafactory": hf_engine.BATCH_FILL, "trl": hf_engine.BATCH_FILL,
              "openrlhf": "OpenRLHF's parser defaults"}
"""Native kind → who decides its batch when the file leaves it out (a TrainingArguments file
that leaves it out gets it from the Trainer's command line; verl states it)."""


LINTED_ONLY: dict[str, str] = {}
"""Kinds lint judges that no importer maps to a recipe yet."""
NO_NATIVE = frozenset({"openrlhf"})
"""Kinds the recipe has no `native` section for: their importers name what they do not map."""


class NotNative(DistrecipeError):
    """The file is a recipe already, or no config distrecipe can import."""


def read_native(path: str | Path) -> tuple[str, Document]:
    """The file's kind and document; a recipe is returned as kind `recipe`."""
    doc = read_file(Path(path))
    kind = detect(doc)
    if kind is None:
        raise NotNative("not a config distrecipe reads (none of deepspeed, accelerate, verl, hf, axolotl, "
                        "llamafactory)", doc.where(()))
    return kind, doc


def import_document(kind: str, doc: Document, world: World | None,
                    overrides: Sequence[str] = ()) -> Imported:
    """Run the importer for `kind` on a document read by `read_native`, then carry what it
    did not map into the recipe's `native` section (`residue`).

    `overrides` (`--set`) complete what the input cannot say (an Accelerate YAML's batch)
    before the recipe is resolved for the comparison; they are not written into it. A
    recipe that does not resolve is returned as mapped: the caller reports why.
    """
    if kind in LINTED_ONLY:
        raise NotNative(f"{LINTED_ONLY[kind]} is linted (its keys, types and batch rules), not "
                        f"imported: import reads {', '.join(IMPORTERS)} files", doc.where(()))
    if kind not in IMPORTERS:  # a platform's job file: its world and command, no training config
        raise NotNative(f"a {kind} file is a platform's job, not a training config: import reads "
                        f"{', '.join(IMPORTERS)} files (lint checks a job against the configs it names)",
                        doc.where(()))
    imported = IMPORTERS[kind](doc.data, Context(doc=doc, world=world, read=read_document))
    # An Axolotl or LLaMA-Factory YAML is read as the Trainer's arguments it holds (`read`).
    engine = "hf" if kind in ("axolotl", "llamafactory", "trl") else kind
    sources = {} if kind in NO_NATIVE else {engine: doc.data if imported.read is None else imported.read,
                                            **imported.companions}
    checked = apply_overrides(Document({**imported.recipe, "recipe": 1}, doc.file), overrides)
    try:
        recipe = recipe_from_document(checked, Path(doc.file).parent)
        if batch_from_script(checked.data.get("batch")):
            imported.notes.append(
                "the input states no batch size, so the recipe's batch is the training script's: "
                f"{BATCH_FILL[kind]}; "
                "compile writes it so, and what needs numbers (plan, raw DeepSpeed, verl) asks for them: "
                "--set batch.micro=N (and --set batch.accumulation=N unless it is 1)")
        plan = resolve(recipe)
    except DistrecipeError:
        return imported
    native: dict[str, Any] = {}
    for engine, data in sources.items():
        if isinstance(data, dict):
            carried, notes = residue(engine, data, plan)
            imported.notes += notes
            if carried:
                native[engine] = carried
    if native:
        imported.recipe["native"] = native
    return imported
