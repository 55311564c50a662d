"""The sweeps behind diff's property tests: every schema field and every native key of
the corpus changed in turn, and whether `distrecipe diff` reports it.

(a) Each leaf of `recipe.schema.json` is changed in a base recipe that makes it
meaningful (the first of `BASES` where some value the schema allows resolves), to each
other value the schema allows in turn (`candidates`), until one resolves; diff of the
base and the changed recipe must then name the dotted key (exit 0: a difference is not
a failure, README). A field in `distrecipe.diff.IGNORED` must never be named.
(b) Each leaf of each corpus file that `import` reads is given another value of its
type (`mutate`), written in the file's own syntax; diff of the original and the changed
file must name that key. Run as `python -m tests.diff_sweep` for the counts by engine.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import re
import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = ROOT / "distrecipe" / "schemas" / "recipe.schema.json"
CORPUS = ROOT / "tests" / "corpus" / "real"

MODEL = {"params": 8.0e9, "hidden_size": 4096, "layers": 32, "heads": 32, "kv_heads": 8,
         "intermediate_size": 12288, "vocab": 151936, "layer_cls": "Qwen3DecoderLayer", "attention": "sdpa"}
ZERO = {"recipe": 1, "name": "base", "model": MODEL,
        "cluster": {"nodes": 2, "gpus_per_node": 8, "gpu_memory": "80GB", "device": "gpu"},
        "strategy": "zero", "stage": 3, "batch": {"micro": 2, "accumulation": "auto", "global": 256, "seq_len": 4096},
        "precision": "bf16", "optimizer": {"name": "adamw", "lr": 1e-5, "betas": [0.9, 0.95], "eps": 1e-8,
                                           "weight_decay": 0.1},
        "schedule": {"decay": "cosine", "warmup_steps": 10, "total_steps": 1000},
        "grad_clip": 1.0, "activation_checkpointing": {"mode": "selective", "every": 2},
        "checkpoint": {"weights": "sharded", "every": 100},
        "offload": {"optimizer": "nvme", "params": "nvme", "nvme_path": "/nvme", "pin_memory": True},
        "launch": {"backend": "deepspeed", "script": "train.py", "args": ["--x"], "master_addr": "h0",
                   "master_port": 29500, "hostfile": "hosts",
                   "slurm": {"partition": "gpu", "account": "acct", "time": "1:00:00", "cpus_per_task": 8,
                             "mem": "100G", "exclusive": True},
                   "skypilot": {"accelerator": "H100", "workdir": ".", "setup": "pip install x"}},
        "native": {"deepspeed": {"wall_clock_breakdown": False}, "accelerate": {"debug": False},
                   "hf": {"logging_steps": 10}, "trl": {"beta": 0.04}, "verl": ["trainer.total_epochs=1"]}}
"""A base where almost every field is meaningful: ZeRO-3 with offload to NVMe, a schedule,
a launch with SLURM and SkyPilot settings, a `native` key per engine."""
MOE = {**ZERO, "model": {"params": 16e9, "hidden_size": 2048, "layers": 24, "heads": 16, "kv_heads": 16,
                          "intermediate_size": 1408, "vocab": 102400, "family": "deepseek_v2",
                          "head_dim": 128, "bias": "none", "block_norms": 2, "position_embeddings": 4096,
                          "tied_embeddings": False, "experts": 64, "experts_per_token": 6,
                          "expert_intermediate_size": 1408, "shared_experts": 2, "shared_expert_size": 2816,
                          "dense_layers": 1, "q_lora_rank": 1536, "kv_lora_rank": 512, "rope_head_dim": 64,
                          "v_head_dim": 128},
       "cluster": {"nodes": 2, "gpus_per_node": 8, "gpu": "h100", "cpu_memory": "1TB",
                   "peak_tflops": 900, "intra_node_bandwidth": 400, "inter_node_bandwidth": 50},
       "offload": {"optimizer": "cpu", "params": "none", "activations": "cpu"}, "activation_checkpointing": "full"}
"""A mixture-of-experts model with MLA attention, on a named GPU with its figures."""
MEGATRON = {**ZERO, "strategy": "megatron", "stage": 1, "offload": {},
            "parallel": {"tensor": 2, "pipeline": 4, "sequence": 1, "virtual_stages": 2, "tensor_sequence": True,
                         "tensor_overlap": True, "first_stage_layers": 8, "last_stage_layers": 8, "expert": 1},
            "batch": {"micro": 1, "accumulation": "auto", "global": 256, "seq_len": 4096},
            "launch": {"backend": "torchrun", "script": "train.py"}, "native": {}}
"""Tensor and pipeline parallelism, where the `parallel` fields mean something."""
FSDP = {**ZERO, "strategy": "fsdp", "stage": 3, "offload": {"params": "cpu", "optimizer": "cpu"},
        "parallel": {"shard_group": 8}, "reduce_dtype": "fp32", "activation_checkpointing": {"mode": "full"},
        "optimizer": {**ZERO["optimizer"], "state_dtype": "fp32"},  # type: ignore[dict-item]
        "batch": {"micro": "auto", "accumulation": "auto", "global": 256, "seq_len": 4096,
                  "micro_policy": "largest-that-fits", "micro_tokens": 8192},
        "schedule": {"decay": "linear", "warmup_ratio": 0.1, "min_lr_ratio": 0.1, "total_steps": 1000},
        "launch": {"backend": "accelerate", "script": "train.py", "program_kind": "hf"}, "native": {}}
"""Hybrid-sharded FSDP with the batch micro left to the planner."""
DERIVED = {**ZERO, "batch": {"micro": 2, "accumulation": 4, "global": "auto", "seq_len": 4096}}
"""The global batch derived, so micro and accumulation change alone."""
RL = {**ZERO, "strategy": "fsdp", "stage": 3, "offload": {}, "precision": "auto",
      "batch": {"micro": 2, "accumulation": 1, "global": 32, "seq_len": 4096},
      "rl": {"rollout_n": 4, "prompts_per_step": 8, "rollout_memory": 0.5, "free_rollout_memory": True},
      "launch": {"backend": "verl"}, "native": {"verl": ["trainer.total_epochs=1"]}}
"""A verl RL job, where the `rl` fields mean something."""
HF_CONFIGS = {"a.json": ROOT / "tests" / "corpus" / "hf_configs" / "real" / "llama-3.1-8b-instruct.json",
              "b.json": ROOT / "tests" / "corpus" / "hf_configs" / "real" / "qwen2.5-7b-instruct.json"}
"""The Hugging Face configs `model.hf_config` names, copied beside the recipes."""
HF = {**ZERO, "model": {"hf_config": "a.json"}}
"""A model shape read from a Hugging Face config."""
BASES: dict[str, dict[str, Any]] = {"zero": ZERO, "moe": MOE, "megatron": MEGATRON, "fsdp": FSDP, "derived": DERIVED, "rl": RL,
                                    "hf": HF}

STRINGS = {"name": ["other"], "model.layer_cls": ["LlamaDecoderLayer"], "model.hf_config": ["b.json"],
           "offload.nvme_path": ["/local"], "launch.script": ["other.py"], "launch.master_addr": ["h1"],
           "launch.hostfile": ["other-hosts"], "launch.slurm.partition": ["big"], "launch.slurm.account": ["other"],
           "launch.slurm.time": ["2:00:00"], "launch.slurm.mem": ["200G"], "launch.skypilot.accelerator": ["A100"],
           "launch.skypilot.workdir": ["src"], "launch.skypilot.setup": ["pip install y"],
           "cluster.gpu_memory": ["40GB"], "cluster.cpu_memory": ["512GB"],
           "launch.k8s.image": ["ghcr.io/org/train:2.0"], "launch.k8s.python": ["/opt/venv/bin/python"],
           "launch.k8s.namespace": ["team-b"], "launch.k8s.runtime": ["deepspeed-distributed"],
           "checkpoint.dir": ["ckpt"], "checkpoint.resume": ["auto"]}
"""Another valid value of each free-text field (its pattern is the schema's)."""
NATIVE_CHANGES = {"native.deepspeed": [{"wall_clock_breakdown": True}, {"steps_per_print": 7}],
                  "native.accelerate": [{"debug": True}], "native.hf": [{"logging_steps": 20}],
                  "native.trl": [{"beta": 0.1}],
                  "native.verl": [["trainer.total_epochs=2"]]}


def schema_fields() -> Iterator[tuple[str, dict[str, Any]]]:
    """(dotted key, schema node) of every leaf of the recipe schema. A field written either
    as a value or as a mapping (`activation_checkpointing: full` or `{mode: full, every: 2}`)
    is its key, holding the value forms, plus the mapping's other keys: its `mode` is the
    short form's value under another spelling, the recipe's `activation_checkpointing`."""
    def walk(node: dict[str, Any], key: str) -> Iterator[tuple[str, dict[str, Any]]]:
        branches = node.get("anyOf") or node.get("oneOf") or []
        objects = [b for b in branches if b.get("type") == "object" and "properties" in b]
        scalars = [b for b in branches if b not in objects]
        if node.get("type") == "object" and "properties" in node:
            objects, scalars = [node], []
        if not objects:
            yield key, node
            return
        if scalars:
            yield key, {"oneOf": scalars}
        for branch in objects:
            for name, child in branch["properties"].items():
                if child not in scalars:
                    yield from walk(child, f"{key}.{name}" if key else name)
    yield from dict(walk(json.loads(SCHEMA.read_text(encoding="utf-8")), "")).items()


def get_key(doc: dict[str, Any], key: str) -> Any:
    node: Any = doc
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def set_key(doc: dict[str, Any], key: str, value: Any) -> dict[str, Any]:
    out = copy.deepcopy(doc)
    node = out
    *parents, last = key.split(".")
    for part in parents:
        if not isinstance(node.get(part), dict):
            node[part] = {} if node.get(part) is None or isinstance(node.get(part), dict) else {"mode": node[part]}
        node = node[part]
    node[last] = value
    return out


def candidates(key: str, node: dict[str, Any], current: Any) -> list[Any]:
    """Other values the schema allows for `key`, most ordinary first."""
    if key in NATIVE_CHANGES:
        return NATIVE_CHANGES[key]
    branches = node.get("anyOf") or node.get("oneOf") or [node]
    out: list[Any] = []
    for branch in branches:
        if "enum" in branch:
            out += branch["enum"]
        elif "const" in branch:
            out.append(branch["const"])
        elif branch.get("type") == "boolean":
            out += [True, False]
        elif branch.get("type") in ("integer", "number"):
            low = branch.get("minimum", 0)
            base = current if isinstance(current, int | float) and not isinstance(current, bool) else 1
            numbers = [base * 2, base + 1, base - 1, 1, 2, 4, 8, 16, 0, base / 2, 0.5, 0.25]
            out += [n for n in numbers if n >= low and (n > low or "exclusiveMinimum" not in branch)
                    and n <= branch.get("maximum", n) and n < branch.get("exclusiveMaximum", n + 1)
                    and (branch["type"] == "number" or float(n).is_integer())]
            out = [int(n) if branch["type"] == "integer" else n for n in out]
        elif branch.get("type") == "array":
            if branch.get("minItems") == 2:
                out.append([0.8, 0.999])
            else:
                out.append(["--other"])
        elif branch.get("type") == "string":
            out += STRINGS.get(key, [])
    return [v for i, v in enumerate(out) if v != current and v not in out[:i] and v is not None]


@dataclass
class FieldResult:
    key: str
    outcome: str
    """`named`, `missed`, `ignored` (in IGNORED and not named), `ignored but named`, or `unexercised`."""
    base: str = ""
    value: Any = None
    why: str = ""


def _cli(argv: list[str]) -> tuple[int, str, str]:
    from distrecipe.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


def diff_keys(old: Path, new: Path, *extra: str) -> tuple[int, list[str], str]:
    """diff's exit code, the keys it names as changes, and its notes (else its error)."""
    code, out, err = _cli(["diff", str(old), str(new), *extra, "--format", "json"])
    if code != 0:
        return code, [], err
    data = json.loads(out)
    return code, [str(c["key"]) for c in data["changes"]], "\n".join(data["notes"])


def sweep_field(key: str, node: dict[str, Any], work: Path) -> FieldResult:
    from distrecipe.diff import IGNORED

    why = ""
    for name, source in HF_CONFIGS.items():
        (work / name).write_bytes(source.read_bytes())
    for name, base in BASES.items():
        old = work / "old.yaml"
        old.write_text(yaml.safe_dump(base, sort_keys=False), encoding="utf-8")
        current = get_key(base, key)
        for value in candidates(key, node, current):
            new = work / "new.yaml"
            new.write_text(yaml.safe_dump(set_key(base, key, value), sort_keys=False), encoding="utf-8")
            code, keys, err = diff_keys(old, new)
            if code != 0:
                why = err.strip().splitlines()[-1] if err.strip() else f"exit {code}"
                continue
            said = any(k == key or k.startswith(f"{key}.") for k in keys)
            if key in IGNORED:
                return FieldResult(key, "ignored but named" if said else "ignored", name, value)
            if said:
                return FieldResult(key, "named", name, value)
            if keys:  # it changed what it decides (a resolved value) but was not named itself
                return FieldResult(key, "missed", name, value, f"named only {keys}")
            why = f"{name}: {value!r} named nothing"
    return FieldResult(key, "missed" if why.endswith("named nothing") else "unexercised", why=why)


# ---- (b) native keys of the corpus


WORLD = ["--world", "8"]
WORLD_KINDS = ("deepspeed", "hf", "axolotl", "llamafactory")
"""The kinds whose files do not state their world: told 8 ranks (an Accelerate YAML and a
verl script state theirs, and `--world` would override it; the HF Trainer's tools do not)."""


def corpus_files() -> Iterator[tuple[Path, str]]:
    """The corpus files `import` reads (as `tests.roundtrip` walks them), less the few the
    engine's own reader refuses (invalid JSON): they have no keys to change."""
    from distrecipe.errors import DistrecipeError
    from distrecipe.translator.importers.registry import read_native
    from tests.roundtrip import corpus_files as files

    for path, kind in files():
        try:
            read_native(path)
        except DistrecipeError:
            continue
        yield path, kind


def mutate(value: Any) -> Any:
    """Another value of the same type; None where there is none (a null)."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, float):
        return value * 2 if value else 1.0
    if isinstance(value, str):
        return f"{value}x" if value != "auto" else "autox"
    if isinstance(value, list):
        return [*value, value[0]] if value else ["x"]
    if isinstance(value, dict):
        return {"x": 1} if not value else None
    return None


@dataclass
class KeyResult:
    file: str
    kind: str
    key: str
    outcome: str
    """`named`; through a recipe also `reported` (named as recipe fields the carry table
    does not spell it as: Accelerate's `fsdp_offload_params` as `offload.*`) and `refused`
    (the changed value does not import or resolve: exit 2, loud); `missed` (nothing said);
    `comment` (a comment key, never compared); `unwritable` (a null, which has no other
    value of its type, or a verl key no override line of the script sets)."""
    why: str = ""


def native_leaves(path: Path) -> tuple[str, list[tuple[tuple[str, ...], Any]]]:
    from distrecipe.diff import _leaves
    from distrecipe.translator.importers.registry import read_native

    kind, doc = read_native(path)
    return kind, [(written, value) for written, value in _leaves(kind, doc.data).values()]  # type: ignore[arg-type]


def write_changed(path: Path, kind: str, written: tuple[str, ...], new: Any, out: Path) -> bool:
    """The file with one key changed, in its own syntax; False where that cannot be written."""
    text = path.read_text(encoding="utf-8")
    if kind == "verl":
        key = re.escape(".".join(written))
        shown = new if not isinstance(new, bool) else str(new)
        literal = json.dumps(shown) if isinstance(shown, list) else str(shown)
        pattern = re.compile(rf"(?<![\w.])(\+{{0,2}}{key}=)(\"[^\"]*\"|'[^']*'|\S+?)(?=\s*\\?\s*$|\s)", re.M)
        if not pattern.search(text):
            return False
        token = literal if isinstance(new, int | float) else f"'{literal}'"  # a quoted number is a string
        out.write_text(pattern.sub(lambda m: m.group(1) + token, text), encoding="utf-8")  # every place it is set
        return True
    data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    node = data
    for part in written[:-1]:
        node = node[part]
    node[written[-1]] = new
    out.write_text(json.dumps(data, indent=2) if path.suffix == ".json" else yaml.safe_dump(data, sort_keys=False),
                   encoding="utf-8")
    return True


def recipe_names(key: str, kind: str, keys: list[str], notes: str) -> bool:
    """Whether a diff in the recipe's vocabulary names native `key` of `kind`: as the
    `native` section's key, or as a recipe field the carry table maps it from."""
    from distrecipe.translator.carry import FIELDS, SECTIONS

    # A TRL config's keys are native.hf's (the Trainer's) or native.trl's (TRL's own).
    sections = SECTIONS.get(kind, (kind,))  # type: ignore[call-overload]
    if any(f"native.{section}.{key}" in keys for section in sections) or f"{key} = " in notes:
        return True  # changed, or named as not carried
    leaf = re.split(r"[.\[]", key.lstrip("+"))[-1].rstrip("]")
    mapped = [f for f, row in FIELDS.items() if key in str(row.cell(kind).native)  # type: ignore[arg-type]
              or re.search(rf"\b{re.escape(leaf)}\b", str(row.cell(kind).native))]  # type: ignore[arg-type]
    return any(k == f or k.startswith(f"{f}.") for f in mapped for k in keys)


def sweep_file(path: Path, work: Path, sample: int | None = None, via_recipe: bool = False) -> list[KeyResult]:
    from distrecipe.engines.tables import is_comment_key
    from distrecipe.errors import DistrecipeError
    from distrecipe.keys import joined

    try:
        kind, leaves = native_leaves(path)
    except DistrecipeError:  # a corpus file the engine's reader refuses has no keys to change
        return []
    results = []
    world = WORLD if kind in WORLD_KINDS else []
    imported = work / "imported.yaml"
    if via_recipe:
        code, out, _ = _cli(["import", str(path), *world])
        if code != 0 and not world:  # a verl script that leaves its world to the environment
            world = WORLD
            code, out, _ = _cli(["import", str(path), *world])
        if code != 0:
            return []
        imported.write_text(out, encoding="utf-8")
    for written, value in leaves[:sample]:
        key = joined(written)
        if kind in ("deepspeed", "accelerate") and any(map(is_comment_key, written)):
            results.append(KeyResult(path.name, kind, key, "comment"))
            continue
        new = mutate(value)
        changed = work / f"changed{path.suffix}"
        if new is None or not write_changed(path, kind, written, new, changed):
            results.append(KeyResult(path.name, kind, key, "unwritable"))
            continue
        code, keys, err = diff_keys(imported if via_recipe else path, changed, *world)
        if code == 2:  # loud: the changed file (or one it names) does not read, import or resolve
            results.append(KeyResult(path.name, kind, key, "refused", err.strip()[-200:]))
        elif code == 0 and (key in keys if not via_recipe else recipe_names(key, kind, keys, err)):
            results.append(KeyResult(path.name, kind, key, "named"))
        elif via_recipe and code == 0 and keys:
            results.append(KeyResult(path.name, kind, key, "reported", str(keys)))
        else:
            results.append(KeyResult(path.name, kind, key, "missed", err.strip()[-200:] if code else str(keys)))
    return results


def main(argv: list[str]) -> int:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        fields = [sweep_field(key, node, work) for key, node in schema_fields()]
        print(Counter(r.outcome for r in fields))
        for r in fields:
            if r.outcome not in ("named", "ignored"):
                print(f"  {r.outcome}: {r.key} {r.why}")
        if "--fields" in argv:
            return 0
        keys = [r for path, _ in corpus_files() for r in sweep_file(path, work, via_recipe="--recipe" in argv)]
        by_kind = Counter((r.kind, r.outcome) for r in keys)
        for (kind, outcome), n in sorted(by_kind.items()):
            print(f"{kind:10} {outcome:10} {n}")
        for r in keys:
            if r.outcome == "missed":
                print(f"  missed: {r.kind} {r.file} {r.key} {r.why}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
