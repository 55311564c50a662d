"""The recipe's text as the run directory keeps it: every secret rewritten in place.

The copy is for reading (the plan is what the job used), so it keeps what the user
wrote, comments and layout included, and still loads as the same recipe but for the
hidden values; where a secret cannot be located in the text, the caller withholds it.
"""

from __future__ import annotations

import bisect
import json
import re
from typing import Any

import yaml

from distrecipe.launch.secrets import REDACTED, SECRET_NAME, SECRET_VALUE, redact_argv, secret_in_text
from distrecipe.translator.load import split_set

NATIVE = "native"
"""The one free-form section: below it a key is the engine's, so a key that names a secret
(`comet.api_key`, `hub_token`) is one. Elsewhere keys are the recipe's own (`micro_tokens`)."""

_NULL_OR_BOOL = ("tag:yaml.org,2002:null", "tag:yaml.org,2002:bool")


def redact_recipe_yaml(text: str, at: tuple[str, ...] = ()) -> str | None:
    """Recipe YAML `text` (the document at key path `at`) with every secret rewritten in place.

    A secret is a scalar that looks like one (`SECRET_VALUE`), any scalar below a `native`
    key that names one, a word of a list of words that `redact_argv` hides (`launch.args`,
    `native.verl`), and a comment that holds one (`secret_in_text`). Each hidden scalar
    becomes the quoted `REDACTED`, a hidden comment `# REDACTED`; the rest of the text is
    kept character for character, so the copy still reads, and loads, as what the user
    wrote. None when the result still holds a secret (reached some way this does not
    rewrite: a secret-shaped key, a merge key that brings a secret name under `native`)
    or is not YAML that PyYAML reads (a JSON key over 1,024 characters).
    """
    try:
        edits: set[tuple[int, int, str]] = set()
        _hide(yaml.compose(text, Loader=yaml.SafeLoader), at, _named(at), edits, set())
        text = _rewrite(text, edits)
        text = _rewrite(text, {(start, end, f" {REDACTED}") for start, end in _comments(text)
                               if secret_in_text(text[start:end])})
        leaks = _leaks(yaml.safe_load(text), at, _named(at))
    except (yaml.YAMLError, RecursionError):
        return None
    return None if leaks else text


def _named(path: tuple[str, ...]) -> bool:
    """Whether a value at `path` lies below a `native` key that names a secret."""
    return path[:1] == (NATIVE,) and any(SECRET_NAME.search(key) for key in path[1:])


def _hide(node: yaml.Node | None, path: tuple[str, ...], named: bool, edits: set[tuple[int, int, str]],
          seen: set[int]) -> None:
    """Collect `(start, end, replacement)` for each secret scalar at or below `node`."""
    if node is None or id(node) in seen:
        return
    seen.add(id(node))
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            name = key.value if isinstance(key, yaml.ScalarNode) else ""
            _hide(value, (*path, name), named or _named((*path, name)), edits, seen)
    elif isinstance(node, yaml.SequenceNode):
        items = node.value
        if not named and all(isinstance(item, yaml.ScalarNode) for item in items):
            hidden = redact_argv([item.value for item in items])
            edits |= {(item.start_mark.index, item.end_mark.index, json.dumps(word))
                      for item, word in zip(items, hidden, strict=True) if word != item.value}
        else:
            for item in items:
                _hide(item, path, named, edits, seen)
    elif isinstance(node, yaml.ScalarNode) and node.value != REDACTED and (
            (named and node.tag not in _NULL_OR_BOOL) or SECRET_VALUE.search(node.value)):
        edits.add((node.start_mark.index, node.end_mark.index, json.dumps(REDACTED)))


def _rewrite(text: str, edits: set[tuple[int, int, str]]) -> str:
    """`text` with each span replaced, the whitespace that ended a span kept (a block
    scalar's line break)."""
    for start, end, word in sorted(edits, reverse=True):
        span = text[start:end]
        text = text[:start] + word + span[len(span.rstrip()):] + text[end:]
    return text


def _comments(text: str) -> list[tuple[int, int]]:
    """The spans of the comments' bodies (after `#`, to the line's end): a `#` outside
    every token the YAML scanner reads, at a line's start or after a blank."""
    tokens = yaml.scan(text, Loader=yaml.SafeLoader)
    spans = [(token.start_mark.index, token.end_mark.index) for token in tokens]
    starts = [start for start, _ in spans]
    found: list[tuple[int, int]] = []
    position = 0
    for match in re.finditer("#", text):
        hash_at = match.start()
        if hash_at < position or (hash_at and text[hash_at - 1] not in " \t\r\n"):
            continue
        token = bisect.bisect_right(starts, hash_at) - 1
        if token >= 0 and spans[token][0] <= hash_at < spans[token][1]:
            continue
        end = len(text) if (line_end := text.find("\n", hash_at)) < 0 else line_end
        found.append((hash_at + 1, end))
        position = end
    return found


def _leaks(data: Any, path: tuple[str, ...], named: bool) -> bool:
    """Whether loaded recipe data still holds a secret as `redact_recipe_yaml` defines one."""
    if isinstance(data, dict):
        return any((isinstance(key, str) and bool(SECRET_VALUE.search(key)))
                   or _leaks(value, (*path, str(key)), named or _named((*path, str(key))))
                   for key, value in data.items())
    if isinstance(data, list):
        words = [str(word) for word in data]
        plain = not named and all(not isinstance(word, dict | list) for word in data)
        return (plain and redact_argv(words) != words) or any(_leaks(item, path, named) for item in data)
    if named and data is not None and not isinstance(data, bool):
        return bool(data != REDACTED)
    return isinstance(data, str) and bool(SECRET_VALUE.search(data))


def redact_override(item: str) -> str:
    """A `--set KEY=VALUE` as recorded, its value redacted as it would be in the recipe
    (`load.split_set` says which key it sets); one the recipe refuses is recorded as given."""
    split = split_set(item)
    if split is None:
        return item
    redacted = redact_recipe_yaml(split.value, split.path)
    return f"{split.key}={REDACTED if redacted is None else redacted}"
