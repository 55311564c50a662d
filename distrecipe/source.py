"""Text → plain data, remembering where every key and value came from.

Recipes and native configs (ds_config.json, accelerate YAML, verl YAML) are all read
here, so every later message can point at `file:line:col`. Loading is safe and
bounded on purpose: these files arrive in code review from anyone.

* Every file is read by `read_text`: regular files only, at most `BUDGET.bytes` + 1
  bytes whatever the file claims its size is, UTF-8 only.
* Only YAML's safe types: a `!!python/object` tag is refused, never constructed.
* A YAML key written twice in one mapping is an error (PyYAML keeps the last value
  silently), or, for a reader that judges it (`keep_last`: lint), recorded in
  `Document.duplicates` with the last value kept, as PyYAML keeps it. A key a `<<` merge
  brings in and the mapping writes again is an override, as YAML means it, not a duplicate.
* Size, values (after alias expansion) and nesting are held to one `Budget`: a
  billion-laughs file fails fast.
* YAML 1.2 numbers: `1e-5` and `8.2e9` are floats (YAML 1.1 reads them as strings).
* JSON is read by `json.loads` (ds_configs are most of what is read, and most have
  no finding); its positions are composed by libyaml only when a message asks.
"""

from __future__ import annotations

import codecs
import errno
import json
import os
import re
import stat
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from distrecipe.errors import DistrecipeError, Position


@dataclass(frozen=True, slots=True)
class Budget:
    """How much of an untrusted file is read: its size, its values and its nesting.

    Real configs are a few KiB, hold hundreds of values (verl's whole composed PPO config
    about 1,500) and nest four or five levels; a hostile one (a billion-laughs file holds
    10⁹ values) is refused at the first value past a bound, so reading stays linear in
    the bounds and a hostile file is refused in well under a second. Every reader of a
    user's file asks this one object, so the bounds and their messages live in one place.
    """

    bytes: int = 1 << 20
    """Largest file read: 1 MiB leaves room for comments."""
    nodes: int = 20_000
    """Most values, after alias expansion."""
    depth: int = 64
    """Deepest nesting."""

    def size(self, size: int, where: Position, what: str = "file") -> None:
        """Refuse `size` bytes of text when over the bound."""
        if size > self.bytes:
            raise SourceError(f"{what} is larger than {self.bytes:,} bytes; larger configs are refused",
                              where)

    def values(self, count: int, where: Position, *, expanded: bool = False) -> None:
        """Refuse a document whose `count`-th value is past the bound."""
        if count > self.nodes:
            if expanded:
                raise SourceError(f"document expands to more than {self.nodes:,} values (alias bomb?)", where)
            raise SourceError(f"more than {self.nodes:,} values: a training config holds hundreds", where)

    def nesting(self, depth: int, where: Position) -> None:
        """Refuse a value nested `depth` levels deep when past the bound."""
        if depth > self.depth:
            raise SourceError(f"document nested more than {self.depth} levels", where)


BUDGET = Budget()
"""The bounds every file distrecipe reads is held to."""

KeyPath = tuple[str | int, ...]
Tables = tuple[dict[KeyPath, Position], dict[KeyPath, Position]]
"""A document's value positions and key positions (see `Document`)."""


@dataclass(frozen=True, slots=True)
class Duplicate:
    """A key written again in one YAML mapping, where the document keeps its last value."""

    path: KeyPath
    """The key's path."""
    first: Position
    """Where the key is first written."""
    at: Position
    """Where it is written again."""


class SourceError(DistrecipeError):
    """The text is not a well-formed, safe YAML or JSON document."""


class SeveralDocuments(SourceError):
    """The YAML text is a stream of several documents (`---` between them) where one is read;
    `parse_stream` reads each."""


class _Located:
    """A document's position tables: given, or built once, on first use.

    Lint reads a thousand ds_configs and asks for a position only in those with a
    finding, so JSON documents are built with `locate` and most never run it.
    """

    __slots__ = ("_locate", "_tables")

    def __init__(self, tables: Tables | None, locate: Callable[[], Tables] | None) -> None:
        self._tables = tables
        self._locate = locate

    def tables(self) -> Tables:
        if self._tables is None:
            self._tables = self._locate() if self._locate is not None else ({}, {})
            self._locate = None
        return self._tables

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Located) and self.tables() == other.tables()

    __hash__ = None  # type: ignore[assignment]  # mutable tables, as a dict's

    def __repr__(self) -> str:
        return "<positions>" if self._tables is None else f"<{len(self._tables[0])} positions>"


