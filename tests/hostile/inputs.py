"""The hostile inputs, generated deterministically: every family the issue names.

Each function returns a list of `Case`s; the sweeps in `test_sweeps.py` run them all
(slow set) or every k-th (fast set). Seeds are the repository's own recipes, the
real-world corpus (`tests/corpus/real/`) and the lint corpus (`tests/lint_corpus/`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

from distrecipe.schemas import recipe_schema
from distrecipe.source import BUDGET
from tests.hostile.harness import Case

ROOT = Path(__file__).resolve().parents[2]
RECIPES = sorted((ROOT / "recipes").glob("*.yaml"))
REAL = sorted((ROOT / "tests" / "corpus" / "real").rglob("*.json")) + sorted(
    (ROOT / "tests" / "corpus" / "real").rglob("*.yaml"))
LINT_CORPUS = sorted(p for p in (ROOT / "tests" / "lint_corpus").rglob("*")
                     if p.is_file() and p.name not in ("expect", "README.md"))

BIG_INT = "7" * 5000
"""More digits than Python's int-string limit (4,300) allows to convert."""
NINES = "9" * 60

HOSTILE_YAML: tuple[str, ...] = (
    "0", "-1", "-0", "1", "2", "3", "1.5", "-1.5", "1e-400", ".nan", ".inf", "-.inf", "1e400", "-1e400",
    "1e308", "1.7976931348623157e308", "1e19", "18446744073709551616", NINES, BIG_INT, "-" + BIG_INT,
    "0x10", "0o17", "1_000", "true", "false", "null", "~", "[]", "{}", "[1, 2]", "[.nan, .inf]",
    "{a: 1}", '""', '" "', '"auto"', '"all"', '"8"', '"1e400"', '"1e400B"', f'"{NINES}GB"', f'"{BIG_INT}B"',
    f'"{NINES}"', '"80GB"', '"-1GB"', '"nanB"', '"8.2B"', '"1e400T"', "!!binary aGVsbG8=",
    "!!python/object/apply:os.system [echo pwned]", "!!set {a: null}", "!!timestamp 2001-12-14",
    "2001-12-14", "!!float 1", "!!str 1", '"\\u202eevil\\u202c"', '"a\\0b"', '"a\\nb"', '"\\x1b[31m"',
    '"../../etc/passwd"', '"/etc/passwd"', '"$(touch pwned)"', '"a; touch pwned"', '"x' + "y" * 100_000 + '"',
    "'\\ud800'", '"\\ud800"', "*undefined", "&a 1",
)
"""YAML literals for one value: numbers at every edge, wrong types, tags, control text."""

HOSTILE_JSON: tuple[str, ...] = (
    "0", "-1", "1.5", "NaN", "Infinity", "-Infinity", "1e400", "-1e400", "1e308", NINES, BIG_INT,
    "null", "true", "[]", "{}", '"auto"', '""', '"\\ud800"', '"a\\u0000b"', '"1e400"', '"' + "x" * 100_000 + '"',
    '"../../x"', "[[[[[[[[[[1]]]]]]]]]]",
)
"""JSON literals for one leaf (Python's json accepts NaN and Infinity; so do the engines)."""

HOSTILE_TEXT: tuple[str, ...] = (
    "0", "-1", "nan", "inf", "-inf", "1e400", "1e308", NINES, BIG_INT, "", "null", "[1,2]", "{a:1}",
    "'x'", "a\\0b", "${oc.env:HOME}", "1.5", "true", "\u202eevil",
)
"""Values for one `key=value` verl override (Hydra's own grammar)."""

HOSTILE_NAMES: tuple[str, ...] = (
    "/abs/path", "../../x", "..", ".", "a/b", "a\\nb", "a\\0b", "a b", "$(touch pwned)", "`touch pwned`",
    "a; touch pwned", "#SBATCH --wrap=x", "x\\n#SBATCH --wrap=touch pwned", "-rf", "\\u202eevil",
    "a" * 300, "CON", "a:b", "*", "~", "${HOME}", "a\\tb", "ok-name",
)
"""`name` values as YAML double-quoted strings: paths, shell, YAML and Markdown breakers."""


