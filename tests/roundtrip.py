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
ENGINE_CHOICE = {"accelerate": (("distributed_type",), ("distributed_type", "fsdp_config", "deepspeed_config",
                                                       "parallelism_config")),
                 "hf": (("fsdp", "deepspeed"), ("fsdp", "deepspeed", "fsdp_config")),
                 "deepspeed": (("zero_optimization.stage",), ("zero_optimization",))}
"""The keys that choose a file's engine, and the sections that belong to that choice: a
changed engine (named by its key, or as the recipe's strategy) changes them all."""
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
    why: str = ""
    """The refusing step's error line."""


def kind_of(path: Path) -> str | None:
    """The engine a corpus file belongs to (its folder), None for one import cannot read."""
    folder = path.parent.name
    return {"deepspeed": "deepspeed", "accelerate": "accelerate", "hf": "hf", "verl": "verl"}.get(folder)


def trip(run: Run, path: Path, start: str, via: str, work: Path, world: list[str] | None = None) -> Trip:
    """One file of `start` through `via` and back; `work` is a scratch folder; `world` the
    `--world`/`--nodes` of a file that does not state its own (default `WORLD`)."""
    result = Trip(str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path), start, via)
    said: list[str] = []
    first = work / "r1.yaml"
    code, out, err = run(["import", str(path), *(world or ["--world", WORLD])])
    said.append(err)
    if code != 0:
        result.outcome, result.why = "refused at import", _error(err)
        return result
    first.write_text(out, encoding="utf-8")
    world = _world(out)  # the same cluster all the way: a file that cannot say it is told it
    code, _, err = run(["compile", str(first), "--target", via, "-o", str(work / "b")])
    said.append(err)
    if code != 0:
        result.outcome, result.why = f"refused at compile --target {via}", _error(err)
        return result
    code, out, err = run(["import", str(work / "b" / MAIN_FILE[via]), *world])
    said.append(err)
    if code != 0:
        result.outcome, result.why = f"refused at import of the {via} file", _error(err)
        return result
    second = work / "r2.yaml"
    second.write_text(out, encoding="utf-8")
    code, _, err = run(["compile", str(second), "--target", start, "-o", str(work / "a")])
    said.append(err)
    if code != 0:
        result.outcome, result.why = f"refused at compile --target {start}", _error(err)
        return result
    final = work / "a" / MAIN_FILE[start]
    code, out, err = run(["diff", str(path), str(final), *world, "--format", "json"])
    if code not in (0, 1):
        result.outcome = "refused at diff"
        return result
    text = "\n".join(said)
    keys = [str(change["key"]) for change in json.loads(out)["changes"]]
    choice, sections = ENGINE_CHOICE.get(start, ((), ()))
    engine_named = any(key in keys for key in choice) and (
        any(named(key, text, start) for key in choice if key in keys) or _word("strategy", text))
    for key in keys:
        # A section that follows the file's engine choice is named with that choice.
        follows = engine_named and key.split(".")[0] in sections
        (result.named if follows or named(key, text, start) else result.silent).append(key)
    result.outcome = "silent" if result.silent else "named" if result.named else "same"
    return result


def _world(recipe: str) -> list[str]:
    """`--world`/`--nodes` of an imported recipe's cluster."""
    import yaml

    cluster = (yaml.safe_load(recipe) or {}).get("cluster") or {}
    nodes, gpus = cluster.get("nodes", 1), cluster.get("gpus_per_node")
    return ["--world", str(nodes * gpus), "--nodes", str(nodes)] if isinstance(gpus, int) else ["--world", WORLD]


def _error(err: str) -> str:
    lines = [line for line in err.splitlines() if ": error: " in line]
    return lines[-1].split(": error: ", 1)[1] if lines else err.strip()[-200:]


def named(key: str, text: str, kind: str) -> bool:
    """Whether `text` names the native key of `kind`: dotted, by its last part (verl's and
    Accelerate's keys are long), or as the recipe field the carry table says it is (a
    finding speaks the recipe's vocabulary: `optimizer.lr` for `learning_rate`)."""
    from distrecipe.translator.carry import FIELDS

    leaf = re.split(r"[.\[]", key.lstrip("+"))[-1].rstrip("]")
    if key in text or _word(leaf, text):
        return True
    fields = [f for f, row in FIELDS.items()
              if key in row.cell(kind).native or re.search(rf"\b{re.escape(leaf)}\b", row.cell(kind).native)]  # type: ignore[arg-type]
    return any(_word(f, text) for f in fields)


def _word(word: str, text: str) -> bool:
    return re.search(rf"(?<![\w.]){re.escape(word)}(?![\w])", text) is not None


def generated_trip(run: Run, doc: dict[str, object], start: str, via: str, work: Path) -> Trip:
    """A generated recipe compiled for `start`, then that file's trip through `via`."""
    import yaml

    recipe = work / "r0.yaml"
    recipe.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    code, _, err = run(["compile", str(recipe), "--target", start, "-o", str(work / "s")])
    if code != 0:
        return Trip("generated", start, via, f"refused at compile --target {start} (the start)", why=_error(err))
    cluster = doc["cluster"]
    assert isinstance(cluster, dict)
    nodes, gpus = cluster["nodes"], cluster["gpus_per_node"]
    return trip(run, work / "s" / MAIN_FILE[start], start, via, work,
                ["--world", str(nodes * gpus), "--nodes", str(nodes)])


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
    if len(argv) >= 2 and argv[0] == "--code":
        run = subprocess_in(Path(argv[1]).resolve())
    results = trips(run, list(corpus_files()))
    print(report(results))
    if "--why" in argv:
        reasons = Counter(f"{r.start} → {r.via}: {r.outcome}: {re.sub(r'[0-9]+', 'N', r.why)[:150]}"
                          for r in results if r.outcome.startswith("refused"))
        for reason, count in reasons.most_common():
            print(f"{count:4}  {reason}")
    for r in results:
        if r.silent:
            print(f"{r.source} ({r.start} → {r.via} → {r.start}): silent {', '.join(r.silent)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
