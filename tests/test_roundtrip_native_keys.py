"""Issue 27: a setting carried between DeepSpeed and Accelerate is kept, or named by the key
the user wrote.

Each file here is modelled on one in a public repository (named above it). A trip is
`tests.roundtrip.trip`: import, compile for another engine (or the same), import that,
compile back, then `distrecipe diff` against the input; a changed key counts as named only
when something printed along the way spells the native key (`main_process_port`, not
`launch.master_port`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from distrecipe.errors import LaunchError
from distrecipe.launch.handoff import handoff
from distrecipe.source import Document
from distrecipe.translator import accelerate, carry, deepspeed
from distrecipe.translator.importers.registry import import_document, read_native
from distrecipe.translator.load import recipe_from_document
from distrecipe.translator.resolve import resolve
from tests.roundtrip import Trip, in_process, named, trip

# hiyouga/LLaMA-Factory examples/accelerate/master_config.yaml: two nodes, a port of its own.
MULTI_NODE = """\
compute_environment: LOCAL_MACHINE
debug: false
distributed_type: MULTI_GPU
downcast_bf16: 'no'
machine_rank: 0
main_process_ip: 192.168.0.1
main_process_port: 29555
main_training_function: main
mixed_precision: fp16
num_machines: 2
num_processes: 16
rdzv_backend: static
same_network: true
use_cpu: false
"""

# hiyouga/LLaMA-Factory examples/accelerate/fsdp_v1_offload_config.yaml, on two nodes: no
# num_processes (the launcher is told it), num_machines stated.
NO_PROCESSES = """\
debug: false
distributed_type: FSDP
downcast_bf16: 'no'
fsdp_config:
  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP
  fsdp_backward_prefetch: BACKWARD_PRE
  fsdp_cpu_ram_efficient_loading: true
  fsdp_offload_params: true
  fsdp_sharding_strategy: FULL_SHARD
  fsdp_state_dict_type: FULL_STATE_DICT
  fsdp_sync_module_states: true
  fsdp_use_orig_params: false
main_process_port: 29501
mixed_precision: bf16
num_machines: 2
"""

# huggingface/peft examples/sft/configs/fsdp_config.yaml, with the wrap class
# huggingface/alignment-handbook's FSDP recipes name.
FSDP1 = """\
compute_environment: LOCAL_MACHINE
debug: false
distributed_type: FSDP
downcast_bf16: 'no'
fsdp_config:
  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP
  fsdp_backward_prefetch: BACKWARD_PRE
  fsdp_cpu_ram_efficient_loading: true
  fsdp_forward_prefetch: false
  fsdp_offload_params: false
  fsdp_sharding_strategy: SHARD_GRAD_OP
  fsdp_state_dict_type: SHARDED_STATE_DICT
  fsdp_sync_module_states: true
  fsdp_transformer_layer_cls_to_wrap: MistralDecoderLayer
  fsdp_use_orig_params: false
machine_rank: 0
main_training_function: main
mixed_precision: bf16
num_machines: 1
num_processes: 8
rdzv_backend: static
same_network: true
use_cpu: false
"""

# huggingface/trl examples/accelerate_configs/deepspeed_zero3.yaml: the DeepSpeed plugin inline.
ZERO3_PLUGIN = """\
compute_environment: LOCAL_MACHINE
debug: false
deepspeed_config:
  deepspeed_multinode_launcher: standard
  offload_optimizer_device: none
  offload_param_device: none
  zero3_init_flag: true
  zero3_save_16bit_model: true
  zero_stage: 3
distributed_type: DEEPSPEED
downcast_bf16: 'no'
machine_rank: 0
main_training_function: main
mixed_precision: bf16
num_machines: 1
num_processes: 8
rdzv_backend: static
same_network: true
use_cpu: false
"""

# hiyouga/LLaMA-Factory examples/accelerate/ds_multi_nodes.yaml and the ds_config it names.
DS_FILE_YAML = """\
debug: false
deepspeed_config:
  deepspeed_config_file: examples/deepspeed/ds_z3_offload_config.json
  deepspeed_multinode_launcher: standard
  zero3_init_flag: true
