"""Write the Axolotl and LLaMA-Factory key tables from their schema sources, read as text.

    python scripts/schema_tables.py           # (re)write tables/{axolotl,llamafactory}/RELEASE.json
    python scripts/schema_tables.py --check   # exit 1 and name the tables and keys that differ

Neither tool installs beside the engines distrecipe's tests judge with (Axolotl pins
another transformers than verl allows; LLaMA-Factory would downgrade transformers and
Accelerate), so their config schemas are read from their own source files, stored byte
for byte, one folder per release, under `tests/corpus/schemas/TOOL/RELEASE/`
(PROVENANCE.csv says where each file comes from: the repository and commit, the PyPI
file), parsed with `ast`, never imported. Every stored release gets its table
`distrecipe/engines/tables/TOOL/RELEASE.json`, which says which release it is (`version`,
`commit` where known, `pypi_file` and its `pypi_sha256` where the files came from PyPI):

* Axolotl: the pydantic models `AxolotlInputConfig` inherits from (its keys, their
  annotations as JSON types and choices, defaults, aliases, the models that declare
  them, and the fields a `mode="before"` validator converts first). Unknown keys are
  dropped (pydantic's default `extra="ignore"`; `model_dump` in `validate_config`).
* LLaMA-Factory: the dataclasses of `_TRAIN_ARGS` in `hparams/parser.py`, which
  `HfArgumentParser` reads with `allow_extra_keys=False` (unknown keys refused); its
  `TrainingArguments` extends transformers' `Seq2SeqTrainingArguments`, whose fields
  are not copied here: lint takes them from the judging transformers table
  (`tables/hf/RELEASE.json`, `engines.llamafactory.accepted`).

Output is sorted, indented JSON ending in a newline: the same sources give the same bytes.
"""

from __future__ import annotations

import argparse
import ast
import csv
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ROOT / "tests" / "corpus" / "schemas"
TABLES = ROOT / "distrecipe" / "engines" / "tables"
SCALARS = {"int": "integer", "float": "number", "bool": "boolean", "str": "string", "None": "null",
           "NoneType": "null", "dict": "object", "Dict": "object", "list": "array", "List": "array",
           "tuple": "array", "Tuple": "array", "set": "array"}
"""Annotation names → the JSON type a YAML value must have (pydantic's lax mode converts
within a type, see `lint.rules.axolotl`)."""


@dataclass
class Field:
    name: str
    annotation: ast.expr | None
    default: ast.expr | None
    owner: str
    source: str


@dataclass
class Class:
    name: str
    bases: list[str]
    source: str
    fields: list[Field] = field(default_factory=list)
    before: set[str] = field(default_factory=set)
    """Fields a `@field_validator(..., mode="before")` converts before the type check."""
    enum: list[str] | None = None
    """A `str` enum's values."""
    model: bool = False
    """A pydantic model or a dataclass (its values are mappings)."""


def releases(tool: str) -> list[str]:
    """The releases of `tool` whose sources are stored (a folder with a PROVENANCE.csv)."""
    folders = (SOURCES / tool).iterdir()
    return sorted(folder.name for folder in folders if (folder / "PROVENANCE.csv").is_file())


def provenance(tool: str, release: str) -> dict[str, dict[str, str]]:
    with (SOURCES / tool / release / "PROVENANCE.csv").open(newline="") as f:
        return {row["file"]: row for row in csv.DictReader(f)}


def classes(tool: str, release: str) -> dict[str, Class]:
    """Every class of one release's stored schema files, by name."""
    found: dict[str, Class] = {}
    for name, row in sorted(provenance(tool, release).items()):
        tree = ast.parse((SOURCES / tool / release / name).read_text(encoding="utf-8"))
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                found[node.name] = _class(node, row["path"])
    return found


def _class(node: ast.ClassDef, source: str) -> Class:
    bases = [ast.unparse(base).split(".")[-1] for base in node.bases]
    out = Class(node.name, bases, source)
    decorators = [ast.unparse(d.func if isinstance(d, ast.Call) else d) for d in node.decorator_list]
    out.model = "BaseModel" in bases or "dataclass" in decorators
    if "Enum" in bases and "str" in bases:
        out.enum = [stmt.value.value for stmt in node.body if isinstance(stmt, ast.Assign)
                    and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str)]
    for stmt in node.body:
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            if ast.unparse(stmt.annotation).startswith("ClassVar") or _not_init(stmt.value):
                continue  # not a field, or one no argument sets (`field(init=False)`)
            out.fields.append(Field(stmt.target.id, stmt.annotation, stmt.value, node.name, source))
        elif isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
            for decorator in stmt.decorator_list:
                if not isinstance(decorator, ast.Call) or ast.unparse(decorator.func) != "field_validator":
                    continue
                if any(k.arg == "mode" and ast.unparse(k.value) == "'before'" for k in decorator.keywords):
                    out.before |= {a.value for a in decorator.args if isinstance(a, ast.Constant)}
    return out


