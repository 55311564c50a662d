"""Recipe text → `Recipe`: read, apply `--set` overrides, validate, build dataclasses.

Overrides are applied to the document *before* validation, so a bad override is
reported at the override itself (`--set batch.global=abc:1:14`), exactly like a bad
line in the file.
"""

from __future__ import annotations

import copy
import json
import math
import re
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, NamedTuple

from distrecipe.errors import Position, RecipeError
from distrecipe.keys import dotted
from distrecipe.model_shapes import LAYOUTS, inventory
from distrecipe.recipe import (
    RL,
    SLURM_TIME,
    Batch,
    Checkpoint,
    Cluster,
    K8s,
    Kernels,
    Launch,
    Model,
    Native,
    Offload,
    Optimizer,
    Parallel,
    Recipe,
    Recompute,
    Schedule,
    SkyPilot,
    Slurm,
    name_from_file,
    slurm_time_as_written,
)
from distrecipe.schemas import coerce_integers, recipe_schema, validate_recipe
from distrecipe.source import (
    Document,
    KeyPath,
    SourceError,
    parse_text,
    read_document,
    read_text,
    strings_as_written,
    yaml11_reading,
)
from distrecipe.translator import hf_config

_UNITS = {"B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
          "KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40}
_COUNT_SUFFIX = {"": 1, "K": 10**3, "M": 10**6, "B": 10**9, "T": 10**12}


def parse_size(value: int | str) -> int:
    """Bytes from `80GiB`, `80GB` (10⁹, as the seed's tables use) or a plain integer."""
    if isinstance(value, int):
        return value
    m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([KMGT]?i?B)\s*", value, re.I)
    if not m:
        raise ValueError(f"not a size: {value!r}")
    return _whole(float(m.group(1)) * _UNITS[m.group(2).upper()], value)


def _headroom(value: int | float | str) -> float | int:
    """`cluster.headroom`: a number is a share of the GPU (a float), a size is bytes (an int)."""
    return parse_size(value) if isinstance(value, str) else float(value)


def parse_count(value: int | float | str) -> int:
    """A parameter count from `8.2e9`, `8.2B`, `350M` or an integer."""
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return _whole(value, value)
    m = re.fullmatch(r"\s*([0-9.eE+]+)\s*([KMBT]?)\s*", value)
    if not m:
        raise ValueError(f"not a count: {value!r}")
    return _whole(float(m.group(1)) * _COUNT_SUFFIX[m.group(2)], value)


def _whole(number: float, written: object) -> int:
    if not math.isfinite(number):
        raise ValueError(f"not a finite number: {written!r}")
    return round(number)


def _bounded(value: int | None, path: tuple[str, ...], doc: Document,
             at: Position | None = None) -> int | None:
    """`value` when it is within the schema's bounds for `path`, else an error there (or `at`).

    A size or count written as a string (`80GiB`, `8.2B`), or read from a Hugging
    Face config, is held to the same bounds as the integer form the schema checks.
    """
    low, limit = _bounds(path)
    if value is not None and limit is not None and not low <= value <= limit:
        source = "" if at is None else " (read from model.hf_config)"
        raise RecipeError(f"{dotted(path)} is {value:.4g}{source}; it must be between {low} and {limit:,} "
                          "(more than any machine or model has)", at or doc.where(path), keys=(dotted(path),))
    return value


def _bounds(path: tuple[str, ...]) -> tuple[int, int | None]:
    node = recipe_schema()
    for key in path:
        node = node["properties"][key]
    for branch in node.get("oneOf") or node.get("anyOf") or [node]:
        if branch.get("type") == "integer":
            return int(branch.get("minimum", 1)), int(branch["maximum"])
    return 1, None


def load_recipe(path: str | Path, overrides: Sequence[str] = ()) -> Recipe:
    """Read a recipe file, apply `--set` overrides, validate and build the `Recipe`."""
    return read_recipe(path, overrides)[1]


def read_recipe(path: str | Path, overrides: Sequence[str] = ()) -> tuple[Document, Recipe]:
    """`load_recipe`, with the document as written and overridden: what lint judges, at
    its positions, for compile and launch."""
    doc = apply_overrides(read_document(path), overrides)
    return doc, recipe_from_document(doc, base_dir=Path(path).parent)


def recipe_from_text(text: str, file: str = "<recipe>", overrides: Sequence[str] = ()) -> Recipe:
    """The same as `load_recipe` for text already in memory (tests, stdin, import)."""
    return recipe_from_document(apply_overrides(parse_text(text, file), overrides), Path("."))


class SetItem(NamedTuple):
    """One `--set KEY=VALUE`, split."""

    key: str
    """The key as written (for positions in the `--set` text)."""
    path: tuple[str, ...]
    """The recipe key it sets: the dotted parts, spaces around each removed."""
    value: str
    """The value's text, read as YAML where it is applied."""


def split_set(item: str) -> SetItem | None:
    """`--set KEY=VALUE` split at its first `=`; None without one or without a key. The one
    reading of `--set`: what it sets is what `launch` records, `diff` looks for and a
    platform's node command passes on."""
    key, sep, value = item.partition("=")
    if not sep or not key.strip():
        return None
    return SetItem(key, tuple(part.strip() for part in key.split(".")), value)


def apply_overrides(doc: Document, overrides: Sequence[str]) -> Document:
    """Set `dotted.key=value` pairs (values parsed as YAML) into a copy of the document."""
    if not overrides:
        return doc
    data = copy.deepcopy(doc.data) if isinstance(doc.data, dict) else {}
    positions = dict(doc.positions)
    key_positions = dict(doc.key_positions)
    written = dict(doc.written)
    for item in overrides:
        label = f"--set {item}"
        split = split_set(item)
        if split is None:
            raise RecipeError("override must look like dotted.key=value", Position(label, 1, 1))
        key, path, raw = split
        value_at = Position(label, 1, len(key) + 2)
        try:
            parsed = parse_text(raw, label) if raw.strip() else None
        except SourceError as exc:
            raise RecipeError(exc.message, value_at, keys=(key.strip(),)) from None
        value = parsed.data if parsed is not None else None
        if path == SLURM_TIME:
            value = slurm_time_as_written(value, raw)
        node = data
        for depth, part in enumerate(path[:-1]):
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise RecipeError(f"{'.'.join(path[: depth + 1])} is not a section", value_at,
                                  keys=(".".join(path[: depth + 1]),))
            node = child
        node[path[-1]] = value
        for table in (positions, key_positions, written):
            for stale in [p for p in table if p[: len(path)] == path]:
                del table[stale]
        key_positions[path] = Position(label, 1, 1 + len(key) - len(path[-1]))
        positions[path] = value_at
        if parsed is not None:
            written.update(((*path, *inner), text) for inner, text in parsed.written.items())
    return Document(data, doc.file, positions, key_positions, doc.lines, written=written)


def recipe_from_document(doc: Document, base_dir: Path) -> Recipe:
    """Validate against the schema, then build typed sections with defaults filled.

    Only the keys the recipe wrote are passed on: every default is the dataclass
    field's (`distrecipe.recipe`), so no default is written twice.
    """
    if not isinstance(doc.data, dict):
        raise RecipeError("a recipe must be a mapping (key: value pairs)", doc.where(()))
    _no_lone_surrogates(doc.data, (), doc)
    doc = _slurm_time(text_as_written(doc))
    validate_recipe(doc)
    d: dict[str, Any] = coerce_integers(doc.data, recipe_schema())
    cluster: dict[str, Any] = {
        k: _bounded(parse_size(v), ("cluster", k), doc) if k in ("gpu_memory", "cpu_memory") else
        _headroom(v) if k == "headroom" else v
        for k, v in d.get("cluster", {}).items()}
    batch: dict[str, Any] = {"global_" if k == "global" else k: v for k, v in d.get("batch", {}).items()}
    written: dict[str, Any] = {k: d[k] for k in ("stage", "fsdp_version", "precision", "reduce_dtype")
                               if k in d}
    if "grad_clip" in d:
        written["grad_clip"] = d["grad_clip"] or 0.0  # 0 and null both mean "no clipping"
    if "activation_checkpointing" in d:
        ac = d["activation_checkpointing"]
        written["activation_checkpointing"] = _recompute(ac, doc)
        if isinstance(ac, dict) and "every" in ac:
            written["recompute_every"] = ac["every"]
    if d.get("rl"):
        written["rl"] = RL(**d["rl"])
    if d.get("native"):
        native: dict[str, Any] = d["native"]
        written["native"] = Native(deepspeed=native.get("deepspeed", {}),
                                   accelerate=native.get("accelerate", {}),
                                   hf=native.get("hf", {}), trl=native.get("trl", {}),
                                   verl=tuple(native.get("verl", ())))
    for key, section in (("optimizer", Optimizer), ("schedule", Schedule), ("checkpoint", Checkpoint),
                         ("launch", Launch)):
        if key in d:  # lists in YAML, tuples in the frozen sections
            values: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in d[key].items()}
            if isinstance(values.get("slurm"), dict):
                values["slurm"] = Slurm(**values["slurm"])
            if isinstance(values.get("skypilot"), dict):
                values["skypilot"] = SkyPilot(**values["skypilot"])
            if isinstance(values.get("k8s"), dict):
                values["k8s"] = K8s(**values["k8s"])
            written[key] = section(**values)
    model, derived = _model(d.get("model", {}), base_dir, doc)
    return Recipe(
        name=d.get("name") or name_from_file(doc.file)[0],
        model=model,
        cluster=Cluster(**cluster),
        strategy=d["strategy"],
        offload=Offload(**d.get("offload", {})),
        kernels=Kernels(**d.get("kernels", {})),
        parallel=Parallel(**d.get("parallel", {})),
        batch=Batch(**batch),
        **written,
        source=doc.file,
        where={dotted(path): pos for path, pos in doc.positions.items() if path},
        derived=derived,
    )


