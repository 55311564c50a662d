"""The package's layers: a module imports only from its own layer or below, never in a cycle.

Nor do modules import each other in a circle within a unit, and the planner imports no
emitter. Every import counts, including those deferred into functions (the fast path's lazy
imports) and those under `TYPE_CHECKING`, since each is a dependency the code has
whether or not it runs at start-up. The order is the one `docs/architecture.md`
explains; a new top-level module or package must be placed in `LAYERS` first.
"""

from __future__ import annotations

import ast
from collections.abc import Collection, Iterator
from pathlib import Path

import pytest

from distrecipe.engines import ENGINES
from distrecipe.translator.targets import TARGETS
from tests.conftest import ROOT

PACKAGE = ROOT / "distrecipe"

LAYERS: tuple[frozenset[str], ...] = (
    frozenset({"cli", "__main__"}),
    frozenset({"commands"}),
    frozenset({"api", "lint", "diff", "launch", "starter"}),
    frozenset({"plan", "checkpoints"}),
    frozenset({"translator"}),
    frozenset({"judges"}),
    frozenset({"engines"}),
    frozenset({"job", "recipe", "schemas", "model_shapes"}),
    frozenset({"keys", "source", "overrides"}),
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


def modules() -> dict[str, Path]:
    """Every module of the package (a package is its `__init__`) → its file."""
    return {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def imports(path: Path, module: str) -> Iterator[tuple[str, int]]:
    """Every name the file of `module` imports, anywhere in it (relative ones made absolute).

    `from a import b` yields `a.b`, which is the module `a.b` or a name defined in `a`:
    `owner` tells which, so importing a submodule by name counts as importing it.
    """
    tree = ast.parse(path.read_text("utf-8"), str(path))
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from ((alias.name, node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            yield from ((module if alias.name == "*" else f"{module}.{alias.name}", node.lineno)
                        for alias in node.names)


def owner(name: str, known: Collection[str]) -> str:
    """The module `name` is, or is defined in: its longest prefix among `known`."""
    while name not in known and "." in name:
        name = name.rpartition(".")[0]
    return name


def links() -> Iterator[tuple[str, str, str]]:
    """(importing module, imported module, where) for every import of one module of the
    package by another."""
    known = modules()
    for name, path in known.items():
        for imported, line in imports(path, name):
            if imported != "distrecipe" and not imported.startswith("distrecipe."):
                continue
            target = owner(imported, known)
            if target != name:
                yield name, target, f"{path.relative_to(ROOT)}:{line}"


def edges() -> dict[tuple[str, str], list[str]]:
    """(importer unit, imported unit) → where, for every import across units."""
    found: dict[tuple[str, str], list[str]] = {}
    for source, target, where in links():
        if unit(source) != unit(target):
            found.setdefault((unit(source), unit(target)), []).append(where)
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


def test_no_cycle_between_modules() -> None:
    """Two modules that import each other share a fact that has no home of its own; a lazy
    import only hides the circle from Python."""
    graph: dict[str, set[str]] = {}
    for source, target, _ in links():
        graph.setdefault(source, set()).add(target)
    circles = ["{" + ", ".join(circle) + "}" for circle in cycles(graph)]
    assert not circles, "modules that import each other in a circle: " + "; ".join(circles)


EMITTERS = frozenset(f"distrecipe.translator.{name}" for name in TARGETS if name in ENGINES)
"""The emitter modules: one per engine among the compile targets (`all` is their summary)."""


def test_the_planner_imports_no_emitter() -> None:
    """`plan` reads an engine's facts from `engines/`, where the emitter reads them too: a fact
    read from an emitter has two readers and no home of its own."""
    assert EMITTERS and modules().keys() >= EMITTERS
    found = {f"{where}: {source} imports the emitter {target}" for source, target, where in links()
             if unit(source) == "plan" and target in EMITTERS}
    assert not found, "\n".join(sorted(found))


@pytest.mark.parametrize("text, expected", [
    ("def f():\n    from distrecipe.lint.rules import RULES\n", [("distrecipe.lint.rules.RULES", 2)]),
    ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import distrecipe.plan\n",
     [("typing.TYPE_CHECKING", 1), ("distrecipe.plan", 3)]),
    ("from . import deepspeed\nfrom ..keys import get, section\n",
     [("distrecipe.translator.deepspeed", 1), ("distrecipe.keys.get", 2), ("distrecipe.keys.section", 2)]),
])
def test_imports_sees_lazy_type_checking_and_relative_imports(tmp_path: Path, text: str,
                                                                expected: list[tuple[str, int]]) -> None:
    path = tmp_path / "probe.py"
    path.write_text(text, "utf-8")
    assert list(imports(path, "distrecipe.translator.probe")) == expected


@pytest.mark.parametrize("name, expected", [
    ("distrecipe.translator.carry", "distrecipe.translator.carry"),  # a submodule imported by name
    ("distrecipe.keys.get", "distrecipe.keys"),
    ("distrecipe.lint.rules.RULES", "distrecipe.lint.rules"),  # a package's own name
    ("distrecipe.__version__", "distrecipe"),
])
def test_an_imported_name_belongs_to_its_module(name: str, expected: str) -> None:
    assert owner(name, modules()) == expected


def test_a_cycle_is_found() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
