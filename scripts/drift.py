"""What the engines' newest releases change: their tables and the corpus's verdicts.

    python scripts/drift.py                           # every engine's newest release
    python scripts/drift.py --release accelerate==1.17.0 --release hf==5.23.0

Not part of `make test`: a release an engine ships must never turn the build red. For
each engine, the newest release on the package index (or the one named) is installed
alone in a scratch directory (`engine_tables.scratch_install`), its table is written
there, and then:

* the table is compared with the installed release's, key by key (`engine_tables.changes`);
* the corpus (`tests/corpus/real/`) is judged again with that release first on the path,
  and every verdict that differs from VERDICTS.csv is printed.

A new release becomes a new table (`scripts/engine_tables.py --release …`) and a
reviewed verdict diff; nothing here writes into the repository. Exit 0 whatever drifted,
1 when a release could not be installed or judged (the message says which).
"""

from __future__ import annotations

import argparse
import csv
import importlib.metadata
import io
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import engine_tables

ROOT = Path(__file__).resolve().parents[1]
VERDICTS = ROOT / "tests" / "corpus" / "real" / "VERDICTS.csv"
JUDGED_BY = {"deepspeed": ("deepspeed", "hf-script"), "accelerate": ("accelerate",),
             "hf": ("hf", "hf-script"), "verl": ("verl",)}
"""Which corpus kinds each engine's verdicts cover (VERDICTS.csv's `kind`)."""


def newest(engine: str) -> str:
    """The newest release of `engine` on the package index (`pip index versions`)."""
    package = engine_tables.ENGINE_PACKAGES[engine]
    argv = [sys.executable, "-m", "pip", "index", "versions", package, "--disable-pip-version-check"]
    done = subprocess.run(argv, capture_output=True, text=True, check=True)
    found = re.search(rf"^{re.escape(package)} \(([^)]+)\)", done.stdout, re.MULTILINE)
    if found is None:
        raise RuntimeError(f"pip index versions {package}: no release in {done.stdout[:200]!r}")
    return found[1]


def base(engine: str) -> tuple[str, dict[str, object]]:
    """The release the corpus's verdicts were judged by (the installed one) and its table."""
    version = importlib.metadata.version(engine_tables.ENGINE_PACKAGES[engine])
    path = engine_tables.TABLES / engine / f"{version}.json"
    if not path.exists():
        raise RuntimeError(f"{engine} {version} is installed but has no table: run scripts/engine_tables.py")
    return version, json.loads(path.read_text())


def verdict_rows(text: str, kinds: tuple[str, ...]) -> dict[str, dict[str, str]]:
    return {row["file"]: row for row in csv.DictReader(io.StringIO(text)) if row["kind"] in kinds}


def drift(engine: str, version: str) -> list[str]:
    """The lines that say what `engine` `version` changes, against the newest stored table."""
    lines: list[str] = []
    installed, stored = base(engine)
    with tempfile.TemporaryDirectory(prefix=f"drift-{engine}-") as scratch:
        root = Path(scratch)
        engine_tables.scratch_install(engine, version, root / "site")
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root / "site"), str(ROOT)])}
        subprocess.run([sys.executable, engine_tables.__file__, "--out", str(root / "tables"), engine],
                       check=True, env=env, capture_output=True, text=True)
        [written] = (root / "tables" / engine).glob("*.json")
        fresh = json.loads(written.read_text())
        changed = list(engine_tables.changes(stored, fresh))
        lines.append(f"{engine} {fresh['version']} against the installed {installed}: "
                     f"{len(changed)} change{'s' if len(changed) != 1 else ''}")
        lines += [f"  table: {line}" for line in changed]
        out = str(root / "VERDICTS.csv")
        judged = subprocess.run([sys.executable, "-m", "tests.corpus_verdicts", "--out", out],
                                cwd=ROOT, env=env, capture_output=True, text=True)
        if judged.returncode != 0:
            last = judged.stderr.strip().splitlines()[-1:]
            lines.append(f"  verdicts: the corpus could not be judged: {last}")
            return lines
        before = verdict_rows(VERDICTS.read_text(), JUDGED_BY[engine])
        after = verdict_rows((root / "VERDICTS.csv").read_text(), JUDGED_BY[engine])
        moved = 0
        for name in sorted(before.keys() | after.keys()):
            old, new = before.get(name, {}), after.get(name, {})
            if (old.get("verdict"), old.get("message")) != (new.get("verdict"), new.get("message")):
                moved += 1
                lines.append(f"  verdict: {name}: {old.get('verdict')} → {new.get('verdict')}"
                             f"{': ' + new['message'] if new.get('message') else ''}")
        lines.append(f"  verdicts: {moved} of {len(after)} {'/'.join(JUDGED_BY[engine])} files changed")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--release", action="append", default=[], metavar="ENGINE==VERSION",
                        help="judge this release instead of the newest (repeatable)")
    args = parser.parse_args(argv)
    wanted: dict[str, str | None] = dict.fromkeys(engine_tables.ENGINE_PACKAGES)
    if args.release:
        wanted = {}
        for item in args.release:
            engine, _, version = item.partition("==")
            if engine not in engine_tables.ENGINE_PACKAGES or not version:
                names = ", ".join(sorted(engine_tables.ENGINE_PACKAGES))
                parser.error(f"--release takes ENGINE==VERSION with ENGINE one of {names}")
            wanted[engine] = version
    status = 0
    for engine, version in wanted.items():
        try:
            version = version or newest(engine)
            installed, _ = base(engine)
            if version == installed:
                print(f"{engine} {version}: the release installed and judged here; nothing drifted")
                continue
            print("\n".join(drift(engine, version)), flush=True)
        except (subprocess.CalledProcessError, RuntimeError) as exc:
            detail = getattr(exc, "stderr", None) or str(exc)
            print(f"{engine}: could not read release {version}: {str(detail).strip()[-500:]}")
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
