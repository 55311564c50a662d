"""The equivalence table, the finding codes and `--target all`, without any engine.

The engines judge the emitted files elsewhere (test_*_emit.py); here the table must
agree with what the emitters actually report, the documented inexact cases must
carry their codes, `--strict` must refuse them, and `all` must be deterministic.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from distrecipe.engines.hydra import format_value
from distrecipe.errors import RecipeError
from distrecipe.job import Plan
from distrecipe.translator import accelerate, equivalence, hf, verl
from distrecipe.translator.codes import CODES, finding
from distrecipe.translator.targets import TARGETS, EmitOptions
from tests.conftest import ROOT, Result
from tests.emit_strategies import plan_of


def doc(**changes: Any) -> dict[str, Any]:
    """One node of 8 GPUs, ZeRO-3, micro 2 × accumulation 4 × DP 8 = 64; with `rl`."""
    base: dict[str, Any] = {
        "recipe": 1, "name": "t", "model": {"hidden_size": 1024, "layer_cls": "LlamaDecoderLayer"},
        "cluster": {"nodes": 1, "gpus_per_node": 8}, "strategy": "zero", "stage": 3,
        "batch": {"micro": 2, "accumulation": 4, "global": 64}, "precision": "bf16",
        "rl": {"rollout_n": 4, "prompts_per_step": 32},
    }
    base.update(changes)
    return base


def codes(findings: list[Any]) -> set[str]:
    return {f.code for f in findings}


def without_stage(**changes: Any) -> dict[str, Any]:
    """`doc` with the strategy's natural stage (megatron, ddp)."""
    return {k: v for k, v in doc(**changes).items() if k != "stage"}


MOE = {"hidden_size": 1024, "layer_cls": "MixtralDecoderLayer", "experts": 8, "experts_per_token": 2}
"""A mixture of experts the expert-parallel row divides."""
FOUR_WAY = {"micro": 2, "accumulation": 8, "global": 64}
"""The batch of `doc` when 2 of the 8 ranks' factors go to model parallelism."""

