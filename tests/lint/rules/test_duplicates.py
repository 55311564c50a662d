"""DR303, DR304: a key written twice in one YAML mapping, read as the file's own reader reads it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from distrecipe.engines import KINDS
from distrecipe.engines.native import DUPLICATE_KEYS
from tests.conftest import Result
from tests.lint.rules.conftest import findings

ACCELERATE = """compute_environment: LOCAL_MACHINE
debug: false
distributed_type: FSDP
downcast_bf16: 'no'
fsdp_config:
  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP
  fsdp_backward_prefetch: BACKWARD_PRE
  fsdp_cpu_ram_efficient_loading: true
  fsdp_offload_params: false
  fsdp_sharding_strategy: HYBRID_SHARD
  fsdp_state_dict_type: SHARDED_STATE_DICT
  fsdp_version: 1
  fsdp_use_orig_params: true
  fsdp_version: 2
machine_rank: 0
main_training_function: main
mixed_precision: bf16
num_machines: 1
num_processes: 8
rdzv_backend: static
same_network: true
use_cpu: false
"""
VERL = """data:
  train_files: ~/data/gsm8k/train.parquet
  val_files: ~/data/gsm8k/test.parquet
  train_batch_size: 256
  max_prompt_length: 512
  max_response_length: 512
  train_batch_size: 1024
actor_rollout_ref:
  model:
    path: Qwen/Qwen2.5-0.5B-Instruct
  actor:
    ppo_mini_batch_size: 64
    ppo_micro_batch_size_per_gpu: 4
  rollout:
    name: vllm
    log_prob_micro_batch_size_per_gpu: 8
  ref:
    log_prob_micro_batch_size_per_gpu: 8
trainer:
  n_gpus_per_node: 8
  nnodes: 1
"""


def test_a_duplicate_key_is_a_warning_where_the_reader_keeps_the_last_value(tmp_path: Path) -> None:
    assert findings(tmp_path, "fsdp.yaml", ACCELERATE, "DR303") == [
        (14, 3, "duplicate key 'fsdp_config.fsdp_version' (line 12): Accelerate's loader (yaml.safe_load) "
                "reads the last value")]
    # and the file is judged with that last value: FSDP2, which drops the FSDP1 prefetch and HYBRID_SHARD
    assert [line for line, _, _ in findings(tmp_path, "fsdp.yaml", ACCELERATE, "DR342")] == [7]
    assert [line for line, _, _ in findings(tmp_path, "fsdp.yaml", ACCELERATE, "DR332")] == [10]


def test_a_duplicate_key_is_an_error_where_the_reader_refuses_the_file(tmp_path: Path) -> None:
    assert findings(tmp_path, "ppo.yaml", VERL, "DR304") == [
        (7, 3, "duplicate key 'data.train_batch_size' (line 4): verl's loader (OmegaConf) refuses the file: "
               "found duplicate key train_batch_size")]


def test_a_file_with_a_duplicate_key_is_linted_not_refused(cli: Callable[..., Result], tmp_path: Path) -> None:
    config = tmp_path / "fsdp.yaml"
    config.write_text(ACCELERATE)
    result = cli("lint", config)
    assert (result.code, result.err) == (1, "")  # read and judged: DR332's error, never exit 2
    assert "warning DR342" in result.out and "warning DR303" in result.out and "error DR332" in result.out
    notes = tmp_path / "mkdocs.yml"  # no config: with the hook's --ignore-unknown, skipped
    notes.write_text("site_name: Docs\nnav:\n  - Home: index.md\nsite_name: Training docs\n")
    assert cli("lint", "--ignore-unknown", notes).code == 0


def test_every_kind_s_reader_is_known_to_keep_the_last_value_or_refuse() -> None:
    assert set(DUPLICATE_KEYS) == set(KINDS)
