"""Which kind of training program `launch` starts, read from the script itself.

The recipe reaches each kind of program differently (the Trainer wants its own
flags, a raw DeepSpeed script `--deepspeed_config`, an Accelerate script the
launcher's config file), so the kind is decided before anything is built: from
`--program-kind` or `launch.program_kind` when given, else from what the script
imports and calls, found by parsing (never running or importing) what the one bounded
reader (`source.read_text`) gives. The decision carries its reason, which `--dry-run` shows.

verl and OpenRLHF are entry points, not scripts: their backend is their kind, and
`-m openrlhf.cli.train_ppo_ray` is OpenRLHF's whatever launcher was defaulted (an `rl`
recipe's default is verl's), so `launch R -- -m openrlhf.cli.train_ppo_ray …` runs it under
OpenRLHF's launcher. Nothing in a recipe says OpenRLHF otherwise (its `rl` section is
verl's as much as OpenRLHF's), so the module named is the one honest signal.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from distrecipe.engines.native import is_file
from distrecipe.engines.openrlhf import PPO_ENTRY
from distrecipe.engines.trl import trainer_names
from distrecipe.errors import DistrecipeError, LaunchError
from distrecipe.launch.spec import TINY_TRAINER, Program
from distrecipe.recipe import Backend, ProgramKind
from distrecipe.source import read_text
from distrecipe.translator.programs import COMPATIBLE

BACKEND_KIND: dict[Backend, ProgramKind] = {
    "deepspeed": "deepspeed",
    "torchrun": "torchrun",
    "accelerate": "accelerate",
    "accelerate-deepspeed": "accelerate",
    "verl": "verl",
    "openrlhf": "openrlhf",
}
"""The program each launcher usually runs: the kind when the script cannot be read."""

MARKERS: tuple[tuple[ProgramKind, str, frozenset[str]], ...] = (
    ("hf", "transformers", frozenset({"HfArgumentParser", "Trainer", "TrainingArguments",
                                      "Seq2SeqTrainer", "Seq2SeqTrainingArguments"})),
    ("hf", "trl", trainer_names()),
    ("accelerate", "accelerate", frozenset({"Accelerator"})),
    ("deepspeed", "deepspeed", frozenset({"initialize", "add_config_arguments"})),
)
"""(kind, package, names): a script using one of a package's names is that kind.
The first kind found in this order wins (a Trainer script may also import
Accelerate's helpers; a Trainer runs DeepSpeed itself)."""


@dataclass(frozen=True, slots=True)
class KindChoice:
    kind: ProgramKind
    reason: str


def module_file(module: str, search: Sequence[str]) -> Path | None:
    """Where `python -m module` would find its source, without importing anything."""
    parts = module.split(".")
    for entry in search:
        base = Path(entry or ".", *parts)
        for candidate in (base.with_suffix(".py"), base / "__main__.py"):
            if is_file(candidate):
                return candidate
    return None


def _uses(tree: ast.AST, package: str, names: frozenset[str]) -> Iterator[tuple[int, str]]:
    """(line, how) for each use of `package`'s `names`: imported by name, or `alias.name`."""
    aliases: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == package:
            for alias in node.names:
                if alias.name in names:
                    yield node.lineno, f"imports {alias.name} from {node.module}"
        elif isinstance(node, ast.Import):
            # `import deepspeed.ops` binds `deepspeed`; `import deepspeed as ds` binds `ds`.
            aliases.update(a.asname or package for a in node.names if a.name.split(".")[0] == package)
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and node.attr in names
                and isinstance(node.value, ast.Name) and node.value.id in aliases):
            yield node.lineno, f"uses {node.value.id}.{node.attr}"


def scan(source: str, name: str) -> KindChoice | None:
    """The kind a script's source shows, or None when it shows no engine's entry point."""
    tree = ast.parse(source, filename=name)
    for kind, package, names in MARKERS:
        uses = sorted(_uses(tree, package, names))
        if uses:
            line, how = uses[0]
            return KindChoice(kind, f"{name}:{line} {how}")
    return None


def infer(program: Program, backend: Backend) -> KindChoice:
    """The program's kind from its source; the backend's usual one when it cannot be read."""
    usual = BACKEND_KIND[backend]
    if backend == "openrlhf":
        return KindChoice("openrlhf", "launch.backend is openrlhf")
    if program.module and program.target == PPO_ENTRY:
        return KindChoice("openrlhf", f"the program is -m {PPO_ENTRY}")
    if backend == "verl":
        return KindChoice("verl", "launch.backend is verl")
    if program.target == TINY_TRAINER:
        return KindChoice(usual, f"distrecipe's reference trainer under {backend}")
    path = module_file(program.target, [".", *sys.path]) if program.module else Path(program.target)
    if path is None:
        return KindChoice(usual, f"module {program.target} not found here; the {backend} launcher's usual")
    try:  # the one bounded reader: regular files only, never blocking, never past its limit
        text = read_text(path)
    except DistrecipeError as exc:
        return KindChoice(usual, f"cannot read the script ({exc.message}); the {backend} launcher's usual")
    try:
        found = scan(text, str(path))
    except (SyntaxError, ValueError, RecursionError) as exc:
        return KindChoice(usual, f"cannot parse {path} ({exc}); the {backend} launcher's usual")
    return found or KindChoice("torchrun", f"{path} uses no Trainer, Accelerator or deepspeed.initialize")


def backend_for(kind: ProgramKind, backend: Backend, *, defaulted: bool, strategy: str) -> Backend:
    """The launcher for `kind`: the plan's, or, when the plan only defaulted it, one that fits.

    An explicitly chosen launcher that cannot serve the kind is an error, never a switch.
    """
    if backend in COMPATIBLE[kind]:
        return backend
    if defaulted and kind == "accelerate":
        return "accelerate-deepspeed" if strategy == "zero" else "accelerate"
    if defaulted and kind == "openrlhf":
        return "openrlhf"
    raise LaunchError(f"program kind {kind} cannot run under launch.backend {backend}: use one of "
                      f"{', '.join(COMPATIBLE[kind])} (launch.backend or --target), or --program-kind")