ROWS: dict[str, dict[str, Any]] = {
    "ddp / stage 0": without_stage(strategy="ddp"),
    "stage 1": doc(stage=1),
    "stage 2": doc(stage=2),
    "stage 3": doc(stage=3),
    "sharded over one rank (world or shard_group 1)": doc(cluster={"nodes": 1, "gpus_per_node": 1},
                                                          batch={"micro": 2, "accumulation": 4}),
    "offload optimizer only": doc(offload={"optimizer": "cpu"}),
    "offload params only": doc(offload={"params": "cpu"}),
    "offload params and optimizer": doc(offload={"optimizer": "cpu", "params": "cpu"}),
    "offload to nvme": doc(offload={"optimizer": "nvme", "params": "nvme", "nvme_path": "/nvme"}),
    "shard_group < DP": doc(parallel={"shard_group": 4}),
    "shard_group < DP at stage 1 or 2": doc(stage=2, parallel={"shard_group": 4}),
    "sequence parallel": doc(parallel={"sequence": 2}, batch=FOUR_WAY),
    "tensor parallel": doc(parallel={"tensor": 2}, batch=FOUR_WAY),
    "pipeline parallel": doc(parallel={"pipeline": 2}, batch=FOUR_WAY),
    "virtual pipeline stages": doc(parallel={"pipeline": 2, "virtual_stages": 2}, batch=FOUR_WAY),
    "parallel.expert (mixture of experts)": doc(model=MOE, parallel={"expert": 2}),
    "strategy megatron": without_stage(strategy="megatron"),
    "megatron offload params": without_stage(strategy="megatron", offload={"params": "cpu"}),
    "optimizer adam with weight_decay": doc(optimizer={"name": "adam", "weight_decay": 0.1}),
    "selective recompute": doc(activation_checkpointing="selective"),
    "cluster.device: cpu": doc(cluster={"nodes": 1, "gpus_per_node": 8, "device": "cpu"}),
    "grad_clip: none": doc(grad_clip=0),
    "several nodes, no launch.master_addr": doc(cluster={"nodes": 2, "gpus_per_node": 8},
                                                batch={"micro": 2, "accumulation": 4, "global": 128}),
    "batch.micro_tokens": doc(strategy="fsdp", batch={"global": 64, "micro_tokens": 8192}),
    "selective recompute under megatron": without_stage(strategy="megatron", activation_checkpointing="selective"),
    "parallel.tensor_overlap": doc(parallel={"tensor": 2, "tensor_overlap": True}, batch=FOUR_WAY),
    "parallel.first_stage_layers / last_stage_layers (megatron)": without_stage(
        strategy="megatron", parallel={"pipeline": 2, "first_stage_layers": 1}, batch=FOUR_WAY),
    "offload.activations: cpu": doc(offload={"activations": "cpu"}, activation_checkpointing="full"),
    "optimizer.state_dtype: bf16": doc(optimizer={"state_dtype": "bf16"}),
    "optimizer.master_weights: bf16": doc(optimizer={"master_weights": "bf16", "state_dtype": "bf16"}),
    "reduce_dtype": doc(reduce_dtype="fp32"),
    "rl: prompts_per_step, rollout_n": doc(rl={"rollout_n": 4, "prompts_per_step": 24}),
    "optimizer, grad_clip, schedule stated": doc(optimizer={"lr": 1e-4}, grad_clip=1.0,
                                                 schedule={"decay": "cosine", "total_steps": 1000}),
    "schedule: linear decay to a floor above 0": doc(
        optimizer={"lr": 1e-4}, schedule={"decay": "linear", "min_lr_ratio": 0.1, "total_steps": 1000}),
    "schedule: decay without schedule.total_steps": doc(schedule={"decay": "cosine"}),
    "native section of another engine (native.hf here)": doc(native={"hf": {"logging_steps": 5}}),
    "strategy zero on Accelerate, fsdp on DeepSpeed": doc(),
    "adam without weight decay": doc(optimizer={"name": "adam"}),
    "batch left to the training script (micro and global auto)": doc(batch={"micro": "auto", "global": "auto"}),
    "precision auto (an HF Trainer template's)": doc(precision="auto"),
    "launch settings stated (launch.master_port)": doc(launch={"master_port": 29511}),
    "rl on GPUs the rollout's tensor parallelism does not divide": doc(
        native={"verl": ["actor_rollout_ref.rollout.tensor_model_parallel_size=3"]}),
}
"""A recipe that has each row's setting, for the engines that read it as it is."""

CELL_RECIPES: dict[tuple[str, str], dict[str, Any]] = {
    # Cells whose code belongs to one of the engine's paths (FSDP beside the ds_config,
    # Megatron beside FSDP): the row's setting on that path.
    ("offload optimizer only", "hf"): doc(strategy="fsdp", stage=2, offload={"optimizer": "cpu"}),
    ("offload params only", "hf"): doc(strategy="fsdp", offload={"params": "cpu"}),
    ("shard_group < DP", "verl"): without_stage(strategy="megatron", parallel={"shard_group": 4}),
    ("shard_group < DP", "hf"): doc(strategy="fsdp", parallel={"shard_group": 4}),
    ("optimizer.master_weights: bf16", "hf"): doc(strategy="fsdp", optimizer={"master_weights": "bf16"}),
    ("shard_group < DP at stage 1 or 2", "verl"): without_stage(strategy="megatron",
                                                                parallel={"shard_group": 4}),
    ("shard_group < DP at stage 1 or 2", "hf"): doc(strategy="fsdp", stage=2, parallel={"shard_group": 4}),
    ("sequence parallel", "verl"): without_stage(strategy="megatron", parallel={"sequence": 2},
                                                 batch=FOUR_WAY),
    ("sequence parallel", "hf"): doc(strategy="fsdp", parallel={"sequence": 2}, batch=FOUR_WAY),
    ("tensor parallel", "accelerate"): without_stage(strategy="ddp", parallel={"tensor": 2}, batch=FOUR_WAY),
    ("tensor parallel", "hf"): without_stage(strategy="ddp", parallel={"tensor": 2}, batch=FOUR_WAY),
    ("virtual pipeline stages", "verl"): doc(strategy="fsdp", parallel={"pipeline": 2, "virtual_stages": 2},
                                             batch=FOUR_WAY),
    ("parallel.expert (mixture of experts)", "accelerate"): doc(strategy="fsdp", model=MOE, parallel={"expert": 2}),
    ("parallel.expert (mixture of experts)", "verl"): doc(strategy="fsdp", model=MOE, parallel={"expert": 2}),
    ("strategy megatron", "verl"): without_stage(strategy="megatron", precision="fp32"),
    ("parallel.tensor_overlap", "verl"): without_stage(strategy="megatron", parallel={"tensor": 2,
                                                       "tensor_overlap": True}, batch=FOUR_WAY),
    ("parallel.tensor_overlap", "accelerate"): doc(strategy="fsdp", parallel={"tensor": 2, "tensor_overlap": True},
                                                   batch=FOUR_WAY),
    ("reduce_dtype", "hf"): doc(strategy="fsdp", reduce_dtype="fp32"),
    ("reduce_dtype", "accelerate"): doc(strategy="fsdp", reduce_dtype="fp32"),
    ("optimizer adam with weight_decay", "verl"): without_stage(
        strategy="megatron", optimizer={"name": "adam", "weight_decay": 0.1}),
    ("optimizer adam with weight_decay", "hf"): doc(strategy="fsdp",
                                                    optimizer={"name": "adam", "weight_decay": 0.1}),
    ("strategy zero on Accelerate, fsdp on DeepSpeed", "deepspeed"): doc(strategy="fsdp"),
    ("adam without weight decay", "hf"): doc(strategy="fsdp", optimizer={"name": "adam"}),
    ("sharded over one rank (world or shard_group 1)", "hf"): doc(
        strategy="fsdp", cluster={"nodes": 1, "gpus_per_node": 1}, batch={"micro": 2, "accumulation": 4}),
}


