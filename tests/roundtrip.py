"""A native config carried to another engine and back, counting what changed without a word.

For a file of engine A: `import` it, `compile` the recipe for engine B, `import` B's file,
`compile` that recipe for A again. B may be A: the file imported and compiled back. Every key whose value differs between the original and
the final file of A (as `distrecipe diff` compares two files of one kind: a key one side
leaves out is the engine's default) must be named by something printed along the way — a
finding or a note of one of the four commands, naming the key the user wrote (dotted, or its
last part): a line that names only the recipe's field for it (`grad_clip` for
`gradient_clipping`) leaves the user to translate, and does not count. What no line names is
a silent difference. A step that refuses (exit ≠ 0) is loud, and counted apart.

A corpus file that names a companion (an Accelerate YAML's `deepspeed_config_file`, a
TrainingArguments file's `deepspeed`) travels with it: the companion, stored in the corpus
under its own repository's path (`PROVENANCE.csv`), is put where the reference finds it.

Only the command line is used, so the same harness measures an older checkout:

    python -m tests.roundtrip                      # this checkout, in-process
    python -m tests.roundtrip --code /tmp/base     # another checkout's distrecipe, one process a command
    python -m tests.roundtrip --rl                 # tests/corpus/rl: TRL configs, OpenRLHF command lines
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
RL_CORPUS = ROOT / "tests" / "corpus" / "rl"
TARGETS = ("deepspeed", "accelerate", "verl", "hf")
RL_TARGETS = ("trl", "openrlhf")
"""The RL trainers' targets: a TRL config (beside the Accelerate config that starts it at the
recipe's world) and OpenRLHF's command line. `diff` compares their files as recipes, so the
trip compares them key by key itself (`native_changes`)."""
MAIN_FILE = {"deepspeed": "ds_config.json", "accelerate": "accelerate_config.yaml",
             "verl": "verl_overrides.txt", "hf": "training_args.json", "trl": "grpo_config.yaml",
             "openrlhf": "openrlhf_train.sh"}
ALTERNATE = {"trl": "sft_config.yaml"}
"""The main file a target writes in place of `MAIN_FILE`'s (TRL's SFT config, for a recipe without `rl`)."""
ENGINE_CHOICE = {"accelerate": (("distributed_type",), ("distributed_type", "fsdp_config", "deepspeed_config",
                                                       "parallelism_config", "mixed_precision", "fsdp_version")),
                 "hf": (("fsdp", "deepspeed"), ("fsdp", "deepspeed", "fsdp_config", "fsdp_version")),
                 "deepspeed": (("zero_optimization.stage",), ("zero_optimization",))}
"""The keys that choose a file's engine, and the sections that belong to that choice: a
changed engine (named by its key) changes them all. Between files of two kinds `diff` compares
recipes: the engine choice is `strategy`, and `fsdp_version` (which FSDP `fsdp` runs) follows
it. Accelerate's `mixed_precision` is one:
beside a `deepspeed_config_file` the ds_config holds the precision, and Accelerate refuses it."""
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
    path = with_companions(path, work)
    said: list[str] = []
    first = work / "r1.yaml"
    code, out, err = run(["import", str(path), *(world or ["--world", WORLD])])
    said.append(err)
    if code != 0:
        result.outcome, result.why = "refused at import", _error(err)
        return result
    first.write_text(out, encoding="utf-8")
    result.start = _kind_read(out) or start  # an Axolotl or LLaMA-Factory YAML goes back as hf
    world = _world(out)  # the same cluster all the way: a file that cannot say it is told it
    code, _, err = run(["compile", str(first), "--target", via, "-o", str(work / "b")])
    said.append(err)
    if code != 0:
        result.outcome, result.why = f"refused at compile --target {via}", _error(err)
        return result
    code, out, err = run(["import", str(main_file(work / "b", via)), *world])
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
    final = main_file(work / "a", start)
    if start in RL_TARGETS:
        keys = native_changes(start, path, final)
    else:
        code, out, err = run(["diff", str(path), str(final), *world, "--format", "json"])
        if code not in (0, 1):
            result.outcome = "refused at diff"
            return result
        keys = [str(change["key"]) for change in json.loads(out)["changes"]]
    text = "\n".join(said)
    choice, sections = ENGINE_CHOICE.get(start, ((), ()))
    engine_named = any(named(key, text) for key in choice if key in keys) or (
        result.start != start and "strategy" in keys and named_field("strategy", text, start))
    for key in keys:
        # A section that follows the file's engine choice is named with that choice.
        follows = engine_named and key.split(".")[0] in sections
        said_so = named_field(key, text, start) if result.start != start else named(key, text)
        (result.named if follows or said_so else result.silent).append(key)
    result.outcome = "silent" if result.silent else "named" if result.named else "same"
    return result


def main_file(folder: Path, target: str) -> Path:
    """The file of `target` that `compile -o folder` wrote and a trip reads back."""
    path = folder / MAIN_FILE[target]
    return folder / ALTERNATE[target] if target in ALTERNATE and not path.is_file() else path


def native_changes(kind: str, before: Path, after: Path) -> list[str]:
    """The keys whose values differ between two TRL configs or two OpenRLHF command lines, as
    the trainer reads them: a key one side leaves out is the parser's default there (TRL's
    dataclasses', OpenRLHF's argparse's); an OpenRLHF option is compared by its dest and
    named as the first side writes it."""
    from distrecipe.translator.native import same

    sides = [_options(kind, path) for path in (before, after)]
    keys: list[str] = []
    for key in sorted(set(sides[0]) | set(sides[1])):
        values = [side[key][1] if key in side else _default(kind, key, sides) for side in sides]
        if not same(values[0], values[1]) and not _equal_words(values[0], values[1]):
            keys.append(next(side[key][0] for side in sides if key in side))
    return keys


def _options(kind: str, path: Path) -> dict[str, tuple[str, object]]:
    """A TRL config's leaves (dotted, `env` aside) or an OpenRLHF command line's options
    by dest, each as (the name written, its value)."""
    from distrecipe.engines.openrlhf import entry, read_command
    from distrecipe.translator.native import leaves

    text = path.read_text(encoding="utf-8")
    if kind == "trl":
        import yaml

        data = yaml.safe_load(text) or {}
        return {".".join(map(str, p)): (".".join(map(str, p)), v) for p, v in leaves(data) if p[0] != "env"}
    doc = read_command(text, str(path))
    assert doc is not None, path
    [(module, options)] = doc.data.items()
    known = entry(module)
    assert known is not None, module
    out: dict[str, tuple[str, object]] = {}
    for written, value in options.items():
        option = known.resolve(written)
        out[known.options[option]["dest"] if option is not None else written] = (written, value)
    out[" entry"] = ("entry", module)
    return out


def _default(kind: str, key: str, sides: list[dict[str, tuple[str, object]]]) -> object:
    from distrecipe.engines import openrlhf, trl

    if kind == "trl":
        return trl.command_of(sides[0]).default(key.split(".")[0]) if "." not in key else None
    known = openrlhf.entry(str(sides[0].get(" entry", ("", ""))[1]))
    return None if known is None else known.default(key)


def _equal_words(a: object, b: object) -> bool:
    """A command line's word and a parser's typed default that say the same (`8` and 8, `1e-6` and 1e-06)."""
    if isinstance(a, bool) or isinstance(b, bool) or a is None or b is None:
        return False
    try:
        return float(str(a)) == float(str(b))
    except ValueError:
        return str(a) == str(b)


def _kind_read(recipe: str) -> str | None:
    """The kind `import` read a file as, from the header it writes (`... (llamafactory).`)."""
    match = re.match(r"# Imported by distrecipe from .* \((\w+)\)\.\n", recipe)
    return match.group(1) if match else None


def named_field(key: str, text: str, engine: str) -> bool:
    """Whether `text` names a recipe field `diff` reports between files of two kinds (an
    Axolotl or LLaMA-Factory YAML and the TrainingArguments it becomes): by a key the input's
    engine writes it as (`learning_rate`), else, where that engine has none, by the field."""
    from distrecipe.translator.carry import FIELDS, native_keys

    if key.startswith("native."):  # native.ENGINE.key: the user's own key
        return named(key.split(".", 2)[2], text)
    spellings = [k for e, ks in native_keys(key) if e == engine for k in ks] if key in FIELDS else []
    # A field the input's engine has no key for is not a value its author wrote (the
    # recipe's default of a section that went, optimizer.state_dtype): the field is named.
    return any(named(k, text) for k in spellings) if spellings else True


REFERENCES = {"accelerate": ("deepspeed_config", "deepspeed_config_file"), "hf": ("deepspeed",)}
"""Where a file of each kind names its companion (the ds_config)."""


def provenance() -> dict[str, tuple[str, str]]:
    """Each corpus file's name → (repository, path in it), from the folders' `PROVENANCE.csv`."""
    import csv

    out: dict[str, tuple[str, str]] = {}
    for table in sorted(CORPUS.glob("*/PROVENANCE.csv")):
        with table.open(encoding="utf-8", newline="") as rows:
            for row in csv.DictReader(rows):
                out[row["file"]] = (row["repo"], row["path"])
    return out


def with_companions(path: Path, work: Path) -> Path:
    """`path`, or a copy of it in its repository's layout under `work` beside the companion
    it names, when the corpus stores that companion (else `path`: import says it is missing).

    The companion goes where each reader looks: beside the referring file (Accelerate) and
    under the repository's root, marked by `.git` (the Trainer's tools, run from there)."""
    import posixpath

    import yaml

    kind = kind_of(path)
    if kind not in REFERENCES or not path.resolve().is_relative_to(CORPUS):
        return path
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError):
        return path
    ref: object = data
    for part in REFERENCES[kind]:
        ref = ref.get(part) if isinstance(ref, dict) else None
    stored = provenance()
    if not isinstance(ref, str) or path.name not in stored or (path.parent / ref).is_file():
        return path
    repo, at = stored[path.name]
    wanted = {posixpath.normpath(posixpath.join(posixpath.dirname(at), ref)), posixpath.normpath(ref)}
    found = [name for name, (other, where) in stored.items() if other == repo and (
        where in wanted or any(where.endswith("/" + w.lstrip("./")) for w in wanted))]
    companion = next((p for name in found for p in CORPUS.glob(f"*/{name}")), None)
    if companion is None:
        return path
    root = work / "repo"
    (root / ".git").mkdir(parents=True, exist_ok=True)
    copy = root / at
    for place in (copy.parent / ref, root / ref, copy):
        place.parent.mkdir(parents=True, exist_ok=True)
        source = path if place == copy else companion
        place.write_bytes(source.read_bytes())
    return copy


def _world(recipe: str) -> list[str]:
    """`--world`/`--nodes` of an imported recipe's cluster."""
    import yaml

    cluster = (yaml.safe_load(recipe) or {}).get("cluster") or {}
    nodes, gpus = cluster.get("nodes", 1), cluster.get("gpus_per_node")
    return ["--world", str(nodes * gpus), "--nodes", str(nodes)] if isinstance(gpus, int) else ["--world", WORLD]