@dataclass(frozen=True, slots=True, init=False)
class Document:
    """Plain data (dicts, lists, scalars) plus the position of every key path.

    `positions[path]` is where the *value* at `path` starts; `key_positions[path]`
    is where its key is written (what a message about an unknown key points at).
    Both come from `locate` on first use when the document was read without them.
    """

    data: Any
    file: str
    lines: tuple[str, ...]
    _located: _Located = field(repr=False)
    written: dict[KeyPath, str] = field(repr=False)
    """For a plain YAML scalar that YAML 1.1 read as something other than a string
    (`12:00:00` → 43200, `no` → False, `2024-01-01` → a date, `0755` → 493): its text as
    written (see `written_text`)."""
    duplicates: tuple[Duplicate, ...] = field(repr=False)
    """Each key written again in its mapping, for a document read with `keep_last` (the
    data holds the last value); empty otherwise."""

    def __init__(
        self,
        data: Any,
        file: str,
        positions: dict[KeyPath, Position] | None = None,
        key_positions: dict[KeyPath, Position] | None = None,
        lines: tuple[str, ...] = (),
        *,
        locate: Callable[[], Tables] | None = None,
        written: dict[KeyPath, str] | None = None,
        duplicates: tuple[Duplicate, ...] = (),
    ) -> None:
        given = None if locate is not None else (
            {} if positions is None else positions, {} if key_positions is None else key_positions)
        object.__setattr__(self, "data", data)
        object.__setattr__(self, "file", file)
        object.__setattr__(self, "lines", lines)
        object.__setattr__(self, "_located", _Located(given, locate))
        object.__setattr__(self, "written", {} if written is None else written)
        object.__setattr__(self, "duplicates", duplicates)

    @property
    def positions(self) -> dict[KeyPath, Position]:
        return self._located.tables()[0]

    @property
    def key_positions(self) -> dict[KeyPath, Position]:
        return self._located.tables()[1]

    def where(self, path: KeyPath, *, key: bool = False) -> Position:
        """The closest known position for `path` (a parent's, if the path is absent)."""
        positions, key_positions = self._located.tables()
        table = key_positions if key else positions
        probe = tuple(path)
        while probe:
            if probe in table:
                return table[probe]
            if probe in positions:
                return positions[probe]
            probe = probe[:-1]
        return positions.get((), Position(self.file, 1, 1))


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


def written_text(doc: Document, path: KeyPath) -> str | None:
    """The text a plain YAML scalar at `path` was written as, where YAML 1.1 read it as
    something other than a string (`12:00:00` is the number 43200, `no` is False,
    `2024-01-01` a date, `0755` the number 493); None for any other value. A reader that
    expects text takes this instead of the value (`strings_as_written`)."""
    return doc.written.get(tuple(path))


def yaml11_reading(text: str, value: Any) -> str | None:
    """How YAML 1.1 turned the plain scalar `text` into `value`, where a person writing it
    rarely means that: a base-60 number, an octal number, a boolean spelt yes/no/on/off,
    or a date; None for an ordinary reading (`8`, `true`, `1.5e-5`)."""
    if isinstance(value, bool):
        return None if text.lower() in ("true", "false") else f"the boolean {str(value).lower()}"
    if isinstance(value, int | float) and ":" in text:
        return f"the base-60 number {value}"
    if isinstance(value, int) and re.fullmatch(r"[-+]?0[0-7_]+", text):
        return f"the octal number {value}"
    if not isinstance(value, int | float | str) and hasattr(value, "isoformat"):
        return f"the date {value.isoformat()}"
    return None


def strings_as_written(doc: Document, wants_text: Callable[[KeyPath, Any], bool]) -> Document:
    """`doc` with each value YAML 1.1 read from a plain scalar replaced by its text as
    written, where `wants_text(path, value)` says text is expected there."""
    changed = {path: text for path, text in doc.written.items() if wants_text(path, _at(doc.data, path))}
    if not changed:
        return doc
    data = _replaced(doc.data, (), changed)
    rest = {path: text for path, text in doc.written.items() if path not in changed}
    return Document(data, doc.file, doc.positions, doc.key_positions, doc.lines, written=rest,
                    duplicates=doc.duplicates)


