"""Reading nested mappings that may be malformed: the helpers every config reader shares.

Native configs and recipes arrive as whatever YAML or JSON the user wrote, so a
section may be missing, `null` or a list, and a number may be `"auto"` or `true`.
These helpers answer "the value at this path, if it is what I need" without raising,
so lint rules, importers, emitters and messages all read input the same way.
"""

from __future__ import annotations

from typing import Any

from distrecipe.source import KeyPath


def get(data: Any, *path: str | int, default: Any = None) -> Any:
    """The value at `path` in nested mappings, or `default` when a section or the key is missing."""
    node = data
    for part in path:
        if not isinstance(node, dict) or part not in node:
            return default
        node = node[part]
    return node


def section(data: Any, *path: str | int) -> dict[str, Any]:
    """The mapping at `path`, or an empty one when it is missing or not a mapping."""
    value = get(data, *path)
    return value if isinstance(value, dict) else {}


def integer(value: Any) -> int | None:
    """`value` when it is a real integer (not a bool, not "auto"), else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def dotted(path: KeyPath) -> str:
    """`("batch", "micro")` → `batch.micro`; list indices as `[i]`."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "the document"


def joined(path: KeyPath) -> str:
    """`("optimizer", "params", "betas", 0)` → `optimizer.params.betas.0`, as Hydra writes it."""
    return ".".join(str(part) for part in path)


CLOSE = 0.85
"""The similarity (difflib's ratio) at which a word is taken for a misspelling of another:
`zero_optimisation` of `zero_optimization` (0.94), not `comms_config` of `comms_logger` (0.67)."""


def did_you_mean(word: str, choices: list[str], cutoff: float = 0.6) -> str:
    """`; did you mean 'x'?` for the closest of `choices`, or nothing when none is close
    (`cutoff`: difflib's similarity ratio; `CLOSE` for a near-certain misspelling)."""
    import difflib  # only error messages need it

    match = difflib.get_close_matches(word, choices, n=1, cutoff=cutoff)
    return f"; did you mean {match[0]!r}?" if match else ""
