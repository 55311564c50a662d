"""Which kind a file is: Axolotl and LLaMA-Factory YAMLs among the Trainer's, and what is none."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from distrecipe.engines.native import detect, unsupported
from distrecipe.source import parse_text
from tests.conftest import Result


@pytest.mark.parametrize(("text", "kind"), [
    ("base_model: meta-llama/Llama-3.1-8B\nmicro_batch_size: 2\nlearning_rate: 2e-5\n", "axolotl"),
    ("base_model: x\nsequence_len: 4096\ndeepspeed: deepspeed_configs/zero2.json\n", "axolotl"),
    ("model_name_or_path: Qwen/Qwen3-4B\nstage: sft\nfinetuning_type: lora\n", "llamafactory"),
    ("model_name_or_path: Qwen/Qwen3-4B\nstage: dpo\nper_device_train_batch_size: 2\n", "llamafactory"),
    # TRL's and the alignment handbook's recipes: the script's own dataclasses beside the Trainer's
    ("model_name_or_path: Qwen/Qwen3-4B\ndataset_name: x\nper_device_train_batch_size: 2\n", "hf"),
    ("base_model: x\nper_device_train_batch_size: 2\n", "hf"),
    ("model: Qwen/Qwen3-0.6B\ndist_config: {name: fsdp2}\nmicro_batch_size: 1\nlearning_rate: 1.0e-4\n", None),
])
def test_kinds(text: str, kind: str | None) -> None:
    assert detect(parse_text(text, "c.yaml")) == kind


def test_a_named_file_of_no_kind_says_so(cli: Callable[..., Result], tmp_path: Path) -> None:
    v1 = tmp_path / "train_full_ulysses_cp.yaml"
    v1.write_text("model: Qwen/Qwen3-0.6B\ndist_config: {name: fsdp2}\ntrain_dataset: d.yaml\n"
                  "micro_batch_size: 1\noutput_dir: out\nlearning_rate: 1.0e-4\n")
    assert unsupported(parse_text(v1.read_text(), str(v1))) is not None
    result = cli("lint", v1)
    assert (result.code, result.err.strip()) == (2, (
        f"{v1}:1:1: error: not a config distrecipe reads (none of recipe, deepspeed, accelerate, verl, hf, "
        "axolotl, llamafactory, trainjob, rayjob, pytorchjob, skypilot, trl, openrlhf; a LLaMA-Factory v1 config, which its v1 trainer reads, not HfArgumentParser): "
        "pass --kind if it is one"))
    assert cli("lint", "--ignore-unknown", v1).code == 0
    walked = cli("lint", tmp_path)
    assert walked.code == 0
    assert walked.out == "0 files checked: 0 errors, 0 warnings, 0 infos; 1 other file skipped: not configs " \
                         "distrecipe reads\n"
