"""`distrecipe import` as a user meets it: a native file in, a recipe that compiles out."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from distrecipe.recipe import slug
from distrecipe.schemas import recipe_schema
from tests.conftest import RECIPES, Result

CORPUS = Path(__file__).parent / "lint_corpus"
REAL = Path(__file__).parent / "corpus" / "real" / "deepspeed"


def test_ds_config_becomes_a_recipe_that_compiles_back(cli: Callable[..., Result], tmp_path: Path) -> None:
    assert cli("compile", RECIPES / "seed-8b-32gpu-zero2.yaml", "-o", tmp_path / "a").code == 0
    result = cli("import", tmp_path / "a" / "ds_config.json", "--world", "32", "--nodes", "4")
    assert result.code == 0, result.err
    assert result.out.startswith(f"# Imported by distrecipe from {tmp_path / 'a' / 'ds_config.json'} (deepspeed).\n")
    recipe = yaml.safe_load(result.out)
    assert (recipe["strategy"], recipe["stage"], recipe["batch"]) == (
        "zero", 2, {"global": 256, "micro": 2, "accumulation": 4})
    assert recipe["model"] == {"hidden_size": 4096}  # from reduce_bucket_size = hidden²
    (tmp_path / "back.yaml").write_text(result.out)
    assert cli("compile", tmp_path / "back.yaml", "-o", tmp_path / "b").code == 0
    assert (tmp_path / "a" / "ds_config.json").read_text() == (tmp_path / "b" / "ds_config.json").read_text()


def test_floor_case_is_refused_with_the_reason(cli: Callable[..., Result]) -> None:
    result = cli("import", CORPUS / "DR102" / "ds-floor-micro" / "ds_config.json", "--world", "4")
    assert result.code == 2
    assert "the imported recipe does not resolve: batch.micro = global / (accumulation × DP) = 30 / (1 × 4)" \
        in result.err
    assert "Traceback" not in result.err


def test_world_is_required_where_the_file_does_not_say(cli: Callable[..., Result]) -> None:
    result = cli("import", CORPUS / "DR101" / "ds-product-wrong" / "ds_config.json")
    assert result.code == 2
    assert result.err.strip().endswith("a ds_config does not say how many ranks it runs on: pass --world N "
                                       "(and --nodes K)")


def test_accelerate_without_batch_imports_with_the_batch_left_to_the_script(
        cli: Callable[..., Result], write: Callable[[str, str], Path]) -> None:
    path = CORPUS / "DR332" / "hybrid-shard-lost" / "accelerate_config.yaml"
    imported = cli("import", path)
    assert imported.code == 0, imported.err
    assert "DataLoader's batch_size" in imported.err and "--set batch.micro=N" in imported.err
    recipe = yaml.safe_load(imported.out)
    assert recipe["batch"] == {"micro": "auto", "accumulation": "auto", "global": "auto"}
    # Nothing invented: the Accelerate config has no batch, so compile writes it with the
    # header naming the script; plan needs numbers and refuses at batch.micro until given.
    saved = write("imported.yaml", imported.out)
    written = cli("compile", saved, "--target", "accelerate", "-o", saved.parent / "script")
    assert written.code == 0, written.err
    assert "DataLoader" in (saved.parent / "script" / "accelerate_config.yaml").read_text()
    refused = cli("plan", saved, "--set", "model.params=1e9")
    batch_line = 1 + imported.out.splitlines().index(next(line for line in imported.out.splitlines()
                                                          if line.startswith("batch:")))
    assert refused.code == 2 and f"imported.yaml:{batch_line}:" in refused.err, refused.err
    assert "--set batch.micro=" in refused.err and len(refused.err.strip().splitlines()) == 1
    assert cli("lint", saved).code == 0
    compiled = cli("compile", saved, "--target", "accelerate", "-o", saved.parent / "out",
                   "--set", "batch.micro=2", "--set", "batch.accumulation=4")
    assert compiled.code == 0, compiled.err
    result = cli("import", path, "--set", "batch.micro=2", "--set", "batch.accumulation=4")
    assert result.code == 0, result.err
    recipe = yaml.safe_load(result.out)
    assert (recipe["strategy"], recipe["stage"], recipe["cluster"]) == ("fsdp", 3, {"nodes": 4, "gpus_per_node": 8})
    assert recipe["batch"] == {"micro": 2, "accumulation": 4, "global": "auto"}
    assert "fsdp_sharding_strategy" not in result.out


def test_verl_script_and_trainer_json(cli: Callable[..., Result], write: Callable[[str, str], Path]) -> None:
    script = write("run.sh", "python3 -m verl.trainer.main_ppo \\\n  data.train_batch_size=64 \\\n"
                             "  actor_rollout_ref.rollout.n=4 actor_rollout_ref.actor.strategy=fsdp2 \\\n"
                             "  actor_rollout_ref.actor.ppo_mini_batch_size=16 \\\n"
                             "  actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2 \\\n"
                             "  trainer.nnodes=1 trainer.n_gpus_per_node=8\n")
    recipe = yaml.safe_load(cli("import", script).out)
    assert recipe["batch"] == {"micro": 2, "accumulation": "auto", "global": 64}
    assert recipe["rl"] == {"rollout_n": 4, "prompts_per_step": 64}
    args = write("training_args.json", '{"output_dir": "o", "per_device_train_batch_size": 4, "bf16": true}')
    recipe = yaml.safe_load(cli("import", args, "--world", "8").out)
    assert (recipe["strategy"], recipe["precision"], recipe["batch"]["micro"]) == ("ddp", "bf16", 4)


def test_a_recipe_is_not_imported(cli: Callable[..., Result]) -> None:
    result = cli("import", RECIPES / "tiny-cpu.yaml")
    assert result.code == 2 and "this is a recipe already" in result.err


def test_what_raw_deepspeed_would_do_is_imported_and_said(cli: Callable[..., Result]) -> None:
    result = cli("import", CORPUS / "DR310" / "stage-auto" / "ds_config.json", "--world", "8")
    assert result.code == 0, result.err
    assert (yaml.safe_load(result.out)["strategy"], yaml.safe_load(result.out)["stage"]) == ("ddp", 0)
    assert "zero_optimization.stage 'auto': raw DeepSpeed drops it and runs stage 0" in result.err
    trainer = cli("import", CORPUS / "DR360" / "micro-mismatch" / "training_args.json", "--world", "8")
    assert trainer.code == 0 and '"auto"' not in trainer.err  # the Trainer fills them: nothing to say
    assert yaml.safe_load(trainer.out)["batch"] == {"micro": 4, "accumulation": 8, "global": "auto"}


REAL_VERL = Path(__file__).parent / "corpus" / "real" / "verl"


def test_verl_dynamic_batch_imports_as_token_packed_micro_batches(cli: Callable[..., Result]) -> None:
    result = cli("import", REAL_VERL / "volcengine__verl__examples__grpo_trainer__run_qwen2-7b_seq_balance.sh")
    assert result.code == 0, result.err
    recipe = yaml.safe_load(result.out)
    assert recipe["batch"] == {"micro": "auto", "accumulation": "auto", "global": 256 * 5, "micro_tokens": 24000}
    assert not any("use_dynamic_bsz" in line or "max_token_len" in line for line in recipe["native"]["verl"])


def test_verl_phase_offload_stays_native_and_is_named(cli: Callable[..., Result]) -> None:
    result = cli("import", REAL_VERL / "SkyworkAI__Skywork-OR1__or1_script__train__run_ds_7b.sh", "--world", "8")
    assert result.code == 0, result.err
    recipe = yaml.safe_load(result.out)
    assert "offload" not in recipe
    assert "actor_rollout_ref.actor.fsdp_config.param_offload=true" in recipe["native"]["verl"]
    assert "between rollout and training" in result.err


def test_training_arguments_leaving_the_batch_to_the_command_line_import(cli: Callable[..., Result], tmp_path: Path) -> None:
    """A TrainingArguments file whose batch is "auto" imports with the note saying who fills
    it (the typed-chaos fuzz test found a KeyError here)."""
    path = tmp_path / "config.json"
    path.write_text('{"train_batch_size": null, "per_device_train_batch_size": "auto"}')
    result = cli("import", path, "--world", "8")
    assert result.code == 0 and "--per_device_train_batch_size" in result.err, result


VERL_RUN = ("python3 -m verl.trainer.main_ppo \\\n  data.train_batch_size={prompts} \\\n"
            "  actor_rollout_ref.rollout.n=4 \\\n  actor_rollout_ref.actor.ppo_mini_batch_size=16 \\\n"
            "  actor_rollout_ref.actor.{micro} \\\n  trainer.nnodes=1 trainer.n_gpus_per_node=8\n")


def test_verl_batch_from_the_scripts_own_variable_is_imported_and_noted(
        cli: Callable[..., Result], write: Callable[[str, str], Path]) -> None:
    script = write("run.sh", "PROMPTS=${PROMPTS:-64}\nMICRO=2\n" + VERL_RUN.format(
        prompts="$PROMPTS", micro="ppo_micro_batch_size_per_gpu=${MICRO}"))
    result = cli("import", script)
    assert result.code == 0, result.err
    recipe = yaml.safe_load(result.out)
    assert recipe["rl"] == {"rollout_n": 4, "prompts_per_step": 64} and recipe["batch"]["micro"] == 2
    assert ("data.train_batch_size=$PROMPTS is 64, as the script sets it: taken from line 1's default; "
            "set PROMPTS to change it") in result.err
    assert "ppo_micro_batch_size_per_gpu=${MICRO} is 2, as the script sets it: taken from line 2" in result.err


def test_verl_batch_only_running_the_script_gives_is_refused_at_its_key(
        cli: Callable[..., Result], write: Callable[[str, str], Path]) -> None:
    script = write("run.sh", "PROMPTS=$(cat prompts.txt)\n" + VERL_RUN.format(
        prompts="$PROMPTS", micro="ppo_micro_batch_size_per_gpu=2"))
    result = cli("import", script)
    assert result.code == 2
    assert result.err.strip() == (f"{script}:3:25: error: data.train_batch_size=$PROMPTS has no value the script "
                                  "fixes (PROMPTS is the output of a command at line 1); the import reads a "
                                  "script without running it: write the value")


LEGACY_VERL = """#!/bin/bash
set -x
GPUS=8
BS=$[GPUS * 32]
MINI=$[BS / 4]

