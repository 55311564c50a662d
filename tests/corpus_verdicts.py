"""The engines' verdicts on every file of `tests/corpus/real/`, as rows of VERDICTS.csv.

`python -m tests.corpus_verdicts` writes the table (`--out FILE`: elsewhere); `tests/test_corpus_verdicts.py`
computes it again and requires it unchanged, so an engine upgrade that changes a
verdict shows up as a failing test. Each file is judged the way its repository uses
it: a ds_config a launch script of the corpus names is filled from that script's
TrainingArguments flags at that script's world size; an Accelerate YAML is launched
from a copy of its repository's layout, beside the ds_config it names.
"""

from __future__ import annotations

import csv
import io
import json
import re
import shlex
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from distrecipe.judges import Note, Verdict
from distrecipe.judges import accelerate as accelerate_judge
from distrecipe.judges import deepspeed as deepspeed_judge
from distrecipe.judges import hf as hf_judge

CORPUS = Path(__file__).resolve().parent / "corpus" / "real"
TABLE = CORPUS / "VERDICTS.csv"
COLUMNS = ("file", "kind", "engine", "verdict", "message", "context", "why")

PAIRS = {
    "scripts/haotian-liu__LLaVA__scripts__zero3.json": "scripts/haotian-liu__LLaVA__scripts__v1_5__finetune.sh",
    "scripts/haotian-liu__LLaVA__scripts__zero2.json": "scripts/haotian-liu__LLaVA__scripts__v1_5__pretrain.sh",
    "scripts/hiyouga__LLaMA-Factory__examples__full_multi_gpu__ds_z3_config.json":
        "scripts/hiyouga__LLaMA-Factory__examples__full_multi_gpu__multi_node.sh",
    "scripts/lm-sys__FastChat__playground__deepspeed_config_s2.json": "scripts/lm-sys__FastChat__scripts__train_lora.sh",
}
"""ds_config → the corpus launch script that names it (PROVENANCE.csv notes each pair)."""

NOT_TRAINER = {
    "scripts/OpenRLHF__OpenRLHF__examples__scripts__train_sft_llama.sh":
        "openrlhf.cli.train_sft parses its own argparse, and the flags are built in a heredoc variable",
    "scripts/LianjiaTech__BELLE__train__scripts__run_ppo.sh":
        "ppo_train.py parses BELLE's own ScriptArguments (HfArgumentParser(ScriptArguments)) for trl's PPO",
    "scripts/LianjiaTech__BELLE__train__scripts__run_rm.sh":
        "rm_train.py parses BELLE's ScriptArguments (rm_train.py:179) and builds RewardConfig itself",
    **{f"scripts/{name}": "DeepSpeed-Chat's own argparse (main.py; deepspeed.add_config_arguments: a bare "
                          "--deepspeed)" for name in (
        "01-ai__Yi__finetune__scripts__run_sft_Yi_6b.sh", "01-ai__Yi__finetune__scripts__run_sft_Yi_34b.sh",
        "01-ai__Yi__finetune__scripts__run_sft_lora_Yi_6b.sh",
        "microsoft__DeepSpeedExamples__applications__DeepSpeed-Chat__training__step1_supervised_finetuning__"
        "training_scripts__multi_node__run_66b.sh",
        "microsoft__DeepSpeedExamples__applications__DeepSpeed-Chat__training__step1_supervised_finetuning__"
        "training_scripts__single_node__run_llama2_7b.sh",
        "microsoft__DeepSpeedExamples__applications__DeepSpeed-Chat__training__step3_rlhf_finetuning__"
        "training_scripts__llama2__run_llama2_7b.sh")},
}
"""Launch scripts whose program is no HF Trainer program: their flags are not TrainingArguments."""

OWN_FIELDS = {
    **{f"scripts/LianjiaTech__BELLE__train__scripts__{name}.sh": {
        "evaluation_strategy": "BELLE's own dataclass, train/src/entry_point/sft_train.py:116 (pt_train.py alike)"}
       for name in ("run_sft", "run_pt", "multinode_run")},
}
"""Launch script → the removed TrainingArguments fields its program's own dataclass declares."""

KEEPS_REMAINING = {"scripts/jzhang38__TinyLlama__sft__script.sh": "finetune.py:497 return_remaining_strings=True"}
"""Launch scripts whose program parses with `return_remaining_strings=True` (unknown flags dropped)."""


@dataclass(frozen=True)
class Row:
    file: str
    kind: str
    verdict: Verdict

    def cells(self) -> dict[str, str]:
        why = "; ".join(dict.fromkeys(note.message for note in self.verdict.notes))
        if self.verdict.outcome == "not-judgeable":
            why = self.verdict.message
        return {"file": self.file, "kind": self.kind, "engine": self.verdict.engine,
                "verdict": self.verdict.outcome, "message": self.verdict.message,
                "context": self.verdict.context, "why": why}


