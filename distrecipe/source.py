"""Text → plain data, remembering where every key and value came from.

Recipes and native configs (ds_config.json, accelerate YAML, verl YAML) are all read
here, so every later message can point at `file:line:col`. Loading is safe and
bounded on purpose: these files arrive in code review from anyone.

* Only YAML's safe types: a `!!python/object` tag is refused, never constructed.
* Duplicate keys are an error (PyYAML keeps the last one silently).
* Size and alias expansion are bounded: a billion-laughs file fails fast.
* YAML 1.2 numbers: `1e-5` and `8.2e9` are floats (YAML 1.1 reads them as strings).
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from distrecipe.errors import DistrecipeError, Position

MAX_BYTES = 1 << 20
"""Largest file read: real configs are a few KiB; 1 MiB leaves room for comments."""
MAX_NODES = 100_000
"""Largest number of values after alias expansion; a billion-laughs file has 10⁹."""

KeyPath = tuple[str | int, ...]


class SourceError(DistrecipeError):
    """The text is not a well-formed, safe YAML or JSON document."""


@dataclass(frozen=True, slots=True)
class Document:
    """Plain data (dicts, lists, scalars) plus the position of every key path.

    `positions[path]` is where the *value* at `path` starts; `key_positions[path]`
    is where its key is written (what a message about an unknown key points at).
    """

    data: Any
    file: str
    positions: dict[KeyPath, Position] = field(default_factory=dict)
    key_positions: dict[KeyPath, Position] = field(default_factory=dict)
    lines: tuple[str, ...] = ()

    def where(self, path: KeyPath, *, key: bool = False) -> Position:
        """The closest known position for `path` (a parent's, if the path is absent)."""
        table = self.key_positions if key else self.positions
        probe = tuple(path)
        while probe:
            if probe in table:
                return table[probe]
            if probe in self.positions:
                return self.positions[probe]
            probe = probe[:-1]
        return self.positions.get((), Position(self.file, 1, 1))


class _Loader(yaml.SafeLoader):
    """SafeLoader that reads YAML 1.2 floats (`1e-5`) as numbers."""


_FLOAT_12 = re.compile(
    r"""^(?:[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?(?:[eE][-+]?[0-9]+)?
    |[-+]?\.[0-9_]+(?:[eE][-+]?[0-9]+)?
    |[-+]?\.(?:inf|Inf|INF)
    |\.(?:nan|NaN|NAN))$""",
    re.X,
)
_Loader.add_implicit_resolver("tag:yaml.org,2002:float", _FLOAT_12, list("-+0123456789."))
# The int resolver must win for plain integers, so it is re-added after the float one.
_Loader.yaml_implicit_resolvers = {
    ch: sorted(resolvers, key=lambda r: r[0] != "tag:yaml.org,2002:int")
    for ch, resolvers in _Loader.yaml_implicit_resolvers.items()
}


def _pos(file: str, mark: yaml.Mark | None) -> Position:
    if mark is None:
        return Position(file, 1, 1)
    return Position(file, mark.line + 1, mark.column + 1)


def read_document(path: str | Path) -> Document:
    """Read and parse a YAML or JSON file, bounded in size."""
    return parse_text(read_text(path), str(path))


def read_text(path: str | Path) -> str:
    """A config file's text, refused before reading when it is larger than `MAX_BYTES`."""
    p = Path(path)
    name = str(path)
    try:
        size = p.stat().st_size
    except OSError as exc:
        raise SourceError(f"cannot read {name}: {exc.strerror or exc}") from None
    if size > MAX_BYTES:
        raise SourceError(
            f"file is {size:,} bytes; configs larger than {MAX_BYTES:,} bytes are refused",
            Position(name, 1, 1),
        )
    try:
        return p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SourceError(f"cannot read {name} as UTF-8 text: {exc}", Position(name, 1, 1)) from None


def parse_text(text: str, file: str) -> Document:
    """Parse YAML or JSON text; JSON is checked as JSON first for exact error messages."""
    if len(text.encode("utf-8", "surrogatepass")) > MAX_BYTES:
        raise SourceError(f"text is larger than {MAX_BYTES:,} bytes", Position(file, 1, 1))
    if file.endswith(".json"):
        from distrecipe.jsonpos import fast_document  # imports this module: import here

        try:
            fast = fast_document(text, file)
            return fast if fast is not None else careful_json(text, file)
        except ValueError:  # Python's int-string limit; JSON's own errors are SourceErrors by now
            raise _too_many_digits(text, file) from None
    return _compose(text, file)


def _too_many_digits(text: str, file: str) -> SourceError:
    limit = sys.get_int_max_str_digits()
    found = re.search(f"[0-9]{{{limit + 1},}}", text)
    at = found.start() if found else 0
    before = text[:at]
    return SourceError(f"number with more than {limit:,} digits: no config value needs that many",
                       Position(file, before.count("\n") + 1, at - before.rfind("\n")))


def careful_json(text: str, file: str) -> Document:
    """JSON checked as JSON (exact error messages), then composed with every position.

    The reference the fast path is held to, and its fallback for anything unusual.
    """
    _check_json(text, file)
    # Raw tabs are illegal inside JSON strings, so outside them they are mere
    # whitespace: turning them into spaces keeps columns and satisfies YAML.
    return _compose(text.replace("\t", " "), file)


def _check_json(text: str, file: str) -> None:
    def no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        seen: dict[str, Any] = {}
        for key, value in pairs:
            if key in seen:
                raise _DuplicateKey(key)
            seen[key] = value
        return seen

    try:
        json.loads(text, object_pairs_hook=no_duplicates)
    except json.JSONDecodeError as exc:
        raise SourceError(f"invalid JSON: {exc.msg}", Position(file, exc.lineno, exc.colno)) from None
    except _DuplicateKey:
        pass  # reported with its exact position by the YAML pass
    except RecursionError:
        raise SourceError("JSON nested too deeply", Position(file, 1, 1)) from None


class _DuplicateKey(Exception):
    pass


def _compose(text: str, file: str) -> Document:
    try:
        loader = _Loader(text)  # the reader already rejects control characters here
    except yaml.reader.ReaderError as exc:
        before = text[: exc.position]
        where = Position(file, before.count("\n") + 1, len(before) - before.rfind("\n"))
        code = exc.character if isinstance(exc.character, int) else ord(exc.character)
        raise SourceError(f"invalid YAML: control character U+{code:04X} is not allowed", where) from None
    try:
        root = loader.get_single_node()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = exc.problem or exc.context or "invalid YAML"
        if "\\t" in problem or "tab" in problem:
            problem += " (YAML indentation must use spaces, not tabs)"
        raise SourceError(f"invalid YAML: {problem}", _pos(file, mark)) from None
    except yaml.YAMLError as exc:
        raise SourceError(f"invalid YAML: {exc}", Position(file, 1, 1)) from None
    except RecursionError:
        raise SourceError("YAML nested too deeply", Position(file, 1, 1)) from None
    finally:
        loader.dispose()
    doc = Document(data=None, file=file, lines=tuple(text.splitlines()))
    if root is None:
        return doc
    builder = _Builder(loader, doc)
    data = builder.build(root, ())
    return Document(data, file, doc.positions, doc.key_positions, doc.lines)


_PLAIN_TAGS = frozenset({"tag:yaml.org,2002:map", "tag:yaml.org,2002:seq"})


class _Builder:
    """Turns composed nodes into plain data, with positions and a node budget."""

    def __init__(self, loader: _Loader, doc: Document) -> None:
        self.loader = loader
        self.doc = doc
        self.count = 0

    def build(self, node: yaml.Node, path: KeyPath, depth: int = 0) -> Any:
        self.count += 1
        if self.count > MAX_NODES:
            raise SourceError(
                f"document expands to more than {MAX_NODES:,} values (alias bomb?)",
                _pos(self.doc.file, node.start_mark),
            )
        if depth > 64:
            raise SourceError("document nested more than 64 levels", _pos(self.doc.file, node.start_mark))
        self.doc.positions.setdefault(path, _pos(self.doc.file, node.start_mark))
        if not isinstance(node, yaml.ScalarNode) and node.tag not in _PLAIN_TAGS:
            raise SourceError(
                f"refused tag {node.tag!r}: only plain YAML values are allowed",
                _pos(self.doc.file, node.start_mark),
            )
        if isinstance(node, yaml.MappingNode):
            return self._mapping(node, path, depth)
        if isinstance(node, yaml.SequenceNode):
            return [self.build(item, (*path, i), depth + 1) for i, item in enumerate(node.value)]
        return self._scalar(node)

    def _mapping(self, node: yaml.MappingNode, path: KeyPath, depth: int) -> dict[str, Any]:
        self.loader.flatten_mapping(node)  # resolves `<<` merge keys
        out: dict[str, Any] = {}
        for key_node, value_node in node.value:
            key = self._scalar(key_node)
            if isinstance(key, (dict, list)) or key is None:
                raise SourceError(
                    "mapping keys must be plain scalars", _pos(self.doc.file, key_node.start_mark)
                )
            key = str(key) if not isinstance(key, str) else key
            if key in out:
                first = self.doc.key_positions[(*path, key)]
                raise SourceError(
                    f"duplicate key {key!r} (first defined at line {first.line}); "
                    "a YAML loader would silently keep only the last one",
                    _pos(self.doc.file, key_node.start_mark),
                )
            self.doc.key_positions[(*path, key)] = _pos(self.doc.file, key_node.start_mark)
            out[key] = self.build(value_node, (*path, key), depth + 1)
        return out

    def _scalar(self, node: yaml.Node) -> Any:
        if not isinstance(node, yaml.ScalarNode):
            raise SourceError("mapping keys must be plain scalars", _pos(self.doc.file, node.start_mark))
        try:
            return self.loader.construct_object(node, deep=True)
        except yaml.constructor.ConstructorError:
            raise SourceError(
                f"refused tag {node.tag!r}: only plain YAML values are allowed",
                _pos(self.doc.file, node.start_mark),
            ) from None
        except ValueError:  # Python's int-string limit: more digits than any value needs
            raise SourceError(
                f"number with {len(node.value):,} digits: no config value needs more than "
                f"{sys.get_int_max_str_digits():,}",
                _pos(self.doc.file, node.start_mark),
            ) from None