def _error(err: str) -> str:
    lines = [line for line in err.splitlines() if ": error: " in line]
    return lines[-1].split(": error: ", 1)[1] if lines else err.strip()[-200:]


def named(key: str, text: str) -> bool:
    """Whether `text` names the native key as the user wrote it: dotted, or by its last part
    (verl's and Accelerate's keys are long). The recipe's field for it does not count: the
    user wrote `gradient_clipping`, and a line saying only `grad_clip` names nothing they wrote."""
    leaf = re.split(r"[.\[]", key.lstrip("+"))[-1].rstrip("]")
    parts = key.lstrip("+").split(".")
    # A block named whole names what is in it (verl's `...fsdp_config.mixed_precision`).
    blocks = (".".join(parts[:n]) for n in range(2, len(parts)))
    return key in text or _word(leaf, text) or any(_word(block, text) for block in blocks)


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
    return trip(run, main_file(work / "s", start), start, via, work,
                ["--world", str(nodes * gpus), "--nodes", str(nodes)])


def corpus_files() -> Iterator[tuple[Path, str]]:
    for path in sorted(CORPUS.rglob("*")):
        kind = kind_of(path) if path.is_file() and path.suffix != ".csv" else None
        if kind is not None:
            yield path, kind


BACK = {"deepspeed": "deepspeed", "accelerate": "accelerate", "verl": "verl", "hf": "hf", "axolotl": "hf",
        "llamafactory": "hf"}