def engine_findings(engine: str, recipe: dict[str, Any]) -> list[Any]:
    """What `engine`'s emitter reports for `recipe`, errors included (render would raise).
    The `rl` section verl needs is left out for the others: their files train only, and
    the carry table names a stated `rl` there (DR234), which is not the row's setting."""
    module = importlib.import_module(f"distrecipe.translator.{engine}")
    if engine != "verl":
        recipe = {key: value for key, value in recipe.items() if key != "rl"}
    found: list[Any] = module.findings(plan_of(recipe))
    return found


UNREACHABLE = {"megatron offload params"}
"""Rows no recipe reaches: resolve refuses parameter offload below stage 3, and
megatron allows stages 0 and 1, so verl's DR210 branch never runs. Strict xfail: a
resolver that starts accepting them makes this fail, and the row is checked again."""

CELLS = [
    pytest.param(row, engine, id=f"{row.recipe}-{engine}", marks=[pytest.mark.xfail(
        raises=RecipeError, strict=True, reason="resolve refuses this row's setting")]
        if row.recipe in UNREACHABLE else [])
    for row in equivalence.TABLE for engine in equivalence.ENGINES
]


@pytest.mark.parametrize(("row", "engine"), CELLS)
def test_each_cell_is_what_its_emitter_reports(row: equivalence.Row, engine: equivalence.Engine) -> None:
    """A coded cell: the emitter reports that code, graded as catalogued. An uncoded one:
    none of the codes the row's other engines report for the same setting."""
    found = engine_findings(engine, CELL_RECIPES.get((row.recipe, engine), ROWS[row.recipe]))
    code = row.cell(engine).code
    if code is None:
        row_codes = {row.cell(e).code for e in equivalence.ENGINES} - {None}
        assert not codes(found) & row_codes
    else:
        assert (code, CODES[code].severity) in {(f.code, f.severity) for f in found}


def test_every_code_is_tabled_and_reached() -> None:
    tabled = {row.cell(e).code for row in equivalence.TABLE for e in equivalence.ENGINES}
    assert set(CODES) - tabled == {"DR200"}  # DR200 is --target all's, not a mapping
    assert tabled - {None} <= set(CODES)
    assert len({row.recipe for row in equivalence.TABLE}) == len(equivalence.TABLE)
    assert set(ROWS) == {row.recipe for row in equivalence.TABLE}


def test_docs_are_the_table() -> None:
    docs = (ROOT / "docs" / "equivalence.md").read_text(encoding="utf-8")
    assert docs == equivalence.markdown(), (
        "regenerate: python -c 'from distrecipe.translator.equivalence import markdown; "
        "print(markdown(), end=\"\")' > docs/equivalence.md"
    )