def _no_lone_surrogates(value: Any, path: KeyPath, doc: Document) -> None:
    """Refuse a string no file can hold: YAML's and JSON's `\\ud800` escapes give a lone
    surrogate, which UTF-8 cannot encode, and every recipe string ends up in a written
    file (a config, the sbatch script, plan.json)."""
    if isinstance(value, str):
        if _SURROGATE.search(value):
            shown = ascii(value)[1:-1][:40]
            raise RecipeError(f"{dotted(path) or 'a key'} holds a lone surrogate ({shown}): text that "
                              "cannot be written as UTF-8", doc.where(path))
    elif isinstance(value, dict):
        for key, item in value.items():
            _no_lone_surrogates(key, path, doc)
            _no_lone_surrogates(item, (*path, key) if isinstance(key, str) else path, doc)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _no_lone_surrogates(item, (*path, index), doc)


_SURROGATE = re.compile("[\ud800-\udfff]")


def text_as_written(doc: Document) -> Document:
    """Strings stay strings: where the schema expects text and YAML 1.1 read a plain
    scalar as something else (`time: 12:00:00` is 43200, `partition: no` False, `args:
    [30]` a number), the text as written is taken (`source.written_text`). Where the
    schema wants a number and YAML 1.1 read a base-60 or octal one (`micro: 010` is 8),
    the file is refused, saying how YAML read it: no one writes a batch that way."""
    def wants_text(path: KeyPath, value: Any) -> bool:
        if path[:1] == ("native",):
            return False  # the engine's own section: passed on as read
        schema = _schema_at(path)
        if schema is None:
            return False
        text, kinds = doc.written[path], _kinds(schema)
        reading = yaml11_reading(text, value)
        if "string" not in kinds:
            if reading is not None and not reading.startswith(("the boolean", "the date")):
                raise RecipeError(f"{dotted(path)}: YAML 1.1 reads {text} as {reading}; write the number "
                                  "meant in decimal", doc.where(path))
            return False
        return _json_kind(value) not in kinds or (reading is not None and "boolean" not in reading)

    return strings_as_written(doc, wants_text)


