"""`distrecipe import`: a native config (+ world size) → recipe YAML on stdout (or `-o FILE`).

The recipe is checked before it is printed: it must validate and resolve, so what
comes out compiles. What the native config said that a recipe cannot carry goes to
stderr as notes. `-o` writes the file whole or not at all (`output.write_files`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import click
import yaml

from distrecipe.api import plan_of_document
from distrecipe.commands.options import overrides_option
from distrecipe.errors import DistrecipeError, Position
from distrecipe.output import one_line, write_files
from distrecipe.recipe import batch_from_script, name_from_file
from distrecipe.source import Document
from distrecipe.translator.importers import World
from distrecipe.translator.importers.registry import NotNative, import_document, read_native
from distrecipe.translator.load import apply_overrides


def import_config(*, path: str, world: int | None = None, nodes: int = 1,
                  overrides: Sequence[str] = (), output: str | None = None) -> int:
    """Print (or write to `output`) the recipe equivalent to the native config at `path`."""
    text = recipe_text(path, world=world, nodes=nodes, overrides=overrides)
    if output is None:
        click.echo(text, nl=False)
        return 0
    target = Path(output)
    write_files(target.parent, {target.name: text})
    click.echo(f"wrote {one_line(output)}", err=True)
    return 0


def recipe_text(path: str, *, world: int | None, nodes: int, overrides: Sequence[str]) -> str:
    """The recipe YAML for `path`, resolved once to prove it is valid."""
    kind, doc = read_native(path)
    if kind == "recipe":
        raise NotNative("this is a recipe already", doc.where(()))
    imported = import_document(kind, doc, World.of(world, nodes) if world is not None else None, overrides)
    shown = one_line(path)  # a note is one line, and the header one comment, whatever the file's name
    for note in imported.notes:
        click.echo(f"{shown}: note: {note}", err=True)
    name, name_note = name_from_file(path)
    recipe = {"recipe": 1, "name": name, **{k: v for k, v in imported.recipe.items() if k != "recipe"}}
    checked = apply_overrides(Document(recipe, f"{path} (imported)"), overrides)
    if name_note and checked.data.get("name") == name:
        click.echo(f"{shown}: note: {name_note}: --set name=... to choose another", err=True)
    # A batch the training script decides stays auto (the note says who fills it).
    from_script = batch_from_script(checked.data.get("batch"))
    try:
        plan_of_document(checked, Path(path).parent)
    except DistrecipeError as exc:
        raise DistrecipeError(f"the imported recipe does not resolve: {exc.message}",
                              Position(path, 1, 1)) from None
    text = yaml.safe_dump(checked.data, sort_keys=False, default_flow_style=None, width=100)
    if from_script:
        note = ("# The training script decides the batch (see import's note); plan and raw DeepSpeed "
                "need --set batch.micro=N [--set batch.accumulation=N].")
        text = text.replace("\nbatch:", f"\n{note}\nbatch:", 1)
    return f"# Imported by distrecipe from {shown} ({kind}).\n" + text


@click.command("import")
@click.argument("path", type=click.Path(path_type=str))
@click.option("--world", type=click.IntRange(min=1), default=None,
              help="Total ranks (ds_config and TrainingArguments do not say; "
                   "Accelerate and verl files do).")
@click.option("--nodes", type=click.IntRange(min=1), default=1, show_default=True,
              help="Nodes the --world ranks are spread over.")
@click.option("--output", "-o", type=click.Path(dir_okay=False, path_type=str), default=None,
              help="Write the recipe to this file (whole or not at all) instead of stdout.")
@overrides_option
def command(path: str, world: int | None, nodes: int, overrides: tuple[str, ...], output: str | None) -> int:
    """Turn a ds_config, accelerate YAML, verl overrides, TrainingArguments, Axolotl or LLaMA-Factory
    YAML into a recipe."""
    return import_config(path=path, world=world, nodes=nodes, overrides=overrides, output=output)
