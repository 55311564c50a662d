"""The trainers' verdicts on `tests/corpus/rl/`: public TRL configs and OpenRLHF launch
scripts, each judged by the program that reads it, beside lint's.

* an open-r1 recipe: TrlParser over open-r1's own dataclasses (`programs/`, its
  `configs.py` at the recipe's commit: `grpo.py` and `sft.py` hand TrlParser
  `(GRPOScriptArguments, GRPOConfig, ModelConfig)` and `(ScriptArguments, SFTConfig,
  ModelConfig)`), at 8 processes (its Accelerate configs' `num_processes`);
* TRL's own example: `trl sft --config FILE` (what its header says);
* an OpenRLHF script: its entry module's parser and DeepSpeed on the ds_config OpenRLHF
  builds (`tests/openrlhf_judge.py`).

`python -m tests.rl_corpus` prints every file's two verdicts and the false errors and
misses of each split (`dev`, `held-out`: PROVENANCE.csv's `split`).
"""

from __future__ import annotations

import csv
import importlib.util
import re
import shlex
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import ModuleType

from distrecipe.lint.config import LintConfig
from distrecipe.lint.engine import lint
from tests import openrlhf_judge, trl_judge

CORPUS = Path(__file__).resolve().parent / "corpus" / "rl"
PROGRAMS = CORPUS / "programs"
WORLD = 8
"""open-r1's Accelerate configs run 8 processes (`recipes/accelerate_configs/*.yaml`)."""


def provenance() -> list[dict[str, str]]:
    with (CORPUS / "PROVENANCE.csv").open(newline="") as f:
        return list(csv.DictReader(f))


@cache
def open_r1() -> ModuleType:
    path = PROGRAMS / "huggingface__open-r1__src__open_r1__configs.py"
    spec = importlib.util.spec_from_file_location("open_r1_configs", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@dataclass(frozen=True)
class Row:
    file: str
    split: str
    world: int | None
    engine: str | None
    """Why the trainer stops, or None where it starts."""
    lint: tuple[str, ...]
    """lint's error findings."""

    @property
    def judged(self) -> bool:
        return self.engine != NOT_JUDGEABLE

    @property
    def false_error(self) -> bool:
        return self.engine is None and bool(self.lint)

    @property
    def miss(self) -> bool:
        return self.judged and self.engine is not None and not self.lint


NOT_JUDGEABLE = "not judgeable: its arguments are bash arrays"


def judge(file: str) -> tuple[str | None, int | None]:
    """The trainer's verdict on one corpus file, and the world it was judged at."""
    path = CORPUS / file
    if file.startswith("huggingface__open-r1__"):
        from trl import ModelConfig, TrlParser

        configs = open_r1()
        grpo = "__grpo__" in file
        classes = ((configs.GRPOScriptArguments, configs.GRPOConfig, ModelConfig) if grpo
                   else (configs.ScriptArguments, configs.SFTConfig, ModelConfig))
        return trl_judge.parser_refusal(TrlParser(classes), path, WORLD), WORLD
    if file.startswith("huggingface__trl__"):
        return trl_judge.refusal("sft", path), None
    found = openrlhf_command(path)
    if found is None:
        return NOT_JUDGEABLE, None
    module, argv = found
    return openrlhf_judge.verdict(module, argv), None


HEREDOC = re.compile(r"<<\s*'?(\w+)'?\n(openrlhf\.cli\.train_\w+)(.*?)\n\1\n", re.S)
"""OpenRLHF's non-Ray examples write the command into a heredoc variable
(`read -r -d '' training_commands <<EOF`) and run `deepspeed --module $training_commands`."""


QUOTED = re.compile(r'-m (openrlhf\.cli\.train_\w+)(.*?)(?<!\\)"', re.S)
"""A command inside `bash -c "..."` (OpenRLHF's SLURM example), up to the closing quote."""


def openrlhf_command(path: Path) -> tuple[str, list[str]] | None:
    """The entry module a script runs and its arguments, as the shell hands them over."""
    from distrecipe.engines.openrlhf import command

    text = path.read_text()
    found = command(text, str(path))
    if found is not None:
        module, words = found
        if any("[@]" in word.text for word in words):
            return None  # bash arrays ("${ARGS[@]}"): what they hold is not read
        return module, [word.value if word.value is not None else "x" for word in words]
    heredoc = HEREDOC.search(text)
    if heredoc is not None:
        return heredoc[2], shlex.split(heredoc[3].replace("\\\n", " "))
    quoted = QUOTED.search(text)  # `srun ... bash -c "... python3 -m openrlhf.cli.train_ppo_ray ..."`
    if quoted is not None:
        return quoted[1], shlex.split(quoted[2].replace("\\\n", " "))
    return None


def rows() -> list[Row]:
    out = []
    for entry in provenance():
        engine, world = judge(entry["file"])
        report = lint([CORPUS / entry["file"]], config=LintConfig(), world=world)
        errors = tuple(f"{f.code} {f.where.line if f.where else 0}: {f.message}" for f in report.findings
                       if f.severity == "error") + tuple(f"unusable: {u.message}" for u in report.unusable)
        out.append(Row(entry["file"], entry["split"], world, engine, errors))
    return out


def main() -> int:
    table = rows()
    for row in table:
        verdict = "refuses" if row.engine else "accepts"
        verdict = verdict if row.judged else "n/a"
        print(f"{row.split:8} {verdict:7} lint={len(row.lint)} {row.file}")
        if row.engine:
            print(f"    engine: {row.engine[:300]}")
        for error in row.lint:
            print(f"    lint: {error[:300]}")
    for split in ("dev", "held-out"):
        part = [row for row in table if row.split == split]
        judged = [row for row in part if row.judged]
        print(f"{split}: {len(part)} files, {len(judged)} judged, "
              f"{sum(r.engine is not None for r in judged)} refused by the trainer, "
              f"{sum(r.false_error for r in part)} false errors, {sum(r.miss for r in part)} misses")
    return 0


if __name__ == "__main__":
    sys.exit(main())
