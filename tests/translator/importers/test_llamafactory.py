"""import of a LLaMA-Factory YAML: the Trainer's own names, the ds_config from the repository's root."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from tests.conftest import Result

YAML = """model_name_or_path: Qwen/Qwen3-4B-Instruct-2507
stage: sft
do_train: true
finetuning_type: lora
lora_target: all
deepspeed: examples/deepspeed/ds_z3_config.json
dataset: identity,alpaca_en_demo
template: qwen3_nothink
output_dir: saves/qwen3-4b/lora/sft
per_device_train_batch_size: 1
gradient_accumulation_steps: 2
learning_rate: 1.0e-4
bf16: true
"""


def test_batch_precision_and_the_ds_config(cli: Callable[..., Result], tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "examples" / "train_lora").mkdir(parents=True)
    (tmp_path / "examples" / "deepspeed").mkdir()
    (tmp_path / "examples" / "train_lora" / "sft.yaml").write_text(YAML)
    (tmp_path / "examples" / "deepspeed" / "ds_z3_config.json").write_text(
        '{"train_micro_batch_size_per_gpu": "auto", "zero_optimization": {"stage": 3}}')
    monkeypatch.chdir(tmp_path)  # llamafactory-cli runs from the repository's root
    result = cli("import", "examples/train_lora/sft.yaml", "--world", "4")
    assert result.code == 0, result.err
    recipe = yaml.safe_load(result.out)
    assert recipe["batch"] == {"micro": 1, "accumulation": 2, "global": "auto"}
    assert (recipe["strategy"], recipe["stage"], recipe["precision"]) == ("zero", 3, "bf16")
    assert "LLaMA-Factory settings are not a recipe's" in result.err
    assert "lora_target" not in result.out and "template" not in result.out