def provenance() -> dict[str, dict[str, str]]:
    """Corpus file (relative to the corpus) → its PROVENANCE.csv row."""
    rows = {}
    for table in sorted(CORPUS.glob("*/PROVENANCE.csv")):
        with table.open(newline="") as f:
            for row in csv.DictReader(f):
                rows[f"{table.parent.name}/{row['file']}"] = row
    return rows


TOOLS = ("axolotl", "llamafactory")
"""Folders of Axolotl and LLaMA-Factory YAMLs (with the ds_configs and Accelerate configs
they name): their tools cannot be installed here, so RECORDED.csv holds each YAML's verdict
from the tool's own validator, run from its source at the commit PROVENANCE.csv names."""


def kind_of(relative: str) -> str | None:
    directory, name = relative.split("/", 1)
    if directory == "verl":
        return "verl"
    if directory in TOOLS:
        if name.endswith(".json"):
            return "deepspeed"
        return "accelerate" if "__accelerate__" in name else directory
    if name.endswith(".json") and directory in ("deepspeed", "scripts"):
        return "deepspeed"
    if name.endswith((".yaml", ".yml")) and directory in ("accelerate", "scripts"):
        return "accelerate"
    if directory == "hf":
        return "hf"
    if directory == "scripts" and name.endswith(".sh"):
        return "hf-script"
    return None


def script_context(script: str) -> tuple[dict[str, Any], int, list[str]]:
    """TrainingArguments flags a launch script passes, its world size, and what is left out."""
    text = (CORPUS / script).read_text().replace("\\\n", " ")
    words = shlex.split(text, comments=True)
    own = hf_judge.field_names()
    values: dict[str, Any] = {}
    left_out: list[str] = []
    world, nodes = hf_judge.WORLD_DEFAULT, 1
    for index, word in enumerate(words):
        if not word.startswith("--"):
            continue
        name, _, inline = word[2:].partition("=")
        following = words[index + 1] if index + 1 < len(words) else ""
        value = inline or (following if following and not following.startswith("--") else "true")
        if name in ("num_gpus", "nproc_per_node") and value.isdigit():
            world = int(value)
        elif name == "nnodes" and value.isdigit():
            nodes = int(value)
        elif name in own and name != "deepspeed":
            if "$" in value:
                left_out.append(f"--{name} {value} (a shell variable)")
            else:
                values[name] = value if value != "true" or inline else None
        elif name not in own and name not in ("deepspeed", "num_gpus", "nproc_per_node", "nnodes"):
            left_out.append(f"--{name}")
    flags = [part for name, value in values.items() for part in ([f"--{name}"] if value is None
                                                                   else [f"--{name}", value])]
    return hf_judge.flag_values(flags), world * nodes, left_out


def judge_deepspeed(relative: str) -> Verdict:
    text = (CORPUS / relative).read_text()
    try:
        config = json.loads(text)
    except json.JSONDecodeError as exc:
        placeholders = sorted(set(re.findall(r"\b[A-Z][A-Z_]{3,}\b", text)))
        return Verdict("not-judgeable", deepspeed_judge.version("deepspeed"),
                       f"not JSON ({exc.msg}, line {exc.lineno}): placeholders {', '.join(placeholders)} "
                       "its repository's script substitutes before launch")
    if relative in PAIRS:
        values, world, left_out = script_context(PAIRS[relative])
        source = f"from {PAIRS[relative].split('/', 1)[1]}"
        if left_out:
            source += " (not TrainingArguments fields here: " + ", ".join(left_out) + ")"
        return deepspeed_judge.judge(config, world, trainer=values, trainer_from=source)
    world, world_from = deepspeed_judge.implied_world(config)
    verdict = deepspeed_judge.judge(config, world)
    return Verdict(verdict.outcome, verdict.engine, verdict.message, verdict.notes,
                   verdict.context.replace(f"world {world}", f"world {world} ({world_from})", 1))


@contextmanager
def repository_layout(relative: str, origins: dict[str, dict[str, str]]) -> Iterator[tuple[Path, Path, Path]]:
    """A temporary copy of an Accelerate YAML's repository layout: the YAML at its path
    there and the ds_config it names where it names it (when the corpus holds that file);
    gives the placed YAML, the directory it is launched from (the repository's root, or
    the YAML's own directory for a `../` reference) and the root."""
    row = origins[relative]
    config = yaml.safe_load((CORPUS / relative).read_text()) or {}
    ref = (config.get("deepspeed_config") or {}).get("deepspeed_config_file")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "repo"
        placed = root / row["path"]
        placed.parent.mkdir(parents=True)
        shutil.copy(CORPUS / relative, placed)
        launch_from = root
        if isinstance(ref, str):
            target = next((name for name, other in origins.items() if other["repo"] == row["repo"]
                           and other["path"].endswith("/" + Path(ref).name)), None)
            launch_from = root if not ref.startswith("..") else placed.parent
            if target is not None:
                destination = (launch_from / ref).resolve()
                destination.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy(CORPUS / target, destination)
        yield placed, launch_from, root


