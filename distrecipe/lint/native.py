"""A recipe's `native:` sections, linted as the native configs they become.

`native.deepspeed` is merged into every ds_config compile writes, `native.accelerate`
into the Accelerate YAML, `native.hf` into the TrainingArguments JSON, and
`native.verl` is appended to verl's overrides (`translator/native.py`). An unknown
key there fails the job exactly as it would in a native file, so the rules that judge
keys where they stand (`Rule.section`) run over each section, and their findings point
inside the recipe. What the recipe itself decides (batch, stage, precision, world) is
held to the recipe at resolve instead, so the whole-file rules do not run here.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from distrecipe.engines import Kind
from distrecipe.engines.hydra import read_overrides
from distrecipe.errors import Position
from distrecipe.lint.workspace import Source
from distrecipe.source import Document, KeyPath

MAPPINGS: tuple[Kind, ...] = ("deepspeed", "accelerate", "hf")
"""The sections written as the engine's own mapping; `verl` is a list of override lines."""


def sections(src: Source) -> Iterator[Source]:
    """One source per non-empty `native.ENGINE` section of a recipe, positioned in the recipe."""
    native = src.section("native")
    for kind in MAPPINGS:
        if isinstance(native.get(kind), dict) and native[kind]:
            yield _mapping(src, kind)
    lines = native.get("verl")
    if isinstance(lines, list) and lines and all(isinstance(line, str) for line in lines):
        yield _overrides(src, lines)


def _mapping(src: Source, kind: Kind) -> Source:
    prefix = ("native", kind)
    doc = Document(src.data["native"][kind], src.doc.file, _below(src.doc.positions, prefix),
                   _below(src.doc.key_positions, prefix), src.doc.lines)
    return Source(doc=doc, kind=kind, workspace=src.workspace, within=prefix)


def _below(table: dict[KeyPath, Position], prefix: KeyPath) -> dict[KeyPath, Position]:
    return {path[len(prefix):]: where for path, where in table.items() if path[:len(prefix)] == prefix}


def _overrides(src: Source, lines: list[str]) -> Source:
    """The override lines read as an override file would be, each position moved to
    where the line is written in the recipe (so a `+` before a key is seen there too)."""
    parsed = read_overrides("\n".join(line.replace("\n", " ") for line in lines), src.doc.file)

    def moved(where: Position) -> Position:
        item = src.doc.where(("native", "verl", where.line - 1))
        written = src.doc.lines[item.line - 1] if 0 < item.line <= len(src.doc.lines) else ""
        quoted = written[item.col - 1:item.col] in ("'", '"')
        return Position(src.doc.file, item.line, item.col + int(quoted) + where.col - 1)

    data: dict[str, Any] = dict(parsed.data)
    if src.get("strategy") == "megatron":
        data["model_engine"] = "megatron"  # the emitter's first override: verl's Megatron config
    positions = {path: moved(where) for path, where in parsed.positions.items() if path}
    positions[()] = src.doc.where(("native", "verl"))
    doc = Document(data, src.doc.file, positions,
                   {path: moved(where) for path, where in parsed.key_positions.items()}, src.doc.lines)
    return Source(doc=doc, kind="verl", workspace=src.workspace, within=("native", "verl"))