distributed_type: DEEPSPEED
num_processes: 16
downcast_bf16: 'no'
main_training_function: main
rdzv_backend: c10d
same_network: false
use_cpu: false
"""
DS_Z3_OFFLOAD: dict[str, Any] = {
    "train_batch_size": "auto", "train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": "auto",
    "gradient_clipping": "auto", "zero_allow_untested_optimizer": True,
    "fp16": {"enabled": "auto", "loss_scale": 0, "loss_scale_window": 1000, "initial_scale_power": 16,
             "hysteresis": 2, "min_loss_scale": 1},
    "bf16": {"enabled": "auto"},
    "zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu", "pin_memory": True},
                          "offload_param": {"device": "cpu", "pin_memory": True}, "overlap_comm": False,
                          "contiguous_gradients": True, "reduce_bucket_size": "auto",
                          "stage3_prefetch_bucket_size": "auto", "stage3_param_persistence_threshold": "auto",
                          "stage3_gather_16bit_weights_on_model_save": True},
}

# LianjiaTech/BELLE train/configs/deepspeed_config.json: AdamW and WarmupDecayLR, numbers stated.
WARMUP_DECAY: dict[str, Any] = {
    "bf16": {"enabled": True},
    "optimizer": {"type": "AdamW", "params": {"lr": 2e-5, "betas": [0.9, 0.95], "eps": 1e-8,
                                              "weight_decay": 0.0}},
    "scheduler": {"type": "WarmupDecayLR", "params": {"warmup_min_lr": 0, "warmup_max_lr": 2e-5,
                                                      "warmup_num_steps": 100, "total_num_steps": 3000}},
    "zero_optimization": {"stage": 2, "overlap_comm": True, "contiguous_gradients": True},
    "gradient_accumulation_steps": 4,
    "gradient_clipping": 1.0,
    "train_micro_batch_size_per_gpu": 2,
    "wall_clock_breakdown": False,
}

# huggingface/accelerate examples/config_yaml_templates/fsdp.yaml: no mixed_precision.
NO_PRECISION = """\
compute_environment: LOCAL_MACHINE
distributed_type: MULTI_GPU
machine_rank: 0
num_machines: 1
num_processes: 4
use_cpu: false
"""


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def travel(tmp_path: Path, path: Path, start: str, via: str, world: list[str] | None = None) -> Trip:
    work = tmp_path / f"trip-{via}"
    work.mkdir()
    return trip(in_process, path, start, via, work, world)


def said(argv: list[str]) -> str:
    """What one command prints on stderr (its findings and notes)."""
    code, _, err = in_process(argv)
    assert code == 0, err
    return err


def compiled(tmp_path: Path, recipe: Path, target: str) -> Path:
    out = tmp_path / f"out-{target}"
    said(["compile", str(recipe), "--target", target, "-o", str(out)])
    return out


def imported(path: Path, *world: str) -> tuple[dict[str, Any], str]:
    code, out, err = in_process(["import", str(path), *world])
    assert code == 0, err
    return yaml.safe_load(out), err


# 1. A stated main_process_port or num_machines is never replaced by the default.


def test_an_accelerate_yaml_compiles_back_with_its_port_and_machines(tmp_path: Path) -> None:
    recipe, _ = imported(write(tmp_path, "master_config.yaml", MULTI_NODE))
    (tmp_path / "r.yaml").write_text(yaml.safe_dump(recipe), encoding="utf-8")
    back = yaml.safe_load((compiled(tmp_path, tmp_path / "r.yaml", "accelerate") / "accelerate_config.yaml")
                          .read_text(encoding="utf-8"))
    assert (back["main_process_port"], back["num_machines"], back["num_processes"]) == (29555, 2, 16)


def test_num_machines_without_num_processes_keeps_its_nodes(tmp_path: Path) -> None:
    """`--world 16` alone tells the ranks; the file's `num_machines: 2` still says the nodes
    (before: 1 node of 16, the `--nodes` default, with a note that num_machines "disagrees")."""
    path = write(tmp_path, "fsdp_offload.yaml", NO_PROCESSES)
    recipe, _ = imported(path, "--world", "16")
    assert recipe["cluster"] == {"nodes": 2, "gpus_per_node": 8}
    (tmp_path / "r.yaml").write_text(yaml.safe_dump(recipe), encoding="utf-8")
    back = yaml.safe_load((compiled(tmp_path, tmp_path / "r.yaml", "accelerate") / "accelerate_config.yaml")
                          .read_text(encoding="utf-8"))
    assert (back["num_machines"], back["main_process_port"]) == (2, 29501)
    assert "num_processes" not in back  # the file left it to the launcher, and so does the copy
    code, _, err = in_process(["import", str(path), "--world", "16", "--nodes", "4"])
    assert code == 2 and "num_machines 2 contradicts --nodes 4" in err


@pytest.mark.parametrize("via", ["deepspeed", "hf"])
def test_a_port_no_other_file_holds_is_named_main_process_port(tmp_path: Path, via: str) -> None:
    result = travel(tmp_path, write(tmp_path, "master_config.yaml", MULTI_NODE), "accelerate", via)
    assert result.silent == [], result
    assert "main_process_port" in result.named


# 2. FSDP and DeepSpeed-plugin keys are carried where the target can say them, else named.


@pytest.mark.parametrize("via", ["accelerate", "deepspeed", "hf"])
def test_fsdp1_keys_are_carried_or_named(tmp_path: Path, via: str) -> None:
    result = travel(tmp_path, write(tmp_path, "fsdp_config.yaml", FSDP1), "accelerate", via)
    assert result.silent == [], result
    if via == "deepspeed":  # ZeRO has no wrap class and, at stage 2, no sharded checkpoint
        assert {"fsdp_config.fsdp_transformer_layer_cls_to_wrap", "fsdp_config.fsdp_state_dict_type",
                "fsdp_config.fsdp_sharding_strategy"} <= set(result.named)


def test_the_wrap_class_a_ds_config_cannot_hold_is_named_by_its_key(tmp_path: Path) -> None:
    recipe, _ = imported(write(tmp_path, "fsdp_config.yaml", FSDP1))
    (tmp_path / "r.yaml").write_text(yaml.safe_dump(recipe), encoding="utf-8")
    err = said(["compile", str(tmp_path / "r.yaml"), "--target", "deepspeed", "-o", str(tmp_path / "o")])
    assert "fsdp_config.fsdp_transformer_layer_cls_to_wrap" in err
    assert "fsdp_config.fsdp_state_dict_type" in err


@pytest.mark.parametrize("via", ["accelerate", "deepspeed", "hf"])
def test_the_deepspeed_plugins_keys_are_carried_or_named(tmp_path: Path, via: str) -> None:
    result = travel(tmp_path, write(tmp_path, "deepspeed_zero3.yaml", ZERO3_PLUGIN), "accelerate", via)
    assert result.silent == [], result


def test_zero3_init_flag_lost_with_the_launcher_is_named(tmp_path: Path) -> None:
    recipe, _ = imported(write(tmp_path, "deepspeed_zero3.yaml", ZERO3_PLUGIN))
    (tmp_path / "r.yaml").write_text(yaml.safe_dump(recipe), encoding="utf-8")
    err = said(["compile", str(tmp_path / "r.yaml"), "--target", "deepspeed", "-o", str(tmp_path / "o")])
    assert "distributed_type" in err and "deepspeed_config.zero3_init_flag" in err


@pytest.mark.parametrize("via", ["accelerate", "deepspeed", "hf"])
def test_a_named_ds_config_file_is_carried_or_named(tmp_path: Path, via: str) -> None:
    yaml_path = write(tmp_path, "repo/examples/accelerate/ds_multi_nodes.yaml", DS_FILE_YAML)
    write(tmp_path, "repo/examples/accelerate/examples/deepspeed/ds_z3_offload_config.json",
          json.dumps(DS_Z3_OFFLOAD, indent=2))
    result = travel(tmp_path, yaml_path, "accelerate", via)
    assert result.silent == [], result


def test_import_says_a_named_ds_config_is_read_into_the_recipe(tmp_path: Path) -> None:
    yaml_path = write(tmp_path, "ds_multi_nodes.yaml", DS_FILE_YAML)
    write(tmp_path, "examples/deepspeed/ds_z3_offload_config.json", json.dumps(DS_Z3_OFFLOAD))
    _, err = imported(yaml_path)
    assert "deepspeed_config.deepspeed_config_file examples/deepspeed/ds_z3_offload_config.json" in err


@pytest.mark.parametrize("via", ["accelerate", "deepspeed", "hf"])
def test_warmup_decay_and_the_optimizer_are_carried_or_named(tmp_path: Path, via: str) -> None:
    path = write(tmp_path, "deepspeed_config.json", json.dumps(WARMUP_DECAY, indent=2))
    result = travel(tmp_path, path, "deepspeed", via)
    assert result.silent == [], result
    if via == "accelerate":  # Accelerate builds no optimizer or scheduler
        assert {"scheduler.type", "optimizer.type"} <= set(result.named)
    if via == "hf":  # TrainingArguments say all of it
        assert result.outcome == "same", result


# 3. A loss is named by the native key the user wrote.


def test_a_lost_setting_is_named_by_the_key_the_user_wrote(tmp_path: Path) -> None:
    recipe, _ = imported(write(tmp_path, "deepspeed_config.json", json.dumps(WARMUP_DECAY)), "--world", "8")
    (tmp_path / "r.yaml").write_text(yaml.safe_dump(recipe), encoding="utf-8")
    err = said(["compile", str(tmp_path / "r.yaml"), "--target", "accelerate", "-o", str(tmp_path / "o")])
    for key in ("gradient_clipping", "optimizer.type", "optimizer.params.lr", "scheduler.type",
                "scheduler.params.warmup_num_steps", "scheduler.params.total_num_steps"):
        assert named(key, err), key
    recipe, _ = imported(write(tmp_path, "master_config.yaml", MULTI_NODE))
    (tmp_path / "m.yaml").write_text(yaml.safe_dump(recipe), encoding="utf-8")
    err = said(["compile", str(tmp_path / "m.yaml"), "--target", "deepspeed", "-o", str(tmp_path / "p")])
    assert named("main_process_port", err) and named("main_process_ip", err)


def test_a_field_the_files_carry_spells_its_native_keys() -> None:
    """The carry table: every exact and mapped cell's keys appear in its text, and every
    field a file cannot carry has a key in some other file, or is not a file's at all."""
    for key, row in carry.FIELDS.items():
        for engine in carry.COLUMN_ORDER:
            cell = row.cell(engine)
            for native in cell.keys:
                assert native in cell.native, (key, engine, native)
            if cell.how == "exact":
                assert cell.keys == (cell.native,)
    assert carry.spelled("grad_clip") == ("gradient_clipping in a ds_config, actor_rollout_ref.actor.optim."
                                          "clip_grad in verl, max_grad_norm in TrainingArguments, "
                                          "--actor.max_norm in OpenRLHF's command line")
    assert carry.spelled("launch.master_port") == "main_process_port in an Accelerate YAML"
    assert carry.spelled("launch.backend", "deepspeed") == ""