def test_findings_take_severity_from_the_catalogue() -> None:
    for code, entry in CODES.items():
        found = finding(code, "accelerate", "detail 1")
        assert (found.code, found.severity) == (code, entry.severity)
        assert found.message == f"accelerate: {entry.summary} (detail 1)"


def test_stage1_has_no_fsdp2_form() -> None:
    plan = plan_of(doc(stage=1))
    assert "DR201" in codes(accelerate.findings(plan))
    assert "DR201" in codes(verl.findings(plan))
    assert accelerate.emit(plan)["fsdp_config"]["fsdp_reshard_after_forward"] is False
    assert ("actor_rollout_ref.actor.fsdp_config.reshard_after_forward", False) in verl.overrides(plan)


def test_optimizer_only_offload_is_inexact() -> None:
    plan = plan_of(doc(stage=2, offload={"optimizer": "cpu"}))
    assert "DR202" in codes(accelerate.findings(plan))
    assert "DR202" in codes(verl.findings(plan))
    assert accelerate.emit(plan)["fsdp_config"]["fsdp_offload_params"] is True
    lines = verl.overrides_text(plan).splitlines()
    assert "actor_rollout_ref.actor.fsdp_config.offload_policy=true" in lines
    assert "actor_rollout_ref.actor.fsdp_config.optimizer_offload=false" in lines


def test_params_and_optimizer_offload_is_exact() -> None:
    plan = plan_of(doc(offload={"optimizer": "cpu", "params": "cpu"}))
    assert not codes(accelerate.findings(plan)) & {"DR202", "DR203"}
    assert not codes(verl.findings(plan)) & {"DR202", "DR203"}


def test_hybrid_sharding_maps_to_replicate_times_shard() -> None:
    plan = plan_of(doc(parallel={"shard_group": 4}))
    assert accelerate.emit(plan)["parallelism_config"] == {
        "parallelism_config_dp_replicate_size": 2,
        "parallelism_config_dp_shard_size": 4,
        "parallelism_config_tp_size": 1,
        "parallelism_config_cp_size": 1,
    }
    assert ("actor_rollout_ref.actor.fsdp_config.fsdp_size", 4) in verl.overrides(plan)


def test_deepspeed_through_accelerate_points_at_the_ds_config() -> None:
    plan = plan_of(doc(launch={"backend": "accelerate-deepspeed"}))
    output = TARGETS["accelerate"](plan, EmitOptions())
    assert set(output.files) == {"ds_config.json", "accelerate_config.yaml"}
    config = yaml.safe_load(output.files["accelerate_config.yaml"])
    assert config["deepspeed_config"]["deepspeed_config_file"] == "ds_config.json"
    # Accelerate refuses these beside a deepspeed_config_file.
    assert "mixed_precision" not in config
    assert not {"gradient_accumulation_steps", "zero_stage", "gradient_clipping"} & set(
        config["deepspeed_config"])


def test_verl_refuses_prompts_that_are_not_whole_mini_batches() -> None:
    plan = plan_of(doc(rl={"rollout_n": 4, "prompts_per_step": 24}))  # mini = 16 prompts
    found = verl.findings(plan)
    assert [f.code for f in found if f.severity == "error"] == ["DR220"]
    with pytest.raises(RecipeError, match="DR220"):
        verl.render(plan, EmitOptions())


def test_verl_needs_rl() -> None:
    plan = plan_of({k: v for k, v in doc().items() if k != "rl"})
    with pytest.raises(RecipeError, match="DR208"):
        verl.render(plan, EmitOptions())


def test_no_clipping_becomes_infinite_clip_in_verl_and_zero_in_hf() -> None:
    plan: Plan = plan_of(doc(grad_clip=0))
    assert ("actor_rollout_ref.actor.optim.clip_grad", float("inf")) in verl.overrides(plan)
    assert "actor_rollout_ref.actor.optim.clip_grad=inf" in verl.overrides_text(plan)
    assert hf.emit(plan)["max_grad_norm"] == 0.0


def test_hydra_values_have_no_spaces() -> None:
    assert format_value({"a": [0.9, 0.95], "b": True}) == "{a:[0.9,0.95],b:true}"


