"""Refusals found by the real-world corpus: a launch without a process count (DR348), and
TrainingArguments files written for transformers 4 (DR361, DR362)."""

from __future__ import annotations

from pathlib import Path

import pytest

from distrecipe.lint.config import LintConfig
from distrecipe.lint.engine import lint
from distrecipe.lint.rules import hf

FSDP = "distributed_type: FSDP\nfsdp_config:\n  fsdp_version: 2\n  fsdp_reshard_after_forward: true\n"


def findings(tmp_path: Path, code: str) -> list[str]:
    report = lint([tmp_path], config=LintConfig())
    assert not report.unusable
    return [f"{Path(f.where.file).name}:{f.where.line} {f.message}" for f in report.findings
            if f.code == code and f.where]


@pytest.mark.parametrize("launch", [
    "accelerate launch --num_processes 8 --config_file fsdp.yaml train.py",
    "accelerate launch --config_file=fsdp.yaml --num-processes $NPROC train.py",
])
def test_a_launch_that_passes_the_count_makes_the_file_usable(tmp_path: Path, launch: str) -> None:
    (tmp_path / "fsdp.yaml").write_text(FSDP)
    (tmp_path / "run.sh").write_text(f"#!/bin/bash\n{launch}\n")
    assert findings(tmp_path, "DR348") == []


def test_the_launch_without_the_count_is_named(tmp_path: Path) -> None:
    (tmp_path / "fsdp.yaml").write_text(FSDP)
    (tmp_path / "run.sh").write_text("#!/bin/bash\naccelerate launch --num_processes 8 --config_file fsdp.yaml a.py\n"
                                     "accelerate launch --config_file fsdp.yaml b.py\n")
    assert findings(tmp_path, "DR348") == [
        "fsdp.yaml:1 no num_processes with distributed_type FSDP: accelerate launch refuses this file "
        "(\"You need to manually pass in `--num_processes`\") run.sh:3 launches it without --num_processes"]


@pytest.mark.parametrize("config", ["distributed_type: 'NO'\n", "distributed_type: MULTI_GPU\nnum_processes: 2\n"])
def test_one_process_or_a_count_is_enough(tmp_path: Path, config: str) -> None:
    (tmp_path / "accelerate.yaml").write_text(config + "mixed_precision: bf16\n")
    assert findings(tmp_path, "DR348") == []


def test_best_model_with_matching_or_best_save_strategy_passes(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text('{"output_dir": "o", "eval_strategy": "epoch", "save_strategy": "epoch", '
                                     '"load_best_model_at_end": true}')
    (tmp_path / "b.json").write_text('{"output_dir": "o", "save_strategy": "best", "load_best_model_at_end": true}')
    assert findings(tmp_path, "DR361") == []


def test_the_renamed_field_is_named_as_the_cause(tmp_path: Path) -> None:
    (tmp_path / "args.json").write_text('{"output_dir": "o",\n "evaluation_strategy": "steps",\n'
                                        ' "load_best_model_at_end": true}')
    [message] = findings(tmp_path, "DR361")
    assert message.startswith("args.json:3 load_best_model_at_end with eval_strategy no and save_strategy steps "
                              "(evaluation_strategy is no TrainingArguments field in transformers ")
    # only TrainingArguments keys: HfArgumentParser reads the file and refuses the key (DR366)
    assert findings(tmp_path, "DR366")[0].startswith("args.json:2 evaluation_strategy is no TrainingArguments "
                                                     "field in transformers ")


def test_a_removed_field_the_installed_transformers_has_again_is_not_reported(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "args.json").write_text('{"output_dir": "o", "no_cuda": true}')
    assert findings(tmp_path, "DR366")
    monkeypatch.setattr(hf, "training_arguments", lambda: frozenset({"output_dir", "no_cuda"}))
    assert findings(tmp_path, "DR366") == findings(tmp_path, "DR362") == []