def judge_accelerate(relative: str, origins: dict[str, dict[str, str]]) -> Verdict:
    """Launch from a copy of the repository's layout: the YAML and the ds_config it names."""
    with repository_layout(relative, origins) as (placed, launch_from, root):
        verdict = accelerate_judge.judge(placed, directory=launch_from)
        tmp = str(root.parent)
    context = f"launched from the repository's {'root' if launch_from == root else 'config directory'}"
    return Verdict(verdict.outcome, verdict.engine, verdict.message.replace(tmp, "<tmp>"),
                   verdict.notes, context)


def launch_flags(launch: Any) -> tuple[list[tuple[str, str | None]], list[str]]:
    """A launch's `(name, value)` flags as the shell passes them, and those left to the environment."""
    flags, unknown = [], []
    for name, (_, value) in launch.flags.items():
        if value is not None and value.value is None:
            unknown.append(f"--{name}")
        else:
            flags.append((name, None if value is None else value.value))
    return flags, unknown


def judge_launch_script(relative: str) -> Verdict:
    """The Trainer's verdict on the first launch command of a script that passes the
    Trainer's batch flag, with the flags as the shell passes them (`engines.argv`, the
    reader lint uses: the verdict is transformers' on those words)."""
    from distrecipe.engines.argv import launches

    engine = hf_judge.version("transformers")
    if relative in NOT_TRAINER:
        return Verdict("not-judgeable", engine, f"not judgeable: {NOT_TRAINER[relative]}")
    text = (CORPUS / relative).read_text()
    launch = next((found for found in launches(text, relative) if "per_device_train_batch_size" in found.flags), None)
    if launch is None:
        return Verdict("not-judgeable", engine, "not judgeable: no launch command passes TrainingArguments")
    flags, unknown = launch_flags(launch)
    world = launch.world()[0] or hf_judge.WORLD_DEFAULT
    verdict = hf_judge.judge_flags(flags, world, own=OWN_FIELDS.get(relative),
                                   keeps_remaining=relative in KEEPS_REMAINING)
    context = verdict.context + ("; left to the environment: " + ", ".join(unknown) if unknown else "")
    return Verdict(verdict.outcome, verdict.engine, verdict.message, verdict.notes, context)


def judge_hf(relative: str) -> Verdict:
    path = CORPUS / relative
    data = json.loads(path.read_text()) if path.suffix == ".json" else yaml.safe_load(path.read_text())
    return hf_judge.judge(data)


def recorded() -> dict[str, Verdict]:
    """The verdicts RECORDED.csv holds for the tools this environment cannot install."""
    out = {}
    for tool in TOOLS:
        with (CORPUS / tool / "RECORDED.csv").open(newline="") as f:
            for row in csv.DictReader(f):
                notes = (Note((), row["why"]),) if row["why"] else ()
                out[f"{tool}/{row['file']}"] = Verdict(row["verdict"], row["engine"], row["message"],  # type: ignore[arg-type]
                                                       notes, row["context"])
    return out


def rows() -> Iterator[Row]:
    origins = provenance()
    verdicts = recorded()
    verl = None
    try:
        for relative in sorted(origins):
            kind = kind_of(relative)
            if kind in TOOLS:
                yield Row(relative, kind, verdicts[relative])
            elif kind == "deepspeed":
                yield Row(relative, kind, judge_deepspeed(relative))
            elif kind == "accelerate":
                yield Row(relative, kind, judge_accelerate(relative, origins))
            elif kind == "hf":
                yield Row(relative, kind, judge_hf(relative))
            elif kind == "hf-script":
                yield Row(relative, kind, judge_launch_script(relative))
            elif kind == "verl":
                from distrecipe.judges import verl as verl_judge

                verl = verl or verl_judge.VerlJudge()
                yield Row(relative, kind, verl_judge.judge_script(verl, (CORPUS / relative).read_text()))
    finally:
        if verl is not None:
            verl.close()


def render(table: list[Row]) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, COLUMNS, lineterminator="\n")
    writer.writeheader()
    for row in table:
        writer.writerow(row.cells())
    return out.getvalue()


if __name__ == "__main__":
    # `--out FILE`: write elsewhere (`scripts/drift.py` judges with another release)
    out = Path(sys.argv[sys.argv.index("--out") + 1]) if "--out" in sys.argv else TABLE
    out.write_text(render(list(rows())))
    sys.exit(0)
