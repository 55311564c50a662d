"""TRL's facts against the installed TRL: the table's commands and fields are what its
scripts hand `TrlParser`, and `grpo_violations` refuses exactly what `GRPOConfig` does."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest

from distrecipe.engines import trl
from distrecipe.engines.tables import releases, table_of
from tests import trl_judge

pytest.importorskip("trl")
ROOT = Path(__file__).resolve().parents[2]


def test_the_stored_table_is_the_installed_release_s() -> None:
    run = subprocess.run([sys.executable, str(ROOT / "scripts" / "engine_tables.py"), "--check", "trl"],
                         capture_output=True, text=True, cwd=ROOT, timeout=300, check=False)
    assert run.returncode == 0, run.stdout + run.stderr


def test_commands_and_fields_are_what_trl_parses() -> None:
    from transformers import TrainingArguments
    from trl import __version__

    stored = table_of("trl", __version__)
    trainer = {f.name for f in dataclasses.fields(TrainingArguments) if f.init}
    for command, names in stored["commands"].items():
        classes = trl_judge.parser(command).dataclass_types
        assert [c.__name__ for c in classes] == names, command
        for dataclass in classes:
            fields = {f.name for f in dataclasses.fields(dataclass) if f.init}
            table = set(stored["dataclasses"][dataclass.__name__]["fields"])
            assert table <= fields and fields - trainer <= table, (command, dataclass.__name__)
            assert trl.command_of(fields - {"config"}, command).accepted >= fields


def test_older_releases_name_the_renamed_fields() -> None:
    assert releases("trl")[0] == "0.17.0"
    sft = table_of("trl", "0.19.1")["dataclasses"]["SFTConfig"]["fields"]
    assert sft["max_seq_length"]["replaced_by"] == "max_length"
    assert "max_seq_length" not in table_of("trl", "0.20.0")["dataclasses"]["SFTConfig"]["fields"]
    assert trl.renamed("max_seq_length") == "max_length"


GRPO = [  # per_device, world, accumulation, generations, generation_batch, steps_per_generation
    (1, 7, 1, 8, None, None), (8, 7, 1, 7, None, None), (1, 8, 1, 8, None, None), (4, 3, 2, 8, None, None),
    (4, 3, 2, 6, None, None), (4, 3, 1, 8, 24, None), (4, 3, 1, 8, 20, None), (4, 4, 1, 8, 40, None),
    (4, 4, 1, 8, None, 3), (2, 2, 1, 8, None, 3), (2, 2, 1, 8, 8, 2), (4, 2, 1, 1, None, None),
    (3, 5, 4, 4, None, None), (16, 8, 1, 16, None, None),
]


@pytest.mark.parametrize("numbers", GRPO, ids=["-".join(map(str, n)) for n in GRPO])
def test_grpo_rules_are_grpoconfig_s(numbers: tuple[int, int, int, int, int | None, int | None],
                                    tmp_path: Path) -> None:
    per_device, world, accumulation, generations, generation_batch, steps = numbers
    values = {"model_name_or_path": "m", "per_device_train_batch_size": per_device, "output_dir": str(tmp_path),
              "gradient_accumulation_steps": accumulation, "num_generations": generations}
    if generation_batch is not None:
        values["generation_batch_size"] = generation_batch
    if steps is not None:
        values["steps_per_generation"] = steps
    refused = trl_judge.refusal_of(values, "grpo", tmp_path, world)
    found = trl.grpo_violations(trl.GrpoBatch(per_device, world, accumulation, generations, generation_batch,
                                              steps))
    assert bool(found) == (refused is not None), (refused, found)
    if found:  # the first violation is the one GRPOConfig raises, in its words
        words = {"both": "can not be both configured", "global": "must be divisible by the global batch size",
                 "groups": f"must be divisible by num_generations ({generations})", "two": "at least 2"}
        assert refused is not None and words[found[0].rule] in refused