def test_a_native_null_that_removes_a_field_names_it(tmp_path: Path) -> None:
    """A ds_config the Trainer fed has no optimizer (`native.deepspeed.optimizer: null`): a
    ds_config alone then loses the recipe's learning rate, and says so."""
    doc = {"recipe": 1, "name": "t", "model": {}, "cluster": {"nodes": 1, "gpus_per_node": 8}, "strategy": "zero",
           "stage": 2, "batch": {"micro": 1, "accumulation": 2}, "precision": "bf16",
           "optimizer": {"name": "adamw", "lr": 1e-4}, "native": {"deepspeed": {"optimizer": None}}}
    plan = resolve(recipe_from_document(Document(doc, "t.yaml"), tmp_path))
    text = " ".join(f.message for f in deepspeed.findings(plan))
    assert "optimizer.lr 0.0001 (as optimizer.params.lr in a ds_config" in text
    assert "native.deepspeed.optimizer is null" in text


# 4. A YAML without mixed_precision: the program decides, and import says so.


def test_an_unstated_mixed_precision_is_the_programs_and_said(tmp_path: Path) -> None:
    path = write(tmp_path, "multi_gpu.yaml", NO_PRECISION)
    recipe, err = imported(path)
    assert recipe["precision"] == "auto"
    assert "mixed_precision is not stated" in err
    (tmp_path / "r.yaml").write_text(yaml.safe_dump(recipe), encoding="utf-8")
    back = yaml.safe_load((compiled(tmp_path, tmp_path / "r.yaml", "accelerate") / "accelerate_config.yaml")
                          .read_text(encoding="utf-8"))
    assert "mixed_precision" not in back


def test_launch_does_not_tell_a_trainer_bf16_false_the_file_never_said(tmp_path: Path) -> None:
    kind, doc = read_native(write(tmp_path, "multi_gpu.yaml", NO_PRECISION))
    data = import_document(kind, doc, None).recipe
    data["batch"] = {"micro": 2, "accumulation": 1}
    plan = resolve(recipe_from_document(Document({**data, "name": "t"}, "t.yaml"), tmp_path))
    configs = {"accelerate_config.yaml": accelerate.text(plan)}
    given = handoff("hf", plan, user_args=[], run_dir=tmp_path, configs=configs)
    assert not {"--bf16", "--fp16"} & set(given.args), given.args
    try:  # the Trainer's own --bf16 is the user's to give
        handoff("hf", plan, user_args=["--bf16"], run_dir=tmp_path, configs=configs)
    except LaunchError as exc:
        pytest.fail(f"--bf16 refused: {exc}")


def test_a_stated_mixed_precision_no_is_still_fp32(tmp_path: Path) -> None:
    recipe, err = imported(write(tmp_path, "no.yaml", NO_PRECISION + "mixed_precision: 'no'\n"))
    assert recipe["precision"] == "fp32" and "mixed_precision is not stated" not in err