def _leaves(schema: dict[str, Any], prefix: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    for key, sub in schema.get("properties", {}).items():
        if sub.get("type") == "object" and "properties" in sub:
            yield from _leaves(sub, (*prefix, key))
        else:
            yield (*prefix, key)


LEAVES: tuple[tuple[str, ...], ...] = tuple(_leaves(recipe_schema()))
"""Every settable value in the recipe schema, as a key path."""

FULL: dict[str, Any] = {
    "recipe": "1",
    "name": "hostile",
    "model": {"params": "8.0e9", "hidden_size": "4096", "layers": "36", "heads": "32", "kv_heads": "8",
              "intermediate_size": "12288", "vocab": "151936", "layer_cls": "Qwen3DecoderLayer",
              "attention": "flash", "tied_embeddings": "false"},
    "cluster": {"nodes": "4", "gpus_per_node": "8", "gpu_memory": "80GB", "cpu_memory": "512GiB",
                "device": "gpu"},
    "strategy": "zero",
    "stage": "3",
    "offload": {"optimizer": "cpu", "params": "none", "pin_memory": "true"},
    "parallel": {"tensor": "1", "pipeline": "1", "sequence": "1", "shard_group": "all"},
    "batch": {"micro": "2", "accumulation": "auto", "global": "256", "seq_len": "8192"},
    "precision": "bf16",
    "optimizer": {"name": "adamw", "lr": "1.0e-5", "betas": "[0.9, 0.95]", "eps": "1.0e-8",
                  "weight_decay": "0.1"},
    "grad_clip": "1.0",
    "activation_checkpointing": "full",
    "launch": {"backend": "deepspeed", "args": "[--steps, '10']", "master_port": "29500"},
}
"""A recipe that sets (nearly) every field, as YAML text per value; it resolves."""


def recipe_text(replace: tuple[str, ...] | None = None, literal: str = "") -> str:
    """`FULL` as block YAML, one value per line, with the value at `replace` set to `literal`."""
    lines: list[str] = []
    sections = dict(FULL)
    if replace is not None and len(replace) == 2 and replace[0] not in sections:
        sections[replace[0]] = {}
    for key, value in sections.items():
        if isinstance(value, dict):
            lines.append(f"{key}:")
            items = dict(value)
            if replace is not None and len(replace) == 2 and replace[0] == key:
                items[replace[1]] = literal
            lines += [f"  {k}: {v}" for k, v in items.items()]
        else:
            lines.append(f"{key}: {literal if replace == (key,) else value}")
    if replace is not None and len(replace) == 1 and replace[0] not in sections:
        lines.append(f"{replace[0]}: {literal}")
    return "\n".join(lines) + "\n"


RECIPE_COMMANDS: tuple[tuple[str, ...], ...] = (
    ("compile", "in/recipe.yaml", "-t", "all", "-o", "out"),
    ("resolve", "in/recipe.yaml", "--format", "json"),
    ("plan", "in/recipe.yaml", "--compare"),
    ("lint", "in/recipe.yaml"),
    ("launch", "in/recipe.yaml", "--dry-run"),
    ("diff", "in/base.yaml", "in/recipe.yaml"),
)


def _pairs() -> Iterator[tuple[tuple[str, ...], str]]:
    """Half of schema field × hostile scalar, as a checkerboard: each field meets every
    other scalar, and its neighbour in LEAVES (most often a field of its section and
    type) the rest; each scalar meets every other field. The whole product mostly
    repeated one code path per field type, at twice the sweep's time."""
    for i, path in enumerate(LEAVES):
        for j, literal in enumerate(HOSTILE_YAML):
            if (i + j) % 2 == 0:
                yield path, literal


def field_cases() -> list[Case]:
    """Schema fields × hostile scalars (`_pairs`), each through one recipe command in turn
    (the commands rotate, so each meets every field across the hostile scalars; one command
    per pair keeps the slow sweep over 10,000 inputs and inside CI's time)."""
    base = recipe_text().encode()
    cases = []
    for n, (path, literal) in enumerate(_pairs()):
        text = recipe_text(path, literal).encode("utf-8", "surrogatepass")
        label = f"{'.'.join(path)}={literal[:30]}"
        args = RECIPE_COMMANDS[n % len(RECIPE_COMMANDS)]
        cases.append(Case(label, args, {"in/recipe.yaml": text, "in/base.yaml": base}))
    return cases


def set_cases() -> list[Case]:
    """Schema fields × hostile scalars (`_pairs`) as `--set`, and malformed `--set` words."""
    base = {"in/recipe.yaml": recipe_text().encode()}
    cases = []
    for path, literal in _pairs():
        word = f"{'.'.join(path)}={literal}"
        cases.append(Case(f"--set {word[:40]}", ("compile", "in/recipe.yaml", "--set", word), base))
    for word in ("=", "a", "==1", "=1", "a.b.c.d=1", "model=1", "model.params.x=1", "..=1", ".a=1",
                 "a\0b=1", "k" * 10_000 + "=1", "model.params=" + "[" * 10_000, "batch.micro=1=2",
                 "stage= 3", " stage =3", "recipe=2", "name=", f"cluster.gpu_memory={NINES}",
                 f"model.params={BIG_INT}", "model.params=1e400", "model.params=.nan",
                 "cluster.gpus_per_node=" + "9" * 19, "parallel.shard_group=7", "cluster.nodes=" + NINES):
        cases.append(Case(f"--set {word[:40]!r}", ("resolve", "in/recipe.yaml", "--set", word), base))
    return cases


def _damaged(text: str) -> Iterator[tuple[str, bytes]]:
    data = text.encode()
    half = len(data) // 2
    yield "bom", b"\xef\xbb\xbf" + data
    yield "crlf", data.replace(b"\n", b"\r\n")
    yield "cr only", data.replace(b"\n", b"\r")
    yield "nul byte", data[:half] + b"\0" + data[half:]
    yield "utf-16", text.encode("utf-16")
    yield "utf-32", text.encode("utf-32")
    yield "latin-1 byte", data[:half] + b"\xff" + data[half:]
    yield "cesu surrogate", data + b"name: \xed\xa0\x80\n"
    yield "escape char", data[:half] + b"\x1b[2J" + data[half:]
    yield "multi-document", data + b"---\n" + data
    yield "explicit document", b"---\n" + data + b"...\n"
    yield "yaml 1.1 directive", b"%YAML 1.1\n---\n" + data
    yield "tag directive", b"%TAG !e! tag:example.com,2000:\n---\n" + data
    yield "duplicate key", data + b"strategy: ddp\n"
    yield "duplicate nested key", data.replace(b"batch:", b"batch:\n  micro: 3", 1)
    bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{n}: &{n} [{', '.join(['*' + p] * 10)}]\n" for p, n in zip("abcdefgh", "bcdefghi", strict=True))
    yield "alias bomb", bomb.encode()
    yield "merge keys", b"base: &b {micro: 2}\n" + data
    yield "deep flow list", data + b"extra: " + b"[" * 10_000 + b"]" * 10_000 + b"\n"
    yield "deep flow map", data + b"extra: " + b"{a: " * 10_000 + b"1" + b"}" * 10_000 + b"\n"
    yield "deep block map", data + b"".join(b" " * i + b"k:\n" for i in range(2000))
    yield "near the size limit", data + b"#" * (BUDGET.bytes - len(data) - 2) + b"\n"
    yield "over the size limit", data + b"#" * (BUDGET.bytes - len(data) + 1) + b"\n"
    yield "many keys", data + b"x:\n" + b"".join(b"  k%d: 1\n" % i for i in range(60_000))
    yield "many short keys", b"{" + b",".join(b"k%d: 1" % i for i in range(90_000)) + b"}"
    yield "truncated", data[:half]
    yield "empty", b""
    yield "only a comment", b"# nothing\n"
    yield "null document", b"null\n"
    yield "a list", b"- 1\n- 2\n"
    yield "a scalar", b"42\n"
    yield "complex key", data + b"? [a, b]\n: 1\n"
    yield "integer key", data + b"1: x\n"
    yield BIG_INT[:10] + " key", data + BIG_INT.encode() + b": x\n"
    yield "python tag", data + b"x: !!python/object/apply:os.system [echo pwned]\n"
    yield "rtl key", data + "\u202estrategy: ddp\n".encode()
    yield "long line", data + b"# " + b"x" * 500_000 + b"\n"
    yield "tabs", data.replace(b"  ", b"\t")


def damage_cases() -> list[Case]:
    """Structural damage to every seed recipe (and one as JSON), through every recipe command."""
    seeds: list[tuple[str, str]] = [(p.name, p.read_text("utf-8")) for p in RECIPES]
    seeds.append(("full.yaml", recipe_text()))
    cases = []
    for seed, text in seeds:
        for label, data in _damaged(text):
            for args in RECIPE_COMMANDS[:5]:
                cases.append(Case(f"{seed}: {label}", args, {"in/recipe.yaml": data}))
            cases.append(Case(f"{seed}: {label}", ("lint", "in/recipe.json"), {"in/recipe.json": data}))
    as_json = json.dumps({"recipe": 1, "model": {"params": 1e9}, "cluster": {"nodes": 1, "gpus_per_node": 8},
                          "strategy": "zero", "batch": {"micro": 1, "global": 8}}, indent=1)
    for label, data in _damaged(as_json):
        cases.append(Case(f"json: {label}", ("resolve", "in/recipe.json"), {"in/recipe.json": data}))
    return cases


def _json_leaves(data: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    if isinstance(data, dict):
        for key, value in data.items():
            yield from _json_leaves(value, (*path, key))
    elif isinstance(data, list) and data:
        for i, value in enumerate(data):
            yield from _json_leaves(value, (*path, i))
    else:
        yield path


SENTINEL = "@@HOSTILE@@"


def _set(data: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    copy = dict(data) if isinstance(data, dict) else list(data)
    copy[path[0]] = _set(copy[path[0]], path[1:], value)  # type: ignore[index]
    return copy


NATIVE_COMMANDS: tuple[tuple[str, ...], ...] = (
    ("lint", "--world", "8"),
    ("import", "--world", "8"),
    ("diff", "--world", "8"),
)


def native_cases(per_leaf: int = 3) -> list[Case]:
    """Every JSON leaf of every native file in both corpora, each set to `per_leaf` hostile values."""
    cases = []
    n = 0
    for path in [*REAL, *LINT_CORPUS]:
        if path.suffix != ".json":
            continue
        text = path.read_text("utf-8")
        try:
            data = json.loads(text)
        except ValueError:
            continue
        name = f"in/{path.name}"
        for leaf in _json_leaves(data):
            if any(isinstance(k, str) and k.startswith("//") for k in leaf):
                continue
            for _ in range(per_leaf):
                literal = HOSTILE_JSON[n % len(HOSTILE_JSON)]
                command = NATIVE_COMMANDS[n % len(NATIVE_COMMANDS)]
                n += 1
                mutated = json.dumps(_set(data, leaf, SENTINEL), indent=2).replace(f'"{SENTINEL}"', literal)
                files = {name: mutated.encode("utf-8", "surrogatepass"), "in/orig.json": text.encode()}
                where = (name,) if command[0] != "diff" else ("in/orig.json", name)
                label = f"{path.parent.name}/{path.name}: {'.'.join(map(str, leaf))}={literal[:20]}"
                cases.append(Case(label, (command[0], *where, *command[1:]), files))
    return cases


def _yaml_native_cases() -> Iterator[Case]:
    """Each value line of the YAML and override files in the lint corpus, set to hostile text."""
    n = 0
    for path in LINT_CORPUS:
        if path.suffix not in (".yaml", ".txt", ".sh"):
            continue
        lines = path.read_text("utf-8").splitlines()
        sep = ": " if path.suffix == ".yaml" else "="
        for i, line in enumerate(lines):
            if sep not in line or line.lstrip().startswith("#"):
                continue
            key, _, _ = line.partition(sep)
            for _ in range(3):
                value = HOSTILE_TEXT[n % len(HOSTILE_TEXT)] if sep == "=" else HOSTILE_YAML[n % len(HOSTILE_YAML)]
                command = NATIVE_COMMANDS[n % 2]
                n += 1
                tail = " \\" if line.endswith("\\") else ""
                text = "\n".join([*lines[:i], f"{key}{sep}{value}{tail}", *lines[i + 1:]]) + "\n"
                name = f"in/{path.name}"
                yield Case(f"{path.parent.name}/{path.name}:{i + 1}={value[:20]}", (command[0], name, *command[1:]),
                           {name: text.encode("utf-8", "surrogatepass")})


def override_cases() -> list[Case]:
    """verl overrides, Accelerate and verl YAML from the lint corpus, value by value."""
    return list(_yaml_native_cases())


def name_cases() -> list[Case]:
    """Hostile `name`s through every command that writes or prints it."""
    cases = []
    for name in HOSTILE_NAMES:
        text = recipe_text(("name",), f'"{name}"').encode()
        for args in (("launch", "in/recipe.yaml", "--dry-run"), ("launch", "in/recipe.yaml", "--slurm", "--runs-root", "out/runs"),
                     ("compile", "in/recipe.yaml", "-t", "all", "-o", "out"), ("resolve", "in/recipe.yaml"),
                     ("plan", "in/recipe.yaml", "--format", "json")):
            cases.append(Case(f"name={name[:30]}", args, {"in/recipe.yaml": text}))
    return cases


@cache
def _hf_json() -> str:
    return json.dumps({"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2,
                       "num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 256})


def special_cases() -> list[Case]:
    """FIFOs, /dev/zero, directories, symlink loops and missing files, as inputs and as hf_config."""
    cases = []
    specials: list[tuple[str, tuple[tuple[str, str, str], ...]]] = [
        ("fifo", (("fifo", "in/x.yaml", ""),)),
        ("/dev/zero", (("symlink", "in/x.yaml", "/dev/zero"),)),
        ("/dev/null", (("symlink", "in/x.yaml", "/dev/null"),)),
        ("directory", (("dir", "in/x.yaml", ""),)),
        ("symlink loop", (("symlink", "in/x.yaml", "x.yaml"),)),
        ("dangling symlink", (("symlink", "in/x.yaml", "nowhere.yaml"),)),
        ("missing", ()),
    ]
    commands = [("compile", "in/x.yaml"), ("resolve", "in/x.yaml"), ("plan", "in/x.yaml"),
                ("lint", "in/x.yaml"), ("import", "in/x.yaml", "--world", "8"),
                ("diff", "in/x.yaml", "in/x.yaml"), ("launch", "in/x.yaml", "--dry-run")]
    for label, special in specials:
        for args in commands:
            cases.append(Case(f"input is {label}", args, positioned=False, special=special))
        cases.append(Case(f"lint dir holding {label}", ("lint", "in"), positioned=False, special=special))
    hf_targets: list[tuple[str, dict[str, bytes], tuple[tuple[str, str, str], ...]]] = [
        ("fifo", {}, (("fifo", "in/config.json", ""),)),
        ("/dev/zero", {}, (("symlink", "in/config.json", "/dev/zero"),)),
        ("directory", {}, (("dir", "in/config.json", ""),)),
        ("symlink loop", {}, (("symlink", "in/config.json", "config.json"),)),
        ("missing", {}, ()),
        ("non-UTF-8", {"in/config.json": b'{"hidden_size": "\xff"}'}, ()),
        ("100k-deep", {"in/config.json": b"[" * 100_000 + b"]" * 100_000}, ()),
        ("NaN", {"in/config.json": b'{"hidden_size": NaN, "num_hidden_layers": 1e400}'}, ()),
        ("huge int", {"in/config.json": b'{"hidden_size": ' + BIG_INT.encode() + b"}"}, ()),
        ("a list", {"in/config.json": b"[1, 2]"}, ()),
        ("over the size limit", {"in/config.json": b" " * (BUDGET.bytes + 1) + b"{}"}, ()),
        ("valid", {"in/config.json": _hf_json().encode()}, ()),
    ]
    for label, files, special in hf_targets:
        for value in ('"config.json"', '"con\\0fig.json"', '"/dev/zero"', '"' + "x" * 5000 + '"'):
            text = ("recipe: 1\nmodel: {hf_config: " + value + "}\ncluster: {nodes: 1, gpus_per_node: 2}\n"
                    "strategy: zero\nbatch: {micro: 1, global: 2}\n").encode()
            for command in ("resolve", "plan"):
                cases.append(Case(f"hf_config {value[:20]} is {label}", (command, "in/recipe.yaml"),
                                  {"in/recipe.yaml": text, **files}, special=special))
    return cases


def pyproject_cases() -> list[Case]:
    """`[tool.distrecipe]` broken every way, read by lint from the working directory."""
    bodies = ["world = 0", "world = -1", f"world = {BIG_INT}", "world = nan", "world = inf", 'world = "8"',
              "world = 1e400", "disable = 'DR100'", "disable = ['DR999']", "severity = {DR100 = 'fatal'}",
              "severity = 3", "format = 'xml'", "exclude = [1]", "wrold = 8", "world = [", "= 1",
              "world = 8\nworld = 9", "[tool.distrecipe.x]\ny = 1", "world = 8\x00"]
    recipe = recipe_text().encode()
    return [Case(f"pyproject: {body[:30]!r}", ("lint", "in/recipe.yaml"),
                 {"pyproject.toml": f"[tool.distrecipe]\n{body}\n".encode(), "in/recipe.yaml": recipe})
            for body in bodies]


def hf_arguments_cases() -> list[Case]:
    """TrainingArguments whose `deepspeed` is a lone surrogate, a missing file or a special file."""
    cases = []
    for value in ('"\\ud800"', '"missing.json"', '"/dev/zero"', '"in"', "1e400", '"a\\u0000b"', "[]"):
        text = ('{\n  "output_dir": "out",\n  "per_device_train_batch_size": 2,\n'
                f'  "deepspeed": {value}\n}}\n').encode()
        for args in (("lint", "in/args.json", "--world", "8"), ("import", "in/args.json", "--world", "8")):
            cases.append(Case(f"TrainingArguments deepspeed={value}", args, {"in/args.json": text}))
    return cases



NOT_UTF8: tuple[str, ...] = ("\udcff", "a\udce9b", "\udc80\udc80", "x\udcc3", "\udcff.yaml")
"""Arguments as Python hands over bytes that are not UTF-8 (`surrogateescape`): 0xFF, a
Latin-1 `é`, two continuation bytes, a truncated sequence, a file-name-like one."""


def _argv_bases() -> dict[str, tuple[tuple[str, ...], dict[str, bytes]]]:
    recipe = recipe_text().encode()
    ds = b'{"train_batch_size": 16, "train_micro_batch_size_per_gpu": 2, "zero_optimization": {"stage": 2}}\n'
    verl = (b"python3 -m verl.trainer.main_ppo data.train_batch_size=64 \\\n"
            b"    actor_rollout_ref.actor.ppo_mini_batch_size=16 trainer.n_gpus_per_node=8\n")
    files = {"in/recipe.yaml": recipe, "in/base.yaml": recipe, "in/ds.json": ds, "in/run.sh": verl}
    return {
        "compile": (("compile", "in/recipe.yaml", "-t", "deepspeed", "-o", "out"), files),
        "resolve": (("resolve", "in/recipe.yaml"), files),
        "plan": (("plan", "in/recipe.yaml"), files),
        "launch": (("launch", "in/recipe.yaml", "--dry-run"), files),
        "lint": (("lint", "in/ds.json", "--world", "8"), files),
        "import": (("import", "in/ds.json", "--world", "8"), files),
        "diff": (("diff", "in/base.yaml", "in/recipe.yaml"), files),
        "explain": (("explain", "DR310"), files),
    }


ARGV_OPTIONS: dict[str, tuple[str, ...]] = {
    "compile": ("--set", "-o", "-t"), "resolve": ("--set", "--format"), "plan": ("--set", "--write", "--format"),
    "launch": ("--set", "--partition", "--account", "--time", "--run-dir", "--runs-root", "--program-kind"),
    "lint": ("--kind", "--format", "--ds-config-consumer"), "import": ("--set", "-o"),
    "diff": ("--set", "--format"), "explain": (),
}
"""The options of each command that take text or a path, each given bytes that are not UTF-8."""


def argv_cases() -> list[Case]:
    """Every command × every text or path option × bytes that are not UTF-8, and the same
    bytes in the file names each command is given (existing and missing), in a `--set`
    value and key, in launch's program arguments and in a directory lint walks."""
    cases = []
    for command, (args, files) in sorted(_argv_bases().items()):
        for bad in NOT_UTF8:
            for option in ARGV_OPTIONS[command]:
                value = {"--set": f"batch.micro={bad}", "-o": f"out/{bad}", "--write": f"out/{bad}.yaml",
                         "--plot": f"out/{bad}.svg", "--run-dir": f"out/{bad}",
                         "--runs-root": f"out/{bad}"}.get(option, bad)
                extra = ("--slurm",) if option in ("--partition", "--account", "--time") else ()
                base = tuple(a for a in args if option != "-o" or a not in ("-o", "out"))
                cases.append(Case(f"{command} {option} {bad!r}", (*base, *extra, option, value), files,
                                  positioned=option in ("--set",)))
            if command == "explain":
                cases.append(Case(f"explain {bad!r}", ("explain", bad), files, positioned=False))
                continue
            target = next(a for a in args[1:] if a.startswith("in/"))
            renamed = f"in/{bad}{Path(target).suffix}"
            moved = {(renamed if name == target else name): data for name, data in files.items()}
            new_args = tuple(renamed if a == target else a for a in args)
            cases.append(Case(f"{command} file {bad!r}", new_args, moved))
            cases.append(Case(f"{command} missing file {bad!r}", new_args, files, positioned=False))
            if "--set" in ARGV_OPTIONS[command]:
                cases.append(Case(f"{command} --set key {bad!r}", (*args, "--set", f"batch.{bad}=2"), files))
        cases.append(Case(f"launch program argument {bad!r}", ("launch", "in/recipe.yaml", "--dry-run", "--",
                                                                "in/train.py", "--x", bad),
                          {**_argv_bases()["launch"][1], "in/train.py": b"print('training')\n"}))
        cases.append(Case(f"lint a directory holding {bad!r}", ("lint", "in", "--format", "json"),
                          {f"in/{bad}.json": _argv_bases()["lint"][1]["in/ds.json"]}, positioned=False))
    return cases


NUMERIC_VALUES: tuple[str, ...] = ("0", "-1", "-9223372036854775808", "18446744073709551616", "1e308", "-1e308")
"""Zero, negatives and huge values: every divisor and every bound they reach."""


def _numeric_leaves(node: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _numeric_leaves(value, (*path, str(key)))
    elif isinstance(node, int | float) and not isinstance(node, bool):
        yield path


def _deepspeed_numeric() -> Iterator[tuple[str, ...]]:
    from distrecipe.engines.tables import table

    for name, found in sorted(table("deepspeed")["sections"].items()):
        for key, entry in sorted(found["keys"].items()):
            kinds = entry.get("types") or ([type(entry["default"]).__name__] if "default" in entry else [])
            if {"int", "float"} & set(kinds) and "bool" not in kinds:
                yield (*name.split("."), key) if name else (key,)


def numeric_cases() -> list[Case]:
    """Zero, negative and huge values for every native numeric key of every kind: each
    DeepSpeed key the tables type as a number, each numeric key of verl's composed config
    (as an override), Accelerate's counts and sizes, and every numeric TrainingArguments
    field in a JSON file and as a launch script's flag; linted (and imported, in turn)."""
    from distrecipe.engines.tables import training_flags, verl_tree

    cases = []
    n = 0
    base_ds = {"train_batch_size": 16, "train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 1,
               "zero_optimization": {"stage": 2}}
    for path in _deepspeed_numeric():
        for value in NUMERIC_VALUES:
            data = json.loads(json.dumps(base_ds))
            node = data
            for part in path[:-1]:
                node = node.setdefault(part, {}) if isinstance(node.get(part, {}), dict) else {}
            node[path[-1]] = SENTINEL
            text = json.dumps(data).replace(f'"{SENTINEL}"', value)
            command = ("lint", "in/ds_config.json", "--world", "8") if n % 3 else (
                "import", "in/ds_config.json", "--world", "8")
            n += 1
            cases.append(Case(f"ds {'.'.join(path)}={value}", command, {"in/ds_config.json": text.encode()}))
    head = ("data.train_batch_size=64\nactor_rollout_ref.rollout.n=2\nactor_rollout_ref.actor.ppo_mini_batch_size=16\n"
            "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2\ntrainer.n_gpus_per_node=8\ntrainer.nnodes=1\n")
    for path in _numeric_leaves(verl_tree("ppo_trainer")):
        for value in NUMERIC_VALUES[:4]:
            text = head + f"{'.'.join(path)}={value}\n"
            command = (("lint", "in/verl_overrides.txt", "--world", "8"), ("lint", "in/verl_overrides.txt"),
                       ("import", "in/verl_overrides.txt"))[n % 3]
            n += 1
            cases.append(Case(f"verl {'.'.join(path)}={value}", command, {"in/verl_overrides.txt": text.encode()}))
    accelerate = {"": ("num_processes", "num_machines", "machine_rank", "main_process_port"),
                  "fsdp_config": ("fsdp_min_num_params", "fsdp_version"),
                  "parallelism_config": ("parallelism_config_dp_replicate_size", "parallelism_config_dp_shard_size",
                                         "parallelism_config_tp_size", "parallelism_config_cp_size"),
                  "deepspeed_config": ("zero_stage", "gradient_accumulation_steps", "gradient_clipping")}
    for section, keys in accelerate.items():
        for key in keys:
            for value in NUMERIC_VALUES:
                kind = "DEEPSPEED" if section == "deepspeed_config" else "FSDP"
                head_lines = [f"distributed_type: {kind}"]
                if section:
                    head_lines.append("num_processes: 8")
                if section != "fsdp_config" and kind == "FSDP":
                    head_lines.append("fsdp_config:\n  fsdp_version: 2")
                inner = f"{section}:\n  {key}: {value}" if section else f"{key}: {value}"
                text = "\n".join([*head_lines, inner]) + "\n"
                command = (("lint", "in/accelerate.yaml", "--world", "16"), ("lint", "in/accelerate.yaml"),
                           ("import", "in/accelerate.yaml"))[n % 3]
                n += 1
                cases.append(Case(f"accelerate {section}.{key}={value}", command, {"in/accelerate.yaml": text.encode()}))
    ds = b'{"train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": "auto", "zero_optimization": {"stage": 2}}'
    for field, entry in sorted(training_flags().items()):
        if entry["type"] not in ("int", "float"):
            continue
        for value in NUMERIC_VALUES:
            args = {"output_dir": "out", "per_device_train_batch_size": 2, "deepspeed": "ds.json", field: SENTINEL}
            text = json.dumps(args).replace(f'"{SENTINEL}"', value)
            script = (f"torchrun --nproc_per_node 8 train.py --per_device_train_batch_size 2 --deepspeed ds.json "
                      f"--{field} {value}\n")
            files = {"in/args.json": text.encode(), "in/ds.json": ds, "in/run.sh": script.encode()}
            cases.append(Case(f"hf {field}={value}", ("lint", "in/args.json", "--world", "8"), files))
            cases.append(Case(f"hf script --{field} {value}", ("lint", "in/run.sh") if n % 2 else
                              ("import", "in/run.sh"), files))
            n += 1
    return cases