python3 -m verl.trainer.main_ppo \\
    algorithm.adv_estimator=grpo \\
    data.train_files=$HOME/data/gsm8k/train.parquet \\
    data.train_batch_size=$BS \\
    data.max_prompt_length=512 \\
    data.max_response_length=$[512 * 2] \\
    actor_rollout_ref.model.path=Qwen/Qwen2.5-3B-Instruct \\
    actor_rollout_ref.actor.optim.lr=1e-6 \\
    actor_rollout_ref.actor.ppo_mini_batch_size=$MINI \\
    actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4 \\
    actor_rollout_ref.rollout.name=vllm \\
    actor_rollout_ref.rollout.n=5 \\
    trainer.n_gpus_per_node=$GPUS \\
    trainer.nnodes=1 \\
    trainer.total_epochs=15
"""


def test_verl_batch_from_legacy_shell_arithmetic_is_imported_with_its_value(
        cli: Callable[..., Result], write: Callable[[str, str], Path]) -> None:
    """Issue 27: `$[...]`, bash's older `$((...))`, is evaluated where the script fixes its operands."""
    result = cli("import", write("run_grpo.sh", LEGACY_VERL))
    assert result.code == 0, result.err
    recipe = yaml.safe_load(result.out)
    assert recipe["rl"] == {"rollout_n": 5, "prompts_per_step": 256}
    assert recipe["batch"]["micro"] == 4 and "data.max_response_length=1024" in recipe["native"]["verl"]
    assert ("data.train_batch_size=$BS is 256, as the script sets it: taken from line 4's shell arithmetic; "
            "line 3") in result.err


