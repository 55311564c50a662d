"""Re-resolve the lock files `make demo` and `make test` install from.

    python scripts/lock.py            # rewrite requirements/*.txt from pyproject.toml's ranges
    python scripts/lock.py test       # one of them (demo, test, skypilot)

Each lock is every package one install set needs, at one exact version, so a fresh clone
installs today what it installed yesterday, whatever the engines released since. pip
resolves each set in a scratch venv (`pip install --dry-run --report`: nothing is
installed) from the ranges in pyproject.toml; the lock is then installed with
`--no-deps` (by uv, the Makefile's installer), which skips the resolver too, and `uv pip
check` proves it whole. torch is written without its local label: `torch==2.13.0` takes
the CPU build where this machine's wheel folder has it. Moving an engine to a new release is this command, its
table (`scripts/engine_tables.py`) and the reviewed verdict diff (`make drift`).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LOCKS = ROOT / "requirements"
TORCH = "torch==2.13.0"
"""The CPU build (the Makefile's TORCH): an unpinned torch pulls a multi-GB CUDA build."""
SETS = {
    "test": (TORCH, ".[test,dev]"),
    "demo": (TORCH, ".[deepspeed]"),
    "skypilot": ("skypilot==0.14.1",),
}
"""Lock name → what pip is asked to install, in the order they are resolved; `skypilot`
has a venv of its own (Makefile)."""
WITHIN = {"demo": "test"}
"""The demo installs into the same .venv as the tests: it is resolved within the test
lock (as pip constraints), so `make demo` after `make test` changes no version."""
HEADER = "# {name}: written by `python scripts/lock.py` from pyproject.toml; installed with --no-deps.\n"


def resolve(requirements: tuple[str, ...], within: Path | None = None) -> list[str]:
    """`name==version` for every package pip would install for `requirements` (within the
    lock file `within`, as constraints), sorted."""
    with tempfile.TemporaryDirectory(prefix="lock-") as scratch:
        venv.create(scratch, with_pip=True)
        python = str(Path(scratch) / "bin" / "python")
        report = Path(scratch) / "report.json"
        constraint = ("--constraint", str(within)) if within else ()
        subprocess.run([python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--dry-run",
                        "--ignore-installed", "--report", str(report), *constraint, *requirements],
                       check=True, cwd=ROOT)
        found = json.loads(report.read_text())["install"]
    pins = []
    for item in found:
        name, version = item["metadata"]["name"], item["metadata"]["version"]
        if name.lower() == "distrecipe":
            continue
        pins.append(f"{name}=={version.split('+')[0]}")
    return sorted(pins, key=str.lower)


def render(name: str, pins: list[str]) -> str:
    return HEADER.format(name=name) + "".join(f"{pin}\n" for pin in pins)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("sets", nargs="*", choices=[[], *SETS], help="some of the locks (default: all)")
    args = parser.parse_args(argv)
    for name in args.sets or list(SETS):
        within = LOCKS / f"{WITHIN[name]}.txt" if name in WITHIN else None
        text = render(name, resolve(SETS[name], within))
        path = LOCKS / f"{name}.txt"
        LOCKS.mkdir(exist_ok=True)
        path.write_text(text)
        print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
