"""The fast path of `source.parse_text` for JSON (ds_configs are most of what is read).

PyYAML's composer costs about 6 ms for a ds_config; linting 1,000 of them must take
well under 2 s. Here the data comes from the C `json` module and the positions from
one regular-expression pass over the tokens, made only when a finding asks for one
(a clean file never does). Only well-formed JSON without duplicate keys takes this
path; `fast_document` returns None for anything else and `source.careful_json`
produces the exact error, so both agree on every document they accept (a test holds
them to it).
"""

from __future__ import annotations

import bisect
import json
import re
from collections.abc import Callable, Iterator
from typing import Any

from distrecipe.errors import Position
from distrecipe.source import MAX_BYTES, Document, KeyPath

_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[{}\[\],:]|[^\s{}\[\],:"]+')


class _Rejected(Exception):
    """The text needs the careful reader: malformed, duplicated, or oversized."""


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        raise _Rejected
    return out


def fast_document(text: str, file: str) -> Document | None:
    """The `Document` of well-formed JSON text; None when only the careful reader will do."""
    try:
        if len(text) > MAX_BYTES // 4:  # may exceed the byte limit: the careful path refuses it
            raise _Rejected
        data = json.loads(text, object_pairs_hook=_no_duplicates)
    except (_Rejected, ValueError, RecursionError):
        return None
    positions, key_positions = _Deferred(), _Deferred()

    def fill() -> None:
        positions.fill = key_positions.fill = None
        values, keys = _positions(text, file)
        dict.update(positions, values)
        dict.update(key_positions, keys)

    positions.fill = key_positions.fill = fill
    return Document(data, file, positions, key_positions, tuple(text.splitlines()))


class _Deferred(dict[KeyPath, Position]):
    """Positions computed on first use: most files have no finding and never need one.

    Every read goes through `_ready`, so the mapping behaves as the filled dict to any
    caller (lookups, iteration, copies, comparison); `fill` computes both tables at once.
    """

    fill: Callable[[], None] | None = None

    def _ready(self) -> None:
        if self.fill is not None:
            self.fill()

    def __eq__(self, other: object) -> bool:
        self._ready()
        if isinstance(other, _Deferred):
            other._ready()
        return super().__eq__(other)

    def __ne__(self, other: object) -> bool:
        return not self == other

    __hash__ = None  # as dict's

    def __repr__(self) -> str:
        self._ready()
        return super().__repr__()

    def __contains__(self, key: object) -> bool:
        self._ready()
        return super().__contains__(key)

    def __getitem__(self, key: KeyPath) -> Position:
        self._ready()
        return super().__getitem__(key)

    def get(self, key: KeyPath, default: Any = None) -> Any:
        self._ready()
        return super().get(key, default)

    def __iter__(self) -> Iterator[KeyPath]:
        self._ready()
        return super().__iter__()

    def __len__(self) -> int:
        self._ready()
        return super().__len__()

    def keys(self) -> Any:
        self._ready()
        return super().keys()

    def values(self) -> Any:
        self._ready()
        return super().values()

    def items(self) -> Any:
        self._ready()
        return super().items()

    def copy(self) -> dict[KeyPath, Position]:
        self._ready()
        return dict(super().items())


def _positions(text: str, file: str) -> tuple[dict[KeyPath, Position], dict[KeyPath, Position]]:
    starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def at(offset: int) -> Position:
        line = bisect.bisect_right(starts, offset)
        return Position(file, line, offset - starts[line - 1] + 1)

    positions: dict[KeyPath, Position] = {}
    key_positions: dict[KeyPath, Position] = {}
    # Each open container: its path, whether it is an object, its next list index,
    # and (objects) the key just read, waiting for its value.
    stack: list[list[Any]] = []
    pending_key = ""
    key_at = 0

    def value_path() -> KeyPath:
        if not stack:
            return ()
        path, is_object, index = stack[-1][0], stack[-1][1], stack[-1][2]
        return (*path, pending_key) if is_object else (*path, index)

    expect_key = False
    for match in _TOKEN.finditer(text):
        token = match.group()
        start = match.start()
        if token in ",:":
            if token == "," and stack and stack[-1][1]:
                expect_key = True
            continue
        if token in "}]":
            expect_key = False
            stack.pop()
            if stack and not stack[-1][1]:
                stack[-1][2] += 1
            continue
        if expect_key:
            pending_key = token[1:-1] if "\\" not in token else json.loads(token)
            key_at = start
            expect_key = False
            continue
        path = value_path()
        if stack and stack[-1][1]:
            key_positions[path] = at(key_at)
        positions.setdefault(path, at(start))
        if token in "{[":
            stack.append([path, token == "{", 0])
            expect_key = token == "{"
            continue
        if stack and not stack[-1][1]:
            stack[-1][2] += 1
    if stack:
        raise _Rejected
    return positions, key_positions