def _not_init(node: ast.expr | None) -> bool:
    return isinstance(node, ast.Call) and ast.unparse(node.func) == "field" and any(
        k.arg == "init" and isinstance(k.value, ast.Constant) and k.value.value is False
        for k in node.keywords)


def lineage(name: str, known: dict[str, Class]) -> list[Class]:
    """`name` and the classes it inherits from that the sources define, most derived first
    (Python's MRO for these single-diamond-free hierarchies)."""
    out: list[Class] = []

    def visit(current: str) -> None:
        cls = known.get(current)
        if cls is None or cls in out:
            return
        out.append(cls)
        for base in cls.bases:
            visit(base)

    visit(name)
    return out


def fields_of(name: str, known: dict[str, Class]) -> dict[str, Field]:
    """The fields of `name`, each from the most derived class declaring it."""
    out: dict[str, Field] = {}
    for cls in lineage(name, known):
        for f in cls.fields:
            out.setdefault(f.name, f)
    return out


def json_types(node: ast.expr | None, known: dict[str, Class]) -> tuple[set[str], list[Any] | None]:
    """The JSON types an annotation accepts and its closed choices (Literal, str enum);
    `any` where it cannot be told (a type the sources do not define)."""
    if node is None:
        return {"any"}, None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _union([node.left, node.right], known)
    if isinstance(node, ast.Constant) and node.value is None:
        return {"null"}, None
    if isinstance(node, ast.Constant) and isinstance(node.value, str):  # a quoted forward reference
        return json_types(ast.parse(node.value, mode="eval").body, known)
    if isinstance(node, ast.Subscript):
        head = ast.unparse(node.value).split(".")[-1]
        inner = node.slice
        items = list(inner.elts) if isinstance(inner, ast.Tuple) else [inner]
        if head == "Optional":
            types, choices = json_types(items[0], known)
            return types | {"null"}, choices
        if head == "Union":
            return _union(items, known)
        if head == "Annotated":
            return json_types(items[0], known)
        if head == "Literal":
            values = [ast.literal_eval(item) for item in items]
            return {_value_type(v) for v in values}, values
        if head in SCALARS:
            return {SCALARS[head]}, None
        return {"any"}, None
    name = ast.unparse(node).split(".")[-1]
    if name in SCALARS:
        return {SCALARS[name]}, None
    cls = known.get(name)
    if cls is not None and cls.enum is not None:
        return {"string"}, list(cls.enum)
    if cls is not None and cls.model:
        return {"object"}, None
    return {"any"}, None


def _union(items: list[ast.expr], known: dict[str, Class]) -> tuple[set[str], list[Any] | None]:
    types: set[str] = set()
    choices: list[Any] | None = []
    for item in items:
        more, listed = json_types(item, known)
        types |= more
        if listed is None and more - {"null"}:
            choices = None
        elif listed is not None and choices is not None:
            choices += listed
    return types, choices if choices else None


def _value_type(value: Any) -> str:
    if value is None:
        return "null"
    return {bool: "boolean", int: "integer", float: "number", str: "string"}.get(type(value), "any")


def default(node: ast.expr | None) -> tuple[bool, Any]:
    """The default a field declares, when it is a literal (`= 1`, `Field(default=1)`, `field(default=1)`)."""
    if isinstance(node, ast.Call) and ast.unparse(node.func) in ("Field", "field"):
        given = {k.arg: k.value for k in node.keywords}
        node = given.get("default", node.args[0] if node.args else None)
        if node is None:
            return False, None
    if node is None:
        return False, None
    try:
        value = ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return False, None
    plain = isinstance(value, str | int | float | bool | type(None) | list | dict)
    return (True, value) if plain else (False, None)


def alias(node: ast.expr | None) -> str | None:
    if isinstance(node, ast.Call) and ast.unparse(node.func) == "Field":
        for keyword in node.keywords:
            if keyword.arg == "alias" and isinstance(keyword.value, ast.Constant):
                return str(keyword.value.value)
    return None


