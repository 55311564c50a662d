"""Write a release's RUNTIME_KEYS.csv: the keys its config models report when imported.

    pip install --no-deps --target /tmp/scratch-axolotl-0.19.0 axolotl==0.19.0
    PYTHONPATH=/tmp/scratch-axolotl-0.19.0 python scripts/schema_runtime_keys.py axolotl 0.19.0
    pip install --no-deps --target /tmp/scratch-llamafactory-0.9.5 llamafactory==0.9.5
    DISABLE_VERSION_CHECK=1 PYTHONPATH=/tmp/scratch-llamafactory-0.9.5 \\
        python scripts/schema_runtime_keys.py llamafactory 0.9.5

The independent check of `scripts/schema_tables.py`: that script reads the stored schema
sources with `ast`; this one imports the released package (installed without its
dependencies in a scratch directory, beside distrecipe's own transformers and pydantic,
never into the environment) and lists what pydantic's `model_fields` and
`dataclasses.fields` report: each key, its annotation, `repr` of its default (80
characters), the class declaring it and its source file. Run by hand when a release is
added; `tests/test_schema_tables.py` holds the AST-read tables to the CSV.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import importlib
import inspect
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ROOT / "tests" / "corpus" / "schemas"


def _where(cls: type, package: str) -> str:
    """`src/axolotl/utils/schemas/config.py` for a class of the package; `transformers …` otherwise."""
    module = sys.modules[cls.__module__]
    path = Path(inspect.getfile(module))
    parts = path.parts[path.parts.index(package):] if package in path.parts else (path.name,)
    if package in ("axolotl", "llamafactory"):
        return "src/" + "/".join(parts)
    return f"{package} {'/'.join(parts)}"


def _declaring(cls: type, name: str) -> type:
    """The most derived class in `cls`'s MRO whose own body declares `name`."""
    return next(base for base in cls.__mro__ if name in inspect.get_annotations(base))


def axolotl(origin: str) -> list[dict[str, Any]]:
    config = importlib.import_module("axolotl.utils.schemas.config")
    model = config.AxolotlInputConfig
    rows = []
    for name, info in model.model_fields.items():
        owner = _declaring(model, name)
        rows.append({"key": name, "type": str(info.annotation).replace("typing.", ""),
                     "default": repr(info.default)[:80], "model": owner.__name__,
                     "source": _where(owner, "axolotl"), "commit": origin})
    return rows


def llamafactory(origin: str) -> list[dict[str, Any]]:
    parser = importlib.import_module("llamafactory.hparams.parser")
    transformers = importlib.import_module("transformers")
    rows = []
    seen: set[str] = set()
    theirs = f"transformers {transformers.__version__} (installed)"
    for root in parser._TRAIN_ARGS:
        for f in dataclasses.fields(root):
            if f.name in seen or not f.init:
                continue
            seen.add(f.name)
            owner = _declaring(root, f.name)
            ours = owner.__module__.startswith("llamafactory")
            rows.append({"key": f.name, "type": str(f.type)[:80], "default": repr(f.default)[:80],
                         "dataclass": root.__name__, "declared_in": owner.__name__,
                         "source": _where(owner, "llamafactory" if ours else "transformers"),
                         "commit": origin if ours else theirs})
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("tool", choices=["axolotl", "llamafactory"])
    parser.add_argument("release", help="the folder under tests/corpus/schemas/TOOL/")
    parser.add_argument("--stdout", action="store_true", help="print the CSV instead of writing it")
    args = parser.parse_args(argv)
    folder = SOURCES / args.tool / args.release
    with (folder / "PROVENANCE.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    origin = rows[0]["commit"] or rows[0]["pypi_file"]
    installed = importlib.import_module(args.tool)
    version = getattr(installed, "__version__", None)
    found = axolotl(origin) if args.tool == "axolotl" else llamafactory(origin)
    out = sys.stdout if args.stdout else (folder / "RUNTIME_KEYS.csv").open("w", newline="")
    writer = csv.DictWriter(out, fieldnames=list(found[0]))
    writer.writeheader()
    writer.writerows(found)
    print(f"{args.tool} {version}: {len(found)} keys", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