"""The kind `import` reads → the target compiled back to, to compare with the input (an
Axolotl or LLaMA-Factory YAML holds TrainingArguments)."""


def trip_files() -> Iterator[tuple[Path, str]]:
    """`corpus_files`, and the files of the other folders (Axolotl, LLaMA-Factory, launch
    scripts) import reads, each with the target its trip compiles back to."""
    from distrecipe.errors import DistrecipeError
    from distrecipe.translator.importers.registry import read_native

    yield from corpus_files()
    for path in sorted(CORPUS.rglob("*")):
        if not path.is_file() or path.suffix == ".csv" or kind_of(path) is not None:
            continue
        try:
            kind, _ = read_native(path)
        except DistrecipeError:
            continue
        if kind in BACK:
            yield path, BACK[kind]


def rl_files() -> Iterator[tuple[Path, str]]:
    """The RL corpus's files import reads (TRL configs, OpenRLHF's `train_ppo_ray` command
    lines), each with its kind; the other entries' lines are linted, not imported."""
    from distrecipe.engines.openrlhf import read_command
    from distrecipe.errors import DistrecipeError
    from distrecipe.translator.importers.openrlhf import ENTRY
    from distrecipe.translator.importers.registry import read_native

    for path in sorted(RL_CORPUS.glob("*")):
        if not path.is_file() or path.suffix == ".csv":
            continue
        try:
            kind, _ = read_native(path)
        except DistrecipeError:
            continue
        if kind == "openrlhf":
            doc = read_command(path.read_text(encoding="utf-8"), str(path))
            if doc is None or ENTRY not in doc.data:
                continue
        if kind in RL_TARGETS:
            yield path, kind


def trips(run: Run, files: list[tuple[Path, str]], vias: tuple[str, ...] = TARGETS) -> list[Trip]:
    out = []
    for path, start in files:
        for via in vias:  # via == start: the file imported and compiled back, twice
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
    if "--rl" in argv:  # the RL corpus, through the RL trainers and the other targets
        results = trips(run, list(rl_files()), (*RL_TARGETS, *TARGETS))
    else:
        results = trips(run, list(trip_files()))
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