def entry(f: Field, known: dict[str, Class], before: set[str]) -> dict[str, Any]:
    types, choices = json_types(f.annotation, known)
    out: dict[str, Any] = {"annotation": ast.unparse(f.annotation) if f.annotation else "",
                           "declared_in": f.owner, "source": f.source,
                           "types": sorted(types)}
    if choices is not None:
        out["choices"] = choices
    has, value = default(f.default)
    if has:
        out["default"] = value
    if f.name in before:
        out["converted_before"] = True
    return out


def origin(tool: str, release: str) -> dict[str, str]:
    """Which release a table is: `version`, and `commit` and `pypi_file`/`pypi_sha256`
    where PROVENANCE.csv has them (one value for all of the release's files)."""
    rows = list(provenance(tool, release).values())
    out = {"version": release}
    for column in ("release", "commit", "pypi_file", "pypi_sha256"):
        values = {row[column] for row in rows}
        assert len(values) == 1, f"{tool} {release}: the sources disagree on {column}: {sorted(values)}"
        value = values.pop()
        if column == "release":
            assert value == release, f"{tool} {release}: PROVENANCE.csv says release {value}"
        elif value:
            out[column] = value
    assert "commit" in out or "pypi_file" in out, f"{tool} {release}: neither a commit nor a PyPI file"
    return out


def axolotl_table(release: str) -> dict[str, Any]:
    known = classes("axolotl", release)
    root = "AxolotlInputConfig"
    before = set().union(*(cls.before for cls in lineage(root, known)))
    keys: dict[str, Any] = {}
    for name, f in fields_of(root, known).items():
        keys[name] = entry(f, known, before)
        if f.owner == "DeprecatedParameters":
            keys[name]["deprecated"] = True
        if (other := alias(f.default)) is not None:
            keys[other] = {**keys[name], "alias_of": name}
    return {"engine": "axolotl", "repo": "axolotl-ai-cloud/axolotl", **origin("axolotl", release),
            "model": root, "unknown_keys": "ignored", "keys": keys}


def llamafactory_table(release: str) -> dict[str, Any]:
    known = classes("llamafactory", release)
    parser = ast.parse((SOURCES / "llamafactory" / release / "parser.py").read_text(encoding="utf-8"))
    train = next(node.value for node in parser.body if isinstance(node, ast.Assign)
                 and any(isinstance(t, ast.Name) and t.id == "_TRAIN_ARGS" for t in node.targets))
    assert isinstance(train, ast.List)
    roots = [ast.unparse(item) for item in train.elts]
    keys: dict[str, Any] = {}
    external: list[str] = []
    for root in roots:
        for name, f in fields_of(root, known).items():
            keys.setdefault(name, {**entry(f, known, set()), "dataclass": root})
        external += [base for cls in lineage(root, known) for base in cls.bases
                     if base not in known and base not in ("object",)]
    bases = sorted(set(external) - {"BaseTrainingArguments"} | {"Seq2SeqTrainingArguments"})
    return {"engine": "llamafactory", "repo": "hiyouga/LLaMA-Factory", **origin("llamafactory", release),
            "dataclasses": roots, "unknown_keys": "refused",
            "transformers_bases": bases, "keys": keys}


BUILDERS = {"axolotl": axolotl_table, "llamafactory": llamafactory_table}


def render(table: dict[str, Any]) -> str:
    return json.dumps(table, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with the stored tables, write nothing")
    args = parser.parse_args(argv)
    status = 0
    for tool, build in sorted(BUILDERS.items()):
        stored_releases = releases(tool)
        folder = TABLES / tool
        for stale in sorted(set(path.stem for path in folder.glob("*.json")) - set(stored_releases)):
            status = 1
            print(f"{tool}/{stale}.json has no sources under {SOURCES.relative_to(ROOT)}/{tool}/{stale}/")
        for release in stored_releases:
            text = render(build(release))
            path = folder / f"{release}.json"
            if args.check:
                stored = json.loads(path.read_text()) if path.exists() else {}
                fresh = json.loads(text)
                old, new = stored.get("keys", {}), fresh["keys"]
                both = set(old) & set(new)
                differ = sorted(set(old) ^ set(new)) + sorted(k for k in both if old[k] != new[k])
                if path.exists() and path.read_text() != text:
                    status = 1
                    keys = ", ".join(differ) or "(header or layout)"
                    print(f"{tool}/{path.name} differs from what the sources say; keys: {keys}")
                elif not path.exists():
                    status = 1
                    print(f"{tool}/{path.name} is missing: run scripts/schema_tables.py")
            else:
                folder.mkdir(exist_ok=True)
                path.write_text(text)
                print(f"wrote {path.relative_to(ROOT)}")
    return status


if __name__ == "__main__":
    sys.exit(main())