def _schema_at(path: KeyPath) -> dict[str, Any] | None:
    """The recipe schema's node for `path`, or None where the schema does not say."""
    node: dict[str, Any] | None = recipe_schema()
    for part in path:
        if node is None:
            return None
        if isinstance(part, int):
            node = node.get("items") if isinstance(node.get("items"), dict) else None
            continue
        branches = [node, *node.get("oneOf", []), *node.get("anyOf", [])]
        node = next((b["properties"][part] for b in branches if part in b.get("properties", {})), None)
    return node


def _kinds(schema: dict[str, Any]) -> set[str]:
    """The JSON types a schema node accepts (an enum's by its values)."""
    kinds: set[str] = set()
    for branch in [schema, *schema.get("oneOf", []), *schema.get("anyOf", [])]:
        kind = branch.get("type")
        kinds.update([kind] if isinstance(kind, str) else kind or [])
        kinds.update(_json_kind(value) for value in branch.get("enum", []))
    if kinds & {"integer", "number"}:
        kinds |= {"integer", "number"}
    return kinds


def _json_kind(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    return "string" if isinstance(value, str) else "other"


def _slurm_time(doc: Document) -> Document:
    """The document with `launch.slurm.time` read back as written where YAML 1.1 made a
    number of it (`recipe.slurm_time_as_written`); a `--set` value was read back already."""
    launch = doc.data.get("launch")
    slurm = launch.get("slurm") if isinstance(launch, dict) else None
    where = doc.positions.get(SLURM_TIME)
    if not (isinstance(slurm, dict) and where is not None and where.file == doc.file
            and 0 < where.line <= len(doc.lines)):
        return doc
    written = slurm_time_as_written(slurm.get("time"), doc.lines[where.line - 1][where.col - 1:])
    if written is slurm.get("time"):
        return doc
    data = {**doc.data, "launch": {**launch, "slurm": {**slurm, "time": written}}}
    return Document(data, doc.file, doc.positions, doc.key_positions, doc.lines)


def _recompute(ac: bool | str | dict[str, Any], doc: Document) -> Recompute:
    """`true`/`false`, a mode, or `{mode, every}`; `every` only means something for
    selective (which blocks to wrap whole), so it is refused beside another mode."""
    if isinstance(ac, bool):
        return "full" if ac else "none"
    if isinstance(ac, str):
        return ac  # type: ignore[return-value]  # the schema allows only the three modes
    mode: Recompute = ac["mode"]
    if "every" in ac and mode != "selective":
        raise RecipeError(f"activation_checkpointing.every picks which blocks selective "
                          f"checkpointing wraps; it does not go with mode {mode}",
                          doc.where(("activation_checkpointing", "every")),
                          keys=("activation_checkpointing.every", "activation_checkpointing"))
    return mode


def _model(m: dict[str, Any], base_dir: Path, doc: Document) -> tuple[Model, dict[str, str]]:
    """Build the model shape, and where each value the recipe did not write came from.

    A Hugging Face config fills what the recipe leaves out, read as transformers reads its
    family (`hf_config.read`); Ψ is counted from the family's tensors (`model_shapes`)."""
    shape: dict[str, Any] = {k: v for k, v in m.items() if k != "params"}
    origin: dict[str, str] = {}
    where = doc.where(("model", "hf_config"))
    if "hf_config" in m:
        data, text = _read_hf_config(base_dir / m["hf_config"], where)
        try:
            config = hf_config.read(data, m["hf_config"])
        except hf_config.Unreadable as exc:
            raise RecipeError(f"model.hf_config {m['hf_config']}: {exc}", where) from None
        for key, value in config.values.items():
            if key not in shape:
                shape[key] = _bounded(value, ("model", key), doc, where) if type(value) is int else value
                origin[f"model.{key}"] = config.origin.get(f"model.{key}",
                                                           f"model.hf_config {m['hf_config']}")
        if "layer_cls" not in shape:
            cls = LAYOUTS[config.family].layer_cls
            shape["layer_cls"] = cls
            origin["model.layer_cls"] = f"the {config.family} family's decoder block (transformers' {cls})"
        if text:
            origin["model.params"] = ("the language model of a multimodal config (its text_config); "
                                      "the other towers are not counted")
    model = Model(**shape)
    if "params" in m:
        return replace(model, params=_bounded(parse_count(m["params"]), ("model", "params"), doc)), origin
    params = count_parameters(model)
    if params is not None:
        what = "the shape above" + (f", {m['hf_config']}'s" if "hf_config" in m else "")
        origin["model.params"] = (f"counted from {what}: the {model.family} family's tensors "
                                  "(model_shapes.inventory)" + (f"; {origin['model.params']}"
                                                                if "model.params" in origin else ""))
        params = _bounded(params, ("model", "params"), doc, where if "hf_config" in m else None)
    return replace(model, params=params), origin


def _read_hf_config(path: Path, where: Position) -> tuple[dict[str, Any], bool]:
    """The config's mapping (its `text_config` merged over it) and whether it had one."""
    try:
        data = json.loads(read_text(path))
    except SourceError as exc:  # its position names the path, escaped to print on one line
        name = exc.where.file if exc.where else path
        raise RecipeError(f"model.hf_config {name}: {exc.message}", where) from None
    except json.JSONDecodeError as exc:
        raise RecipeError(f"model.hf_config {path} is not JSON: {exc.msg}", where) from None
    except ValueError as exc:  # an integer longer than Python reads (`sys.get_int_max_str_digits`)
        raise RecipeError(f"model.hf_config {path} is not JSON: {str(exc).split(';')[0]}", where) from None
    except RecursionError:
        raise RecipeError(f"model.hf_config {path} is not JSON: nested too deeply", where) from None
    if not isinstance(data, dict):
        raise RecipeError(f"model.hf_config {path} is not a JSON object", where)
    # Multimodal configs keep the language model's shape under `text_config`.
    text = data.get("text_config")
    return ({**data, **text}, True) if isinstance(text, dict) else (data, False)


def count_parameters(model: Model) -> int | None:
    """Ψ of a decoder from its shape and family, or None if the shape is incomplete.

    The sum of the tensors `model_shapes.inventory` lists, so Ψ and the memory model's
    per-tensor sizes cannot disagree.
    """
    found = inventory(model)
    return None if found is None else found.params
