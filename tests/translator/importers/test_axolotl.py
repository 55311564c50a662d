"""import of an Axolotl YAML: the Trainer arguments Axolotl builds, and the ds_config it names."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from tests.conftest import Result

YAML = """base_model: meta-llama/Llama-3.1-8B
datasets:
  - path: tatsu-lab/alpaca
    type: alpaca
sequence_len: 4096
micro_batch_size: 2
gradient_accumulation_steps: 4
num_epochs: 1
learning_rate: 2e-5
bf16: auto
gradient_checkpointing: true
deepspeed: deepspeed_configs/zero3.json
"""
DS = '{"zero_optimization": {"stage": 3}, "bf16": {"enabled": "auto"}, "train_micro_batch_size_per_gpu": "auto"}\n'


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A checkout with the YAML under examples/ and its ds_config where Axolotl opens it:
    from the repository's root."""
    (tmp_path / "examples").mkdir()
    (tmp_path / "deepspeed_configs").mkdir()
    (tmp_path / "examples" / "fft.yml").write_text(YAML)
    (tmp_path / "deepspeed_configs" / "zero3.json").write_text(DS)
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    monkeypatch.chdir(tmp_path / "examples")  # anywhere in the checkout
    return tmp_path


def test_batch_precision_and_the_ds_config(cli: Callable[..., Result], repo: Path) -> None:
    result = cli("import", repo / "examples" / "fft.yml", "--world", "8")
    assert result.code == 0, result.err
    recipe = yaml.safe_load(result.out)
    assert recipe["batch"] == {"micro": 2, "accumulation": 4, "global": "auto"}
    assert (recipe["strategy"], recipe["stage"], recipe["precision"]) == ("zero", 3, "bf16")
    assert recipe["optimizer"]["lr"] == 2e-5 and recipe["activation_checkpointing"] is True
    assert "bf16: auto is bf16 on a GPU that has it" in result.err


def test_a_ds_config_the_repository_lacks_is_named(cli: Callable[..., Result], repo: Path) -> None:
    (repo / "deepspeed_configs" / "zero3.json").unlink()
    result = cli("import", repo / "examples" / "fft.yml", "--world", "8")
    assert result.code == 2
    assert result.err.startswith(f"{repo / 'examples' / 'fft.yml'}:12:12: error: deepspeed names "
                                 "'deepspeed_configs/zero3.json', which is not a regular file (opened from")


def test_fsdp2_and_the_parallel_degrees(cli: Callable[..., Result], tmp_path: Path) -> None:
    text = YAML.replace("deepspeed: deepspeed_configs/zero3.json\n", "fsdp_version: 2\nfsdp_config:\n"
                        "  offload_params: true\n  reshard_after_forward: true\n"
                        "  transformer_layer_cls_to_wrap: LlamaDecoderLayer\ncontext_parallel_size: 2\n")
    (tmp_path / "fsdp.yml").write_text(text)
    result = cli("import", tmp_path / "fsdp.yml", "--world", "8")
    assert result.code == 0, result.err
    recipe = yaml.safe_load(result.out)
    assert (recipe["strategy"], recipe["stage"], recipe["offload"]) == ("fsdp", 3, {"optimizer": "cpu",
                                                                                      "params": "cpu"})
    assert recipe["model"]["layer_cls"] == "LlamaDecoderLayer"
    assert "context_parallel_size 2 go to Accelerate's ParallelismConfig" in result.err
