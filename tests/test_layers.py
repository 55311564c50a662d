"""The package's layers: a module imports only from its own layer or below, never in a cycle.

Every import counts, including those deferred into functions (the fast path's lazy
imports) and those under `TYPE_CHECKING`, since each is a dependency the code has
whether or not it runs at start-up. The order is the one `docs/architecture.md`
explains; a new top-level module or package must be placed in `LAYERS` first.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import ROOT

PACKAGE = ROOT / "distrecipe"

LAYERS: tuple[frozenset[str], ...] = (
    frozenset({"cli", "__main__"}),
    frozenset({"commands"}),
    frozenset({"api", "lint", "diff", "launch", "starter"}),
    frozenset({"plan"}),
    frozenset({"translator"}),
    frozenset({"judges"}),
    frozenset({"engines"}),
    frozenset({"job", "recipe", "schemas", "model_shapes"}),
    frozenset({"keys", "source"}),
    frozenset({"errors", "findings", "output", "__init__"}),
)
"""Top first. A unit is a top-level module or package of `distrecipe` (`__init__` is the
package itself: its version). Units in one layer may import each other, but not in a cycle."""



def unit(module: str) -> str:
    """`distrecipe.lint.rules.batch` → `lint`; `distrecipe` → `__init__`."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def layer(name: str) -> int:
    for index, members in enumerate(LAYERS):
        if name in members:
            return index
    raise AssertionError(f"distrecipe.{name} is in no layer: add it to LAYERS in tests/test_layers.py")


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path, module: str) -> Iterator[tuple[str, int]]:
    """Every module the file of `module` imports, anywhere in it (relative ones made absolute)."""
    tree = ast.parse(path.read_text("utf-8"), str(path))
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from ((alias.name, node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            yield module, node.lineno


def edges() -> dict[tuple[str, str], list[str]]:
    """(importer unit, imported unit) → where, for every import across units."""
    found: dict[tuple[str, str], list[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        name = module_name(path)
        source = unit(name)
        for module, line in imports(path, name):
            if module != "distrecipe" and not module.startswith("distrecipe."):
                continue
            target = unit(module)
            if target != source:
                found.setdefault((source, target), []).append(f"{path.relative_to(ROOT)}:{line}")
    return found


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one unit (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return out


def test_no_import_points_up() -> None:
    upward = [f"{where}: distrecipe.{src} imports distrecipe.{dst} from a higher layer"
              for (src, dst), places in sorted(edges().items()) if layer(dst) < layer(src)
              for where in places]
    assert not upward, "\n".join(upward)


def test_no_cycle_within_a_layer() -> None:
    graph: dict[str, set[str]] = {}
    for src, dst in edges():
        if layer(src) == layer(dst):
            graph.setdefault(src, set()).add(dst)
    assert not cycles(graph)


@pytest.mark.parametrize("text, expected", [
    ("def f():\n    from distrecipe.lint.rules import RULES\n", [("distrecipe.lint.rules", 2)]),
    ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import distrecipe.plan\n",
     [("typing", 1), ("distrecipe.plan", 3)]),
    ("from . import deepspeed\nfrom ..keys import get\n",
     [("distrecipe.translator", 1), ("distrecipe.keys", 2)]),
])
def test_imports_sees_lazy_type_checking_and_relative_imports(tmp_path: Path, text: str,
                                                                expected: list[tuple[str, int]]) -> None:
    path = tmp_path / "probe.py"
    path.write_text(text, "utf-8")
    assert list(imports(path, "distrecipe.translator.probe")) == expected


def test_a_cycle_is_found() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