@pytest.mark.parametrize("target", ["accelerate", "verl"])
def test_strict_refuses_stage1(target: str, cli: Callable[..., Result],
                               write: Callable[[str, str], Path], tmp_path: Path) -> None:
    recipe = write("r.yaml", yaml.safe_dump(doc(stage=1)))
    loose = cli("compile", recipe, "--target", target, "-o", tmp_path / "loose")
    assert loose.code == 0 and "DR201" in loose.err
    strict = cli("compile", recipe, "--target", target, "--strict", "-o", tmp_path / "strict")
    assert strict.code != 0 and "DR201" in strict.err
    assert not (tmp_path / "strict").exists()


def test_strict_refuses_optimizer_only_offload(cli: Callable[..., Result]) -> None:
    result = cli("compile", ROOT / "recipes" / "seed-8b-32gpu-zero2-offload.yaml",
                 "--target", "accelerate", "--strict")
    assert result.code != 0 and "DR202" in result.err


def test_all_writes_every_target_and_a_summary(cli: Callable[..., Result],
                                               write: Callable[[str, str], Path],
                                               tmp_path: Path) -> None:
    recipe = write("r.yaml", yaml.safe_dump(doc(stage=1)))
    first = cli("compile", recipe, "--target", "all", "-o", tmp_path / "a")
    second = cli("compile", recipe, "--target", "all", "-o", tmp_path / "b")
    assert first.code == second.code == 0
    names = sorted(p.name for p in (tmp_path / "a").iterdir())
    # ZeRO under verl's launcher: --target accelerate runs it as FSDP2 (DR238), TRL needs DeepSpeed's
    # plugin in the same file name, so `all` skips TRL and says so
    assert names == ["accelerate_config.yaml", "ds_config.json", "openrlhf_train.sh",
                     "summary.md", "training_args.json", "verl_actor.yaml", "verl_overrides.txt"]
    for name in names:  # deterministic: same Plan, same bytes
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    summary = (tmp_path / "a" / "summary.md").read_text()
    assert "micro 2 × accumulation 4 × DP 8 = global 64" in summary
    assert "`DR201` accelerate:" in summary and "`DR201` verl:" in summary
    assert "`DR200` trl: not emitted by --target all" in summary and "DeepSpeed plugin" in summary


def test_all_writes_trl_beside_accelerate_s_deepspeed_plugin() -> None:
    """Under launch.backend accelerate-deepspeed both targets write the same DeepSpeed-plugin
    config, so `all` writes TRL's files too."""
    output = TARGETS["all"](plan_of(doc(launch={"backend": "accelerate-deepspeed"})), EmitOptions())
    assert {"grpo_config.yaml", "accelerate_config.yaml", "ds_config.json"} <= set(output.files)
    assert not [f for f in output.findings if f.code == "DR200" and f.message.startswith("trl")]


def test_all_skips_a_target_that_cannot_express_the_recipe() -> None:
    plan = plan_of({k: v for k, v in doc().items() if k != "rl"})
    output = TARGETS["all"](plan, EmitOptions())
    assert "verl_overrides.txt" not in output.files
    skipped = [f for f in output.findings if f.code == "DR200"]
    # verl and OpenRLHF both need `rl`; TRL's Accelerate config is DeepSpeed's plugin, not FSDP2
    assert [f.message.split(":")[0] for f in skipped] == ["verl", "trl", "openrlhf"]
    assert all(f.severity == "info" and ("DR208" in f.message or "DeepSpeed plugin" in f.message)
               for f in skipped)
    assert "DR200" in output.files["summary.md"]


def test_training_args_agree_with_the_ds_config() -> None:
    plan = plan_of(doc())
    output = TARGETS["hf"](plan, EmitOptions())
    args = yaml.safe_load(output.files["training_args.json"])
    ds = yaml.safe_load(output.files["ds_config.json"])
    assert args["deepspeed"] == "ds_config.json"
    assert (args["per_device_train_batch_size"], args["gradient_accumulation_steps"]) == (
        ds["train_micro_batch_size_per_gpu"], ds["gradient_accumulation_steps"])


def test_every_registered_target_loads() -> None:
    from distrecipe.translator import summary

    assert summary.ALL in TARGETS
    for name in TARGETS:
        assert callable(TARGETS[name])
