"""A native config carried to another engine and back, counting what changed without a word.

For a file of engine A: `import` it, `compile` the recipe for engine B, `import` B's file,
`compile` that recipe for A again. Every key whose value differs between the original and
the final file of A (as `distrecipe diff` compares two files of one kind: a key one side
leaves out is the engine's default) must be named by something printed along the way — a
finding or a note of one of the four commands, naming the key or its last part. What no
line names is a silent difference. A step that refuses (exit ≠ 0) is loud, and counted apart.

Only the command line is used, so the same harness measures an older checkout:

    python -m tests.roundtrip                      # this checkout, in-process
    python -m tests.roundtrip --code /tmp/base     # another checkout's distrecipe, one process a command
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "corpus" / "real"
TARGETS = ("deepspeed", "accelerate", "verl", "hf")
MAIN_FILE = {"deepspeed": "ds_config.json", "accelerate": "accelerate_config.yaml",
             "verl": "verl_overrides.txt", "hf": "training_args.json"}
WORLD = "8"
"""Ranks for a file that does not say (a ds_config, TrainingArguments)."""

Run = Callable[[list[str]], tuple[int, str, str]]
"""argv → (exit code, stdout, stderr) of one `distrecipe` command."""


def in_process(argv: list[str]) -> tuple[int, str, str]:
    from distrecipe.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


def subprocess_in(code: Path) -> Run:
    def run(argv: list[str]) -> tuple[int, str, str]:
        done = subprocess.run([sys.executable, "-m", "distrecipe", *argv], cwd=code, capture_output=True,
                              text=True, errors="backslashreplace", check=False)
        return done.returncode, done.stdout, done.stderr
    return run


@dataclass
class Trip:
    source: str
    start: str
    via: str
    outcome: str = "same"
    """`same`, `named` (every difference named), `silent` (some not), or `refused at STEP`."""
    silent: list[str] = field(default_factory=list)
    named: list[str] = field(default_factory=list)


def kind_of(path: Path) -> str | None:
    """The engine a corpus file belongs to (its folder), None for one import cannot read."""
    folder = path.parent.name
    return {"deepspeed": "deepspeed", "accelerate": "accelerate", "hf": "hf", "verl": "verl"}.get(folder)


def trip(run: Run, path: Path, start: str, via: str, work: Path) -> Trip:
    """One file of `start` through `via` and back; `work` is a scratch folder."""
    result = Trip(str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path), start, via)
    said: list[str] = []
    first = work / "r1.yaml"
    code, out, err = run(["import", str(path), "--world", WORLD])
    said.append(err)
    if code != 0:
        result.outcome = "refused at import"
        return result
    first.write_text(out, encoding="utf-8")
    code, _, err = run(["compile", str(first), "--target", via, "-o", str(work / "b")])
    said.append(err)
    if code != 0:
        result.outcome = f"refused at compile --target {via}"
        return result
    code, out, err = run(["import", str(work / "b" / MAIN_FILE[via]), "--world", WORLD])
    said.append(err)
    if code != 0:
        result.outcome = f"refused at import of the {via} file"
        return result
    second = work / "r2.yaml"
    second.write_text(out, encoding="utf-8")
    code, _, err = run(["compile", str(second), "--target", start, "-o", str(work / "a")])
    said.append(err)
    if code != 0:
        result.outcome = f"refused at compile --target {start}"
        return result
    final = work / "a" / MAIN_FILE[start]
    code, out, err = run(["diff", str(path), str(final), "--world", WORLD, "--format", "json"])
    if code not in (0, 1):
        result.outcome = "refused at diff"
        return result
    text = "\n".join(said)
    for change in json.loads(out)["changes"]:
        key = str(change["key"])
        (result.named if named(key, text) else result.silent).append(key)
    result.outcome = "silent" if result.silent else "named" if result.named else "same"
    return result


def named(key: str, text: str) -> bool:
    """Whether `text` names the key: dotted, or by its last part (verl's and Accelerate's
    keys are long; a finding names the setting)."""
    leaf = re.split(r"[.\[]", key.lstrip("+"))[-1].rstrip("]")
    return key in text or re.search(rf"(?<![\w.]){re.escape(leaf)}(?!\w)", text) is not None


def corpus_files() -> Iterator[tuple[Path, str]]:
    for path in sorted(CORPUS.rglob("*")):
        kind = kind_of(path) if path.is_file() and path.suffix != ".csv" else None
        if kind is not None:
            yield path, kind


def trips(run: Run, files: list[tuple[Path, str]]) -> list[Trip]:
    out = []
    for path, start in files:
        for via in TARGETS:
            if via == start:
                continue
            with tempfile.TemporaryDirectory() as tmp:
                out.append(trip(run, path, start, via, Path(tmp)))
    return out


def report(results: list[Trip]) -> str:
    """Per pair of engines: trips, the same, every difference named, silent (keys), refused."""
    lines = ["| from → via | trips | same | all named | silent | silent keys | refused |", "|---|---|---|---|---|---|---|"]
    pairs = sorted({(r.start, r.via) for r in results})
    for start, via in pairs:
        rows = [r for r in results if (r.start, r.via) == (start, via)]
        outcomes = Counter("refused" if r.outcome.startswith("refused") else r.outcome for r in rows)
        keys = sum(len(r.silent) for r in rows)
        lines.append(f"| {start} → {via} | {len(rows)} | {outcomes['same']} | {outcomes['named']} | "
                     f"{outcomes['silent']} | {keys} | {outcomes['refused']} |")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    run: Run = in_process
    if len(argv) == 2 and argv[0] == "--code":
        run = subprocess_in(Path(argv[1]).resolve())
    results = trips(run, list(corpus_files()))
    print(report(results))
    for r in results:
        if r.silent:
            print(f"{r.source} ({r.start} → {r.via} → {r.start}): silent {', '.join(r.silent)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