def _at(data: Any, path: KeyPath) -> Any:
    for part in path:
        data = data[part]
    return data


def _replaced(data: Any, path: KeyPath, changed: dict[KeyPath, str]) -> Any:
    if path in changed:
        return changed[path]
    if isinstance(data, dict):
        return {key: _replaced(value, (*path, key), changed) for key, value in data.items()}
    if isinstance(data, list):
        return [_replaced(value, (*path, index), changed) for index, value in enumerate(data)]
    return data


def _pos(file: str, mark: Any) -> Position:
    """A YAML mark (PyYAML's or libyaml's, both with 0-based `line` and `column`) as a Position."""
    if mark is None:
        return Position(file, 1, 1)
    return Position(file, mark.line + 1, mark.column + 1)


def read_document(path: str | Path) -> Document:
    """Read and parse a YAML or JSON file, bounded in size."""
    return parse_text(read_text(path), str(path))


def read_text(path: str | Path) -> str:
    """A user's file as text: the one reader every file distrecipe is given goes through.

    Only a regular file is read (a FIFO would hang, `/dev/zero` never ends), checked
    on the opened descriptor so it cannot be swapped between check and read; at most
    `BUDGET.bytes` + 1 bytes are read whatever size the file claims; the text must be
    UTF-8. Every refusal is a `SourceError` at `path:1:1` (or at the bad byte).
    """
    name = _printable(str(path))
    where = Position(name, 1, 1)
    try:
        # O_NONBLOCK: opening a FIFO with no writer would otherwise wait forever.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except ValueError:  # a NUL byte or a lone surrogate in the path
        raise SourceError("cannot read: the path contains a character no file name can hold", where) from None
    except OSError as exc:
        reason = _REASONS.get(exc.errno or 0, exc.strerror or str(exc))
        raise SourceError(f"cannot read: {reason}", where) from None
    try:
        kind = _kind(os.fstat(fd).st_mode)
        if kind:
            raise SourceError(f"cannot read: it is {kind}, not a regular file", where)
        chunks: list[bytes] = []
        size = 0
        while size <= BUDGET.bytes:
            chunk = os.read(fd, BUDGET.bytes + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as exc:
        raise SourceError(f"cannot read: {exc.strerror or exc}", where) from None
    finally:
        os.close(fd)
    BUDGET.size(size, where)
    return _decode(b"".join(chunks), name)


_REASONS = {
    errno.ENOENT: "no such file",
    errno.ELOOP: "too many levels of symbolic links (a symlink loop?)",
    errno.ENXIO: "it is a socket or a device with nothing behind it, not a regular file",
}


def _kind(mode: int) -> str:
    """What a non-regular file is, in words; empty for a regular file."""
    if stat.S_ISREG(mode):
        return ""
    kinds = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
             (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
             (stat.S_ISSOCK, "a socket"))
    return next((words for test, words in kinds if test(mode)), "not a file")


def _printable(name: str) -> str:
    """`name` safe to print on one line: NUL, newlines and lone surrogates escaped."""
    escaped = name.encode("utf-8", "backslashreplace").decode("utf-8")
    return "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in escaped)


def _decode(data: bytes, name: str) -> str:
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        raise SourceError("cannot read: the file is UTF-16 (it starts with a UTF-16 byte-order mark); "
                          "save it as UTF-8", Position(name, 1, 1))
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        before = data[: exc.start]
        start = before.rfind(b"\n") + 1
        col = len(before[start:].decode("utf-8", "replace")) + 1
        raise SourceError(f"not UTF-8 text: byte 0x{data[exc.start]:02X} is not valid here; "
                          "save the file as UTF-8", Position(name, before.count(b"\n") + 1, col)) from None


def parse_text(text: str, file: str, *, keep_last: bool = False) -> Document:
    """Parse YAML or JSON text (by the file's name); JSON is read as JSON. `keep_last`: a YAML
    key written twice in a mapping is recorded (`Document.duplicates`), not refused.

    Text holding a lone surrogate came from bytes that are not UTF-8 (Python hands a
    command-line argument's over that way): refused at the byte, as a file's would be.
    """
    _check_text(text, file)
    if file.endswith(".json"):
        return _json(text, file)
    return _compose(text, file, single=True, keep_last=keep_last)[0]


def parse_stream(text: str, file: str, *, keep_last: bool = False) -> list[Document]:
    """`parse_text`, for a YAML stream of several documents (`---` between them, as a Kubernetes
    repository keeps a job beside the objects it uses): each document (an empty one's data
    None), positioned in the file, its lines the file's. The budget holds for the whole file."""
    _check_text(text, file)
    if file.endswith(".json"):
        return [_json(text, file)]
    return _compose(text, file, single=False, keep_last=keep_last)


def _check_text(text: str, file: str) -> None:
    BUDGET.size(len(text.encode("utf-8", "surrogatepass")), Position(file, 1, 1), "text")
    if (bad := _SURROGATE.search(text)) is not None:
        code = ord(bad.group(0))
        byte = f"byte 0x{code - 0xDC00:02X}" if 0xDC80 <= code <= 0xDCFF else f"U+{code:04X}"
        raise SourceError(f"not UTF-8 text: {byte} is not valid here; distrecipe reads text as UTF-8",
                          _offset_position(text, bad.start(), file))


def _json(text: str, file: str) -> Document:
    """JSON data from `json.loads`, its positions built only when first asked for."""
    try:
        data = _loads(text, file, _unique)
    except _DuplicateKey as exc:
        key = exc.key
    else:
        _check_size(data, file)
        lines = tuple(text.splitlines())
        return Document(data, file, lines=lines, locate=lambda: _located_json(text, file, data))
    # Read again keeping every pair: the positions pass reports the repeated key.
    _json_tables(text, file, _loads(text, file, _Pairs))
    raise SourceError(f"duplicate key {key!r}; a YAML loader would silently keep only the last one",
                      Position(file, 1, 1))


def _loads(text: str, file: str, hook: Callable[[list[tuple[str, Any]]], Any]) -> Any:
    try:
        return json.loads(text, object_pairs_hook=hook)
    except json.JSONDecodeError as exc:
        raise SourceError(f"invalid JSON: {exc.msg}", Position(file, exc.lineno, exc.colno)) from None
    except ValueError as exc:  # an integer longer than Python reads (`sys.get_int_max_str_digits`)
        long_int = rf"(?<![\d.])-?\d{{{sys.get_int_max_str_digits() + 1},}}(?![\d.eE])"
        digits = re.search(long_int, _blank_strings(text))
        where = _offset_position(text, digits.start(), file) if digits else Position(file, 1, 1)
        raise SourceError(f"invalid JSON: {str(exc).split(';')[0]}", where) from None
    except RecursionError:
        raise SourceError("JSON nested too deeply", Position(file, 1, 1)) from None


class _DuplicateKey(Exception):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


class _Pairs(list[tuple[str, Any]]):
    """A JSON object as its pairs in order, duplicates kept (to find where one is)."""


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _DuplicateKey(key)
            seen.add(key)
    return out


_STRING = re.compile(r'("(?:[^"\\]|\\.)*")(\s*:)?')
_SURROGATE = re.compile("[\ud800-\udfff]")
_Composer: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
"""libyaml where PyYAML was built with it (about 10× faster than PyYAML's own composer)."""


def _blank_strings(text: str) -> str:
    """`text` with the same shape and columns, every JSON string blanked, for YAML to compose.

    Only the structure matters for positions. Blank strings keep YAML from judging
    their content differently from JSON (`"\\ud800"`, control and line-separator
    characters), and a key becomes `"":` right away, so a key over YAML's 1,024
    characters or a line break before its colon still composes.
    """

    def blank(match: re.Match[str]) -> str:
        string, colon = match[1], match[2]
        if colon and len(string) > 2:  # '"key"  :' → '"":   ' + the same blanks
            return '"":' + " " * (len(string) - 3) + colon[:-1] + " "
        return '"' + " " * (len(string) - 2) + '"' + (colon or "")

    return _STRING.sub(blank, text).replace("\t", " ")


def _offset_position(text: str, offset: int, file: str) -> Position:
    start = text.rfind("\n", 0, offset) + 1
    return Position(file, text.count("\n", 0, offset) + 1, offset - start + 1)


def _located_json(text: str, file: str, data: Any) -> Tables:
    """`_json_tables`, or the document's start for every path where YAML cannot compose it."""
    tables = _json_tables(text, file, data)
    return tables if tables is not None else ({(): Position(file, 1, 1)}, {})


def _json_tables(text: str, file: str, data: Any) -> Tables | None:
    """Positions of JSON `data` from libyaml's marks over `text` (JSON is YAML here).

    The composed nodes give only positions: keys and values are `data`'s, walked in
    step, so YAML's different reading of a scalar cannot matter. None when YAML cannot
    compose valid JSON: a key longer than 1,024 characters, a line break before a colon.
    Raises the duplicate-key error when `data` holds `_Pairs` with a repeated key.
    """
    loader = _Composer(_blank_strings(text))
    try:
        root = loader.get_single_node()
    except (yaml.YAMLError, RecursionError):
        return None
    finally:
        loader.dispose()
    if root is None:
        return None
    positions: dict[KeyPath, Position] = {}
    keys: dict[KeyPath, Position] = {}
    stack: list[tuple[yaml.Node, Any, KeyPath, yaml.Node | None]] = [(root, data, (), None)]
    while stack:  # a loop, not recursion: JSON nests as deep as `json.loads` allows
        node, value, path, key_node = stack.pop()
        if key_node is not None:
            at = _pos(file, key_node.start_mark)
            if path in keys:
                raise SourceError(_duplicate(path[-1], keys[path]), at)
            keys[path] = at
        positions[path] = _pos(file, node.start_mark)
        if isinstance(value, (dict, _Pairs)):
            pairs = list(value.items()) if isinstance(value, dict) else value
            if not isinstance(node, yaml.MappingNode) or len(node.value) != len(pairs):
                return None
            stack.extend((v_node, v, (*path, k), k_node)
                         for (k_node, v_node), (k, v) in reversed(list(zip(node.value, pairs, strict=True))))
        elif isinstance(value, list):
            if not isinstance(node, yaml.SequenceNode) or len(node.value) != len(value):
                return None
            stack.extend((n, v, (*path, i), None)
                         for i, (n, v) in reversed(list(enumerate(zip(node.value, value, strict=True)))))
        elif not isinstance(node, yaml.ScalarNode):
            return None
    return positions, keys


def _duplicate(key: str | int, first: Position) -> str:
    return (f"duplicate key {key!r} (first defined at line {first.line}); "
            "a YAML loader would silently keep only the last one")


def _check_size(data: Any, file: str) -> None:
    """Hold JSON data to the budget's values and nesting (`json.loads` itself is fast;
    what follows it, positions and rules, is not)."""
    count, stack, start = 0, [(data, 0)], Position(file, 1, 1)
    while stack:
        node, depth = stack.pop()
        count += 1
        BUDGET.values(count, start)
        BUDGET.nesting(depth, start)
        if isinstance(node, dict):
            stack.extend((value, depth + 1) for value in node.values())
        elif isinstance(node, list):
            stack.extend((value, depth + 1) for value in node)


def _prescan(text: str, file: str) -> None:
    """Refuse YAML with too many values or too deep a nesting before PyYAML composes it.

    PyYAML's pure-Python scanner takes seconds on 60,000 keys or 100,000 open brackets;
    libyaml's event parser (C) counts them in milliseconds. Where libyaml cannot parse a
    text at all, PyYAML, the reader the engines use, has the last word on it.
    """
    if not hasattr(yaml, "CBaseLoader"):
        return
    parser = yaml.CBaseLoader(text)
    count = depth = 0
    try:
        while (event := parser.get_event()) is not None:
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
                BUDGET.nesting(depth, _pos(file, event.start_mark))
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
            if isinstance(event, (yaml.ScalarEvent, yaml.AliasEvent, yaml.CollectionStartEvent)):
                count += 1
                BUDGET.values(count, _pos(file, event.start_mark))
    except yaml.YAMLError as exc:
        if "depth" in str(exc):  # libyaml's own nesting limit, far above the budget's
            BUDGET.nesting(BUDGET.depth + 1, _pos(file, getattr(exc, "problem_mark", None)))
    finally:
        parser.dispose()


def _compose(text: str, file: str, *, single: bool, keep_last: bool) -> list[Document]:
    """YAML composed by PyYAML itself, the reader Accelerate and verl use (libyaml reads some
    texts differently: tabs as separators, `?` in flow scalars, the marks of empty values):
    the one document of the text (`single`, a `SeveralDocuments` error for a stream), or each."""
    _prescan(text, file)
    try:
        loader = _Loader(text)  # the reader already rejects control characters here
    except yaml.reader.ReaderError as exc:
        before = text[: exc.position]
        where = Position(file, before.count("\n") + 1, len(before) - before.rfind("\n"))
        code = exc.character if isinstance(exc.character, int) else ord(exc.character)
        raise SourceError(f"invalid YAML: control character U+{code:04X} is not allowed", where) from None
    roots: list[yaml.Node | None] = []
    try:
        if single:
            roots.append(loader.get_single_node())
        while not single and loader.check_node():
            roots.append(loader.get_node())
    except yaml.MarkedYAMLError as exc:
        if exc.context == "expected a single document in the stream":
            raise SeveralDocuments("a stream of several YAML documents, where a config is one: another "
                                   "starts here", _pos(file, exc.problem_mark)) from None
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
    lines = tuple(text.splitlines())
    out, count = [], 0
    for root in roots:
        doc = Document(data=None, file=file, lines=lines)
        if root is None:
            out.append(doc)
            continue
        builder = _Builder(loader, doc, count, keep_last=keep_last)
        data = builder.build(root, ())
        count = builder.count  # one budget for the whole file, every document's values counted
        out.append(Document(data, file, doc.positions, doc.key_positions, lines, written=doc.written,
                            duplicates=tuple(builder.duplicates)))
    return out


_PLAIN_TAGS = frozenset({"tag:yaml.org,2002:map", "tag:yaml.org,2002:seq"})


class _Builder:
    """Turns composed nodes into plain data, with positions and a node budget."""

    def __init__(self, loader: _Loader, doc: Document, count: int = 0, *, keep_last: bool = False) -> None:
        self.loader = loader
        self.doc = doc
        self.count = count
        self.keep_last = keep_last
        self.duplicates: list[Duplicate] = []

    def build(self, node: yaml.Node, path: KeyPath, depth: int = 0) -> Any:
        self.count += 1
        BUDGET.values(self.count, _pos(self.doc.file, node.start_mark), expanded=True)
        BUDGET.nesting(depth, _pos(self.doc.file, node.start_mark))
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
        value = self._scalar(node)
        if getattr(node, "style", None) is None and not isinstance(value, str) and value is not None:
            self.doc.written[path] = node.value  # plain: the scalar's text as written
        return value

    def _mapping(self, node: yaml.MappingNode, path: KeyPath, depth: int) -> dict[str, Any]:
        """The mapping as PyYAML constructs it: each key's last value (after `<<` merges, which
        come first), in the order keys are first written; a key the mapping itself writes twice
        is refused, or recorded (`keep_last`). Only the value kept is built."""
        own = {id(key_node) for key_node, _ in node.value}
        self.loader.flatten_mapping(node)  # resolves `<<` merge keys: merged pairs first
        keys = [self._key(key_node) for key_node, _ in node.value]
        last = {key: index for index, key in enumerate(keys)}
        first: dict[str, Position] = {}
        out: dict[str, Any] = {}
        for index, ((key_node, value_node), key) in enumerate(zip(node.value, keys, strict=True)):
            where = _pos(self.doc.file, key_node.start_mark)
            if id(key_node) in own and key in first:
                if not self.keep_last:
                    raise SourceError(_duplicate(key, first[key]), where)
                self.duplicates.append(Duplicate((*path, key), first[key], where))
            elif id(key_node) in own:
                first[key] = where
            if last[key] != index:
                out.setdefault(key, None)  # the key's place; its last value comes below
                continue
            self.doc.key_positions[(*path, key)] = where
            out[key] = self.build(value_node, (*path, key), depth + 1)
        return out

    def _key(self, node: yaml.Node) -> str:
        key = self._scalar(node)
        if isinstance(key, (dict, list)) or key is None:
            raise SourceError("mapping keys must be plain scalars", _pos(self.doc.file, node.start_mark))
        return str(key) if not isinstance(key, str) else key

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
        except ValueError as exc:  # an integer longer than Python reads (`sys.get_int_max_str_digits`)
            message = str(exc).split(";")[0]
            tag = node.tag.rsplit(":", 1)[-1]
            what = "number" if tag in ("int", "float") else f"{tag} value"
            raise SourceError(f"invalid {what}: {message}", _pos(self.doc.file, node.start_mark)) from None
        except (AttributeError, TypeError):  # PyYAML's constructors crash on a malformed `!!timestamp`
            shown = node.value if len(node.value) <= 40 else node.value[:40] + "…"
            raise SourceError(f"invalid {node.tag.rsplit(':', 1)[-1]} value {shown!r}",
                              _pos(self.doc.file, node.start_mark)) from None