@pytest.mark.parametrize(("assignment", "why"), [
    ("BS=$[GPUS * 32 / 0]", "BS is computed by shell arithmetic at line 4: division by zero"),
    ("BS=$[NGPUS * 32]", "BS is computed by shell arithmetic at line 4 from NGPUS; NGPUS comes from the environment"),
])
def test_verl_batch_from_shell_arithmetic_the_script_does_not_fix_is_refused_saying_why(
        cli: Callable[..., Result], write: Callable[[str, str], Path], assignment: str, why: str) -> None:
    script = write("run_grpo.sh", LEGACY_VERL.replace("BS=$[GPUS * 32]", assignment))
    result = cli("import", script)
    assert result.code == 2 and result.out == ""
    assert f"data.train_batch_size=$BS has no value the script fixes ({why}" in result.err


def test_verl_values_the_script_does_not_fix_are_carried_as_the_script_means_them(
        cli: Callable[..., Result], write: Callable[[str, str], Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """`$HOME` is the environment's where verl runs (`${oc.env:HOME}`), never an OmegaConf
    interpolation of a key `HOME`; shell arithmetic the script fixes is carried as its value."""
    hydra = pytest.importorskip("tests.test_hydra_values")
    run = VERL_RUN.format(prompts="64", micro="ppo_micro_batch_size_per_gpu=2").replace(
        "trainer.nnodes=1", "data.train_files=$HOME/train.parquet data.val_files=\"${HOME}/test.parquet\" \\\n"
        "  data.max_response_length=$((512 + 512)) trainer.experiment_name='qwen run' trainer.nnodes=1")
    result = cli("import", write("run.sh", run))
    assert result.code == 0, result.err
    lines = yaml.safe_load(result.out)["native"]["verl"]
    assert "data.train_files='${oc.env:HOME}/train.parquet'" in lines
    assert "data.max_response_length=1024" in lines
    assert "carried reading the environment where verl runs" in result.err
    assert "carried with the values the script's own variables give them: data.max_response_length" in result.err
    monkeypatch.setenv("HOME", "/home/u")
    given = {line.partition("=")[0]: hydra.hydra_reads("a.b=" + line.partition("=")[2], resolve=True)
             for line in lines}
    assert given["data.train_files"] == "/home/u/train.parquet" and given["data.val_files"] == "/home/u/test.parquet"
    assert given["trainer.experiment_name"] == "qwen run" and given["data.max_response_length"] == 1024


def test_verl_deprecated_global_micro_batch_is_refused_as_verl_refuses_it(
        cli: Callable[..., Result], write: Callable[[str, str], Path]) -> None:
    script = write("run.sh", VERL_RUN.format(prompts="64", micro="ppo_micro_batch_size=16"))
    result = cli("import", script)
    assert result.code == 2 and f"{script}:5:" in result.err
    assert "ppo_micro_batch_size is deprecated, and verl 0.9.1's workers never convert it" in result.err
    assert "write ppo_micro_batch_size_per_gpu = 16 / 8 data-parallel ranks = 2 instead" in result.err
    assert "DR350" in cli("lint", script).out  # lint says the same, as an error


def test_zeropp_partition_at_or_above_the_world_is_every_rank(cli: Callable[..., Result],
                                                             write: Callable[[str, str], Path]) -> None:
    """DeepSpeed's groups take min(zero_hpz_partition_size, world): 16 at 8 ranks is all of them."""
    config = write("ds_config.json", '{"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1, '
                                     '"zero_optimization": {"stage": 3, "zero_hpz_partition_size": 16}}')
    small = cli("import", config, "--world", "8")
    assert small.code == 0, small.err
    assert "parallel" not in yaml.safe_load(small.out)
    assert "zero_hpz_partition_size 16 is not below the 8 ranks" in small.err
    large = cli("import", config, "--world", "32")
    assert yaml.safe_load(large.out)["parallel"] == {"shard_group": 16}


@pytest.mark.parametrize(("stem", "name"), [
    ("My Config (v2)", "My-Config-v2"), ("ds|evil$x", "ds-evil-x"), ("x\nname: pwn", "x-name-pwn"),
    ("..Über_run", "Uber_run"), ("((()))", "imported"), ("ds_zero2", "ds_zero2")])
def test_a_name_from_the_file_name_is_made_a_slug_and_said(cli: Callable[..., Result], tmp_path: Path,
                                                          stem: str, name: str) -> None:
    """Without `--set name=`, the name comes from the file's: made the slug the schema
    requires, the same file name always the same slug, and a note says so whenever it
    differs from the stem. The header comment stays one line whatever the file is called."""
    path = tmp_path / f"{stem}.json"
    path.write_text((REAL / "huggingface__transformers__tests__deepspeed__ds_config_zero2.json").read_text())
    result = cli("import", path, "--world", "8", "--set", "batch.micro=2")
    assert result.code == 0, result.err
    assert yaml.safe_load(result.out)["name"] == name and result.out.count("\nname:") == 1
    said = [line for line in result.err.splitlines() if "note: name " in line]
    shown = str(path).replace("\n", "\\n")
    assert said == ([] if name == stem else [
        f'{shown}: note: name "{name}" is derived from the file name {json.dumps(stem, ensure_ascii=False)}, '
        "made a slug as a name must be: --set name=... to choose another"])
    chosen = cli("import", path, "--world", "8", "--set", "batch.micro=2", "--set", "name=mine")
    assert yaml.safe_load(chosen.out)["name"] == "mine" and "note: name " not in chosen.err


@given(st.text(max_size=300))
def test_every_slug_is_a_valid_name(text: str) -> None:
    assert re.fullmatch(recipe_schema()["properties"]["name"]["pattern"], slug(text))
    assert slug(slug(text)) == slug(text)


def test_a_null_is_carried_only_where_the_input_says_something_by_it(
        cli: Callable[..., Result], write: Callable[[str, str], Path]) -> None:
    """Decided per key from the engine's own defaults: a stated null where the engine's
    default is null anyway (ds_config `offload_optimizer`, a dumped TrainingArguments'
    `hub_token`) is left out; one where it is not (`autotuning.exps_dir`), or on a key
    the installed engine does not know (`per_gpu_train_batch_size`), is carried and
    named. A key compile would add at a value the engine does not default to stays null
    (`steps_per_print`: DeepSpeed prints nothing unless told); one it adds at the
    engine's default (TrainingArguments' `adam_beta1`) is no longer written as null."""
    ds = write("ds.json", json.dumps({
        "train_batch_size": 16, "train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 1,
        "zero_optimization": {"stage": 2, "offload_optimizer": None}, "flops_profiler": {"output_file": None},
        "autotuning": {"exps_dir": None}}))
    args = write("args.json", json.dumps({
        "output_dir": "out", "per_device_train_batch_size": 2, "gradient_accumulation_steps": 1,
        "hub_token": None, "tf32": None, "per_gpu_train_batch_size": None}))
    results = {path.stem: cli("import", path, "--world", "8") for path in (ds, args)}
    assert all(result.code == 0 for result in results.values()), results
    native = {name: yaml.safe_load(result.out)["native"] for name, result in results.items()}
    assert native["ds"]["deepspeed"] == {"autotuning": {"exps_dir": None},
                                         "zero_optimization": {"overlap_comm": None}, "steps_per_print": None}
    assert native["args"]["hf"] == {"per_gpu_train_batch_size": None}  # output_dir is checkpoint.dir
    assert yaml.safe_load(results["args"].out)["checkpoint"] == {"dir": "out"}
    assert (f"{ds}: note: stated null, carried as null in native.deepspeed (compile leaves them out): "
            "autotuning.exps_dir") in results["ds"].err.splitlines()
    assert (f"{args}: note: stated null, carried as null in native.hf (compile leaves them out): "
            "per_gpu_train_batch_size") in results["args"].err.splitlines()
    assert "carried verbatim in native.deepspeed" not in results["ds"].err  # it named nothing


def test_an_all_false_activation_checkpointing_section_imports_as_no_recompute(
        cli: Callable[..., Result], write: Callable[[str, str], Path]) -> None:
    """The section only configures `deepspeed.checkpointing`; all false says nothing is
    recomputed through it, so the recipe's default (`none`, i.e. false) stands, and one
    true key says the script checkpoints through it (`full`)."""
    section = {"partition_activations": False, "contiguous_memory_optimization": False,
               "cpu_checkpointing": False}
    base = {"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 1, "zero_optimization": {"stage": 2}}
    off = cli("import", write("off.json", json.dumps({**base, "activation_checkpointing": section})), "--world", "4")
    assert off.code == 0, off.err
    assert "activation_checkpointing" not in yaml.safe_load(off.out)
    resolved = cli("resolve", write("off.yaml", off.out), "--format", "json")
    assert resolved.code == 0, resolved.err
    assert json.loads(resolved.out)["activation_checkpointing"]["value"] == "none"
    on = cli("import", write("on.json", json.dumps({**base, "activation_checkpointing": {
        **section, "partition_activations": True}})), "--world", "4")
    assert on.code == 0, on.err
    assert yaml.safe_load(on.out)["activation_checkpointing"] == "full"


def test_a_verl_script_s_shell_variables_are_not_overrides(cli: Callable[..., Result],
                                                           write: Callable[[str, str], Path]) -> None:
    """`data=...` and `algorithm=...` are shell variables the script passes on; only the
    arguments of the verl command are overrides, as bash passes them."""
    script = write("run.sh", "data=$HOME/data/gsm8k\nalgorithm=grpo\n"
                             "python3 -m verl.trainer.main_ppo algorithm.adv_estimator=$algorithm \\\n"
                             "    data.train_files=$data/train.parquet data.train_batch_size=64 \\\n"
                             "    actor_rollout_ref.actor.ppo_mini_batch_size=16 \\\n"
                             "    actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2 trainer.n_gpus_per_node=8\n")
    result = cli("import", script)
    assert result.code == 0, result.err
    recipe = yaml.safe_load(result.out)
    lines = recipe["native"]["verl"]
    assert "algorithm.adv_estimator=grpo" in lines and not any(line.startswith(("data=", "algorithm=")) for line in lines)


def test_a_launch_script_s_fsdp_flags_are_read_noted_and_carried(cli: Callable[..., Result], tmp_path: Path) -> None:
    (tmp_path / "fsdp.json").write_text('{"transformer_layer_cls_to_wrap": ["LlamaDecoderLayer"]}')
    (tmp_path / "train.sh").write_text(
        "torchrun --nproc_per_node=8 train_mem.py --bf16 True --per_device_train_batch_size 2 \\\n"
        "    --gradient_accumulation_steps 16 --fsdp \"shard_grad_op auto_wrap\" --fsdp_config fsdp.json\n")
    result = cli("import", tmp_path / "train.sh", "-o", tmp_path / "out" / "recipe.yaml")
    assert result.code == 0, result.err
    assert result.out == ""
    recipe = yaml.safe_load((tmp_path / "out" / "recipe.yaml").read_text())
    assert (recipe["strategy"], recipe["stage"], recipe["cluster"]) == ("fsdp", 2, {"nodes": 1, "gpus_per_node": 8})
    assert recipe["native"]["hf"].items() >= {"fsdp": "shard_grad_op auto_wrap", "fsdp_config": "fsdp.json"}.items()
    assert "fsdp 'shard_grad_op auto_wrap' is the Trainer's FSDP1 (shard_grad_op): read as stage 2" in result.err
    assert "fsdp_config names fsdp.json" in result.err
    assert "the world is the launch command's: --nproc_per_node 8" in result.err


def test_a_verl_parallel_size_written_as_text_is_read_as_verl_reads_it(
        cli: Callable[..., Result], write: Callable[[str, str], Path]) -> None:
    """Hydra reads `'4'` as a string, which verl's typed engine config (OmegaConf) converts to
    the int 4: the import reads it so, and never does Python arithmetic on the text (it crashed)."""
    script = write("run.sh", "python3 -m verl.trainer.main_ppo --config-name=ppo_megatron_trainer \\\n"
                             "    actor_rollout_ref.actor.megatron.tensor_model_parallel_size='4' \\\n"
                             "    actor_rollout_ref.actor.ppo_mini_batch_size=16 data.train_batch_size=32 \\\n"
                             "    actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2 \\\n"
                             "    trainer.n_gpus_per_node=8 trainer.nnodes=1\n")
    result = cli("import", script)
    assert result.code == 0 and "internal error" not in result.err, result.err
    assert yaml.safe_load(result.out)["parallel"]["tensor"] == 4


@pytest.mark.parametrize(("stated", "kernels", "attention"), [
    ({"torch_compile": True, "use_liger_kernel": True}, {"compile": True, "fused_ops": "liger"}, None),
    ({"torch_compile": False, "use_liger_kernel": False}, {"compile": False, "fused_ops": "none"}, None),
    ({"attn_implementation": "eager"}, None, "eager"),
    ({"attn_implementation": "kernels-community/flash-attn3"}, None, "unknown"),
])
def test_trainer_kernel_switches_become_the_recipe_s(cli: Callable[..., Result], write: Callable[[str, str], Path],
                                                     stated: dict[str, object], kernels: dict[str, object] | None,
                                                     attention: str | None) -> None:
    """`torch_compile`, `use_liger_kernel` and TRL's `attn_implementation` are what `plan`
    prices: each becomes a recipe field, and compile writes the Trainer's two back."""
    args = {"per_device_train_batch_size": 2, "bf16": True, **stated}
    result = cli("import", write("training_args.json", json.dumps(args)), "--world", "8")
    assert result.code == 0, result.err
    recipe = yaml.safe_load(result.out)
    assert recipe.get("kernels") == kernels
    assert recipe["model"].get("attention") == attention
    back = cli("compile", write("recipe.yaml", result.out), "--target", "hf")
    assert back.code == 0, back.err
    emitted = json.loads(back.out)
    for key, value in stated.items():  # nothing dropped: the Trainer's off is its default
        assert emitted.get(key, False) == value, key


@pytest.mark.parametrize(("resume", "hf_key", "verl_keys"), [
    ("auto", None, {"trainer.resume_mode": "auto"}),
    ("none", None, {"trainer.resume_mode": "disable"}),
    ("ck/global_step_4", "ck/global_step_4",
     {"trainer.resume_mode": "resume_path", "trainer.resume_from_path": "ck/global_step_4"}),
])
def test_checkpoint_dir_keep_and_resume_go_to_each_target_and_come_back(
        cli: Callable[..., Result], tmp_path: Path, resume: str, hf_key: str | None,
        verl_keys: dict[str, str]) -> None:
    """`checkpoint.dir/keep/resume` are the Trainer's output_dir/save_total_limit/
    resume_from_checkpoint and verl's default_local_dir/max_actor_ckpt_to_keep/resume_mode;
    importing what compile wrote gives them back."""
    from distrecipe.translator import hf, verl
    from tests.emit_strategies import plan_of

    doc = {"recipe": 1, "name": "t", "model": {}, "cluster": {"nodes": 1, "gpus_per_node": 8},
           "strategy": "fsdp", "stage": 3, "batch": {"micro": 2, "accumulation": 4, "global": 64},
           "rl": {"rollout_n": 4, "prompts_per_step": 32},
           "checkpoint": {"dir": "ck", "keep": 3, "resume": resume, "every": 5}}
    plan = plan_of(doc)
    args = hf.emit(plan)
    assert (args["output_dir"], args["save_total_limit"], args.get("resume_from_checkpoint")) == ("ck", 3, hf_key)
    overrides = dict(verl.overrides(plan))
    assert {k: overrides[k] for k in verl_keys} == verl_keys
    assert (overrides["trainer.default_local_dir"], overrides["trainer.max_actor_ckpt_to_keep"]) == ("ck", 3)
    path = tmp_path / "training_args.json"
    path.write_text(json.dumps(args))
    back = yaml.safe_load(cli("import", path, "--world", "8").out)["checkpoint"]
    want = {"dir": "ck", "keep": 3, "every": 5} | ({"resume": hf_key} if hf_key else {})
    assert back == want
    script = tmp_path / "run.sh"
    script.write_text("python3 -m verl.trainer.main_ppo data.train_batch_size=64 actor_rollout_ref.rollout.n=4 "
                      "actor_rollout_ref.actor.ppo_mini_batch_size=16 "
                      "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2 trainer.nnodes=1 "
                      "trainer.n_gpus_per_node=8 " + " ".join(f"{k}={v}" for k, v in overrides.items()
                                                             if k.startswith("trainer.")) + "\n")
    assert yaml.safe_load(cli("import", script).out)["checkpoint"] == {"dir": "ck", "keep": 3, "every": 5,
                                                                       "resume": resume}


VERL_FSDP = ("python3 -m verl.trainer.main_ppo data.train_batch_size=64 actor_rollout_ref.rollout.n=4 {strategy}"
             "actor_rollout_ref.actor.ppo_mini_batch_size=16 actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2 "
             "trainer.nnodes=1 trainer.n_gpus_per_node=8\n")


@pytest.mark.parametrize(("strategy", "version"), [
    ("", 1),  # verl's dp_actor.yaml says `strategy: fsdp`: FSDP1, stated, never left to the default 2
    ("actor_rollout_ref.actor.strategy=fsdp ", 1),
    ("actor_rollout_ref.actor.strategy=fsdp2 ", 2),
])
def test_verl_actor_strategy_is_the_recipe_s_fsdp_version(
        cli: Callable[..., Result], write: Callable[[str, str], Path], tmp_path: Path, strategy: str,
        version: int) -> None:
    recipe = yaml.safe_load(cli("import", write("run.sh", VERL_FSDP.format(strategy=strategy))).out)
    assert (recipe["strategy"], recipe["fsdp_version"]) == ("fsdp", version)
    assert not any("strategy" in line for line in recipe.get("native", {}).get("verl", []))
    path = tmp_path / "r.yaml"
    path.write_text(yaml.safe_dump(recipe), encoding="utf-8")
    compiled = cli("compile", str(path), "--target", "verl", "-o", str(tmp_path / "out"))
    assert compiled.code == 0, compiled.err
    written = (tmp_path / "out" / "verl_overrides.txt").read_text(encoding="utf-8")
    assert f"actor_rollout_ref.actor.strategy={('fsdp', 'fsdp2')[version - 1]}\n" in written


@pytest.mark.parametrize(("config", "version"), [
    ({"version": 1}, 1), ({"fsdp_version": "1"}, 1), ({"version": 2}, 2),
    ({}, None),  # the Trainer's own default (2), which is the recipe's: nothing to state
])
def test_trainer_fsdp_config_version_is_the_recipe_s_fsdp_version(
        cli: Callable[..., Result], write: Callable[[str, str], Path], config: dict[str, Any],
        version: int | None) -> None:
    args = {"output_dir": "o", "per_device_train_batch_size": 4, "bf16": True, "fsdp": True,
            "fsdp_config": {**config, "reshard_after_forward": "full_shard" if version == 1 else True}}
    recipe = yaml.safe_load(cli("import", write("training_args.json", json.dumps(args)), "--world", "8").out)
    assert (recipe["strategy"], recipe.get("fsdp_version")) == ("fsdp", version)
