"""The equivalence table as data: what each recipe setting becomes in each engine.

One table serves three readers. The emitters report an inexact mapping by its code,
worded from the catalogue (`codes`); `docs/equivalence.md` is `markdown()` verbatim
(this table, the field table of `carry`, the catalogue); and a test checks that every
code an emitter can raise is in the table and the catalogue, so the table cannot
silently drift from what the emitters do.
"""

from __future__ import annotations

from dataclasses import dataclass

from distrecipe.engines import ENGINES, Engine
from distrecipe.errors import RecipeError
from distrecipe.findings import Finding
from distrecipe.job import Plan
from distrecipe.recipe import Offload
from distrecipe.translator import carry
from distrecipe.translator.codes import CODES, finding


def expert_findings(plan: Plan, target: str, carried: bool = False) -> list[Finding]:
    """`parallel.expert` where the target does not carry it: DR232 where DeepSpeed runs the
    experts (the script's MoE layers), DR208 where the engine has no expert parallelism."""
    ep = plan.recipe.parallel.expert
    if ep == 1 or carried:
        return []
    if target == "deepspeed":
        return [finding("DR232", target, f"ep_size={ep}")]
    return [finding("DR208", target, f"parallel.expert {ep}: no expert parallelism in this engine")]


def virtual_stages(plan: Plan) -> str:
    """`, virtual_stages v` for a pipeline a target refuses that also interleaves, so its
    finding names every key it cannot carry; empty under plain 1F1B."""
    return f", virtual_stages {plan.dims.virtual_stages}" if plan.dims.virtual_stages > 1 else ""


def token_batch_findings(plan: Plan, target: str) -> list[Finding]:
    """DR208 where the target counts micro-batches in samples and the recipe packs them by
    tokens (`batch.micro_tokens`): only verl's `use_dynamic_bsz` can say that."""
    if plan.recipe.batch.micro_tokens is None:
        return []
    tokens = plan.recipe.batch.micro_tokens
    return [finding("DR208", target, f"batch.micro_tokens {tokens}: micro-batches packed by "
                                     "tokens are verl's use_dynamic_bsz; give batch.micro instead")]


def offload_findings(offload: Offload, target: str, native: str) -> list[Finding]:
    """FSDP2 has one CPU offload (params, grads and the optimizer step together).

    Shared by every FSDP2 target, so Accelerate, verl and the HF Trainer report the
    same recipe the same way; `native` names the key that switches it on.
    """
    params, optimizer = offload.params, offload.optimizer
    found: list[Finding] = []
    if optimizer != "none" and params == "none":
        found.append(finding("DR202", target, f"{native}: offload.params none"
                             f"{carry.as_written('offload.params')} becomes cpu"))
    if params != "none" and optimizer == "none":
        found.append(finding("DR203", target, f"{native}: offload.optimizer none"
                             f"{carry.as_written('offload.optimizer')} becomes cpu"))
    if "nvme" in (params, optimizer):
        stated = [f"offload.{key} nvme" for key, device in (("optimizer", optimizer), ("params", params))
                  if device == "nvme"]
        found.append(finding("DR204", target, ", ".join([*stated, f"offload.nvme_path {offload.nvme_path}"])))
    return found


def precision_findings(plan: Plan, target: str, *, overlap: bool = False, activations: bool = False,
                       state: bool = False, reduce: bool = False, master: bool = False) -> list[Finding]:
    """DR227/DR228/DR230/DR231/DR239 for the newer keys a target cannot carry; each flag says
    the target can (`overlap`: tensor-parallel overlap, `activations`: CPU-held checkpoints,
    `state`: bf16 Adam moments, `reduce`: the reduction dtype, `master`: pure bf16). Only
    stated values are named: a default is every engine's own. Under pure bf16 the moments
    follow it (a torch optimizer keeps them in the bf16 parameters' dtype, DeepSpeed writes
    `bf16_optimizer_states`), so DR239 alone names what is not carried."""
    r = plan.recipe
    found: list[Finding] = []
    pure = r.optimizer is not None and r.optimizer.master_weights == "bf16"
    state = state or pure
    if pure and not master:
        found.append(finding("DR239", target, "optimizer.master_weights: bf16"))
    if r.parallel.tensor_overlap and plan.dims.tensor > 1 and not overlap:
        found.append(finding("DR227", target, f"parallel.tensor_overlap with tensor {plan.dims.tensor}"))
    if r.offload.activations != "none" and not activations:
        found.append(finding("DR228", target, f"offload.activations: {r.offload.activations}"))
    if r.optimizer is not None and r.optimizer.state_dtype != "fp32" and not state:
        found.append(finding("DR230", target, f"optimizer.state_dtype: {r.optimizer.state_dtype}"))
    if r.reduce_dtype is not None and not reduce:
        found.append(finding("DR231", target, f"reduce_dtype: {r.reduce_dtype}"))
    return found


def refuse_errors(found: list[Finding]) -> None:
    """Raise when a target cannot express the recipe, naming every reason at once.

    An error finding means a config would be wrong, not merely approximate, so no
    file is written; `--target all` catches this and reports the target as skipped.
    """
    errors = [f for f in found if f.severity == "error"]
    if errors:
        keys = tuple(dict.fromkeys(key for f in errors if f.where is not None for key in f.where.keys))
        where = next((f.where for f in errors if f.where is not None), None)  # the first error that has one
        raise RecipeError("; ".join(f"{f.code} {f.message}" for f in errors), where, keys=keys)


@dataclass(frozen=True, slots=True)
class Cell:
    """How one engine expresses one recipe setting; `code` is reported when inexact."""

    native: str
    code: str | None = None


@dataclass(frozen=True, slots=True)
class Row:
    recipe: str
    deepspeed: Cell
    accelerate: Cell
    verl: Cell
    hf: Cell

    def cell(self, engine: Engine) -> Cell:
        cell: Cell = getattr(self, engine)  # the fields are named after the engines
        return cell


TABLE: tuple[Row, ...] = (
    Row(
        "ddp / stage 0",
        Cell("zero stage 0"),
        Cell("`MULTI_GPU` (DDP)"),
        Cell("fsdp2 with `fsdp_size=1`", "DR205"),
        Cell("no `deepspeed` / `fsdp` (DDP)"),
    ),
    Row(
        "stage 1",
        Cell("stage 1"),
        Cell("FSDP2 `fsdp_reshard_after_forward: false` (stage 2)", "DR201"),
        Cell("fsdp2, `reshard_after_forward=false` (stage 2)", "DR201"),
        Cell("`deepspeed: ds_config.json`"),
    ),
    Row(
        "stage 2",
        Cell("stage 2"),
        Cell("FSDP2 `fsdp_reshard_after_forward: false`"),
        Cell("fsdp2, `reshard_after_forward=false`"),
        Cell("`deepspeed`, or `fsdp_config.reshard_after_forward: false`"),
    ),
    Row(
        "stage 3",
        Cell("stage 3"),
        Cell("FSDP2 `fsdp_reshard_after_forward: true`"),
        Cell("fsdp2, `reshard_after_forward=true`"),
        Cell("`deepspeed`, or `fsdp_config.reshard_after_forward: true`"),
    ),
    Row(
        "sharded over one rank (world or shard_group 1)",
        Cell("ZeRO over one rank"),
        Cell("`MULTI_GPU` / `NO` (replication is DDP)", "DR236"),
        Cell("`fsdp_size=1`"),
        Cell("no `fsdp` (DDP), as Accelerate", "DR236"),
    ),
    Row(
        "offload optimizer only",
        Cell("`offload_optimizer.device: cpu`"),
        Cell("`fsdp_offload_params: true` (params, grads and step on CPU)", "DR202"),
        Cell("`offload_policy=true` (params, grads and step on CPU)", "DR202"),
        Cell("via the ds_config; FSDP `cpu_offload: true`", "DR202"),
    ),
    Row(
        "offload params only",
        Cell("`offload_param.device: cpu` (stage 3 only)"),
        Cell("`fsdp_offload_params: true`", "DR203"),
        Cell("`offload_policy=true`", "DR203"),
        Cell("via the ds_config; FSDP `cpu_offload: true`", "DR203"),
    ),
    Row(
        "offload params and optimizer",
        Cell("`offload_param` + `offload_optimizer`"),
        Cell("`fsdp_offload_params: true`"),
        Cell("`offload_policy=true`"),
        Cell("via the ds_config; FSDP `cpu_offload: true`"),
    ),
    Row(
        "offload to nvme",
        Cell("`device: nvme` + `nvme_path`"),
        Cell("CPU offload", "DR204"),
        Cell("CPU offload", "DR204"),
        Cell("via the ds_config"),
    ),
    Row(
        "shard_group < DP",
        Cell("ZeRO++ `zero_hpz_partition_size` (stage 3)", "DR217"),
        Cell("`parallelism_config` dp_replicate × dp_shard"),
        Cell("`fsdp_size`; none in Megatron", "DR208"),
        Cell("via the ds_config; FSDP: the accelerate config", "DR214"),
    ),
    Row(
        "shard_group < DP at stage 1 or 2",
        Cell("none: sharded over all data-parallel ranks", "DR216"),
        Cell("`parallelism_config` dp_replicate × dp_shard"),
        Cell("`fsdp_size`; none in Megatron", "DR208"),
        Cell("via the ds_config; FSDP: the accelerate config", "DR214"),
    ),
    Row(
        "sequence parallel",
        Cell("`sequence_parallel_size` (Ulysses)"),
        Cell("`parallelism_config_cp_size` (context parallel)", "DR206"),
        Cell("`ulysses_sequence_parallel_size`; Megatron `context_parallel_size`", "DR206"),
        Cell("none beside DeepSpeed (DR208); FSDP: the accelerate config", "DR214"),
    ),
    Row(
        "tensor parallel",
        Cell("AutoTP `tensor_parallel.autotp_size`; not with pipeline or sequence (DR208)", "DR219"),
        Cell("`parallelism_config_tp_size` (FSDP2 with 2+ shards)", "DR208"),
        Cell("Megatron `tensor_model_parallel_size` (megatron only)", "DR208"),
        Cell("none", "DR208"),
    ),
    Row(
        "pipeline parallel",
        Cell("needs a Megatron mpu"),
        Cell("none", "DR208"),
        Cell("Megatron `pipeline_model_parallel_size` (megatron only)", "DR208"),
        Cell("none", "DR208"),
    ),
    Row(
        "virtual pipeline stages",
        Cell("Megatron: the script's own flag (DR218); ZeRO: `TrainSchedule` is plain 1F1B", "DR208"),
        Cell("none", "DR208"),
        Cell("Megatron `virtual_pipeline_model_parallel_size` (megatron only)", "DR208"),
        Cell("none", "DR208"),
    ),
    Row(
        "parallel.expert (mixture of experts)",
        Cell("the script's `deepspeed.moe.layer.MoE(ep_size=...)`", "DR232"),
        Cell("none for FSDP2; with DeepSpeed, the script's MoE `ep_size`", "DR208"),
        Cell("Megatron `expert_model_parallel_size` (megatron only)", "DR208"),
        Cell("none", "DR208"),
    ),
    Row(
        "strategy megatron",
        Cell("ZeRO data parallelism; TP/PP need a Megatron mpu", "DR218"),
        Cell("none", "DR208"),
        Cell("`model_engine=megatron`, `use_distributed_optimizer` = stage 1; bf16/fp16 only", "DR208"),
        Cell("none", "DR208"),
    ),
    Row(
        "megatron offload params",
        Cell("not applicable"),
        Cell("none", "DR208"),
        Cell("`megatron.param_offload` (between phases)", "DR210"),
        Cell("none", "DR208"),
    ),
    Row(
        "optimizer adam with weight_decay",
        Cell("`Adam` with `adam_w_mode: false` (its default is AdamW)"),
        Cell("the script's optimizer"),
        Cell("FSDP `torch.optim.Adam`; Megatron's adam is AdamW", "DR215"),
        Cell("`optim: adamw_torch`", "DR215"),
    ),
    Row(
        "selective recompute",
        Cell("`activation_checkpointing`"),
        Cell("`fsdp_activation_checkpointing: true` (whole blocks)", "DR207"),
        Cell("`enable_gradient_checkpointing=true` (whole blocks)", "DR207"),
        Cell("`gradient_checkpointing` / `fsdp_config.activation_checkpointing`", "DR207"),
    ),
    Row(
        "cluster.device: cpu",
        Cell("gloo ranks"),
        Cell("one non-distributed process", "DR209"),
        Cell("not runnable without GPUs"),
        Cell("`use_cpu: true`"),
    ),
    Row(
        "grad_clip: none",
        Cell("no `gradient_clipping`"),
        Cell("not in the YAML (the script clips)"),
        Cell("`optim.clip_grad=inf`", "DR212"),
        Cell("`max_grad_norm: 0`"),
    ),
    Row(
        "several nodes, no launch.master_addr",
        Cell("hostfile"),
        Cell("no `main_process_ip`", "DR211"),
        Cell("`ray start --address`"),
        Cell("the launcher's"),
    ),
    Row(
        "batch.micro_tokens",
        Cell("none", "DR208"),
        Cell("none", "DR208"),
        Cell("`use_dynamic_bsz=true`, `ppo_max_token_len_per_gpu`"),
        Cell("none", "DR208"),
    ),
    Row(
        "selective recompute under megatron",
        Cell("the Megatron script's own flag (DR218)"),
        Cell("none", "DR208"),
        Cell("`override_transformer_config.recompute_granularity=selective`, "
             "`recompute_modules=[core_attn]`"),
        Cell("none", "DR208"),
    ),
    Row(
        "parallel.tensor_overlap",
        Cell("AutoTP has no overlap", "DR227"),
        Cell("none", "DR227"),
        Cell("Megatron `override_transformer_config.tp_comm_overlap`"),
        Cell("none", "DR227"),
    ),
    Row(
        "parallel.first_stage_layers / last_stage_layers (megatron)",
        Cell("the Megatron script's own flags (DR218)", "DR218"),
        Cell("none", "DR208"),
        Cell("`override_transformer_config.num_layers_in_first/last_pipeline_stage`"),
        Cell("none", "DR208"),
    ),
    Row(
        "offload.activations: cpu",
        Cell("`activation_checkpointing.cpu_checkpointing: true`", "DR229"),
        Cell("none", "DR228"),
        Cell("none", "DR228"),
        Cell("the ds_config's `cpu_checkpointing` (ignored by the Trainer's checkpointing)", "DR228"),
    ),
    Row(
        "optimizer.state_dtype: bf16",
        Cell("`bf16_optimizer_states` needs bf16 master weights too", "DR230"),
        Cell("none", "DR230"),
        Cell("Megatron: `use_precision_aware_optimizer`, `exp_avg_dtype`, `exp_avg_sq_dtype`; FSDP: none",
             "DR230"),
        Cell("none", "DR230"),
    ),
    Row(
        "optimizer.master_weights: bf16",
        Cell("`bf16.bf16_master_weights_and_grads` (stage ≥ 1; with `bf16_optimizer_states`, or fp32 moments "
             "in ZeRO-Offload's DeepSpeedCPUAdam)"),
        Cell("none: the script casts the model to bf16", "DR239"),
        Cell("FSDP `fsdp_config.model_dtype=bf16`; Megatron: none (fp32 main parameters, refused)"),
        Cell("via the ds_config (zero); FSDP: none, the script loads the model in bf16", "DR239"),
    ),
    Row(
        "reduce_dtype",
        Cell("`communication_data_type`"),
        Cell("none (FSDP2's `reduce_dtype` is not in the YAML)", "DR231"),
        Cell("FSDP `mixed_precision.reduce_dtype`; Megatron `override_ddp_config.grad_reduce_in_fp32`"),
        Cell("via the ds_config; FSDP: none", "DR231"),
    ),
    Row(
        "rl: prompts_per_step, rollout_n",
        Cell("not applicable"),
        Cell("not applicable"),
        Cell("`data.train_batch_size`, `rollout.n`, `ppo_mini_batch_size` = global / n", "DR220"),
        Cell("not applicable"),
    ),
    Row(
        "optimizer, grad_clip, schedule stated",
        Cell("`optimizer`, `gradient_clipping`, `scheduler` (see the field rows)"),
        Cell("none: the script builds its optimizer and scheduler and clips", "DR222"),
        Cell("`optim.*`, `trainer.total_training_steps`"),
        Cell("`learning_rate`, `lr_scheduler_type`, `max_grad_norm`, ..."),
    ),
    Row(
        "schedule: linear decay to a floor above 0",
        Cell("WarmupDecayLR: the floor also starts the warmup", "DR225"),
        Cell("the script's scheduler", "DR222"),
        Cell("none: FSDP has constant and cosine; Megatron `lr_decay_style: linear`", "DR208"),
        Cell("`linear` decays to 0", "DR225"),
    ),
    Row(
        "schedule: decay without schedule.total_steps",
        Cell("`total_num_steps` left to the script or the Trainer", "DR226"),
        Cell("the script's scheduler", "DR222"),
        Cell("verl counts the data's steps"),
        Cell("the Trainer counts the data's steps"),
    ),
    Row(
        "native section of another engine (native.hf here)",
        Cell("named key by key", "DR233"),
        Cell("named key by key", "DR233"),
        Cell("named key by key", "DR233"),
        Cell("merged into training_args.json"),
    ),
    Row(
        "strategy zero on Accelerate, fsdp on DeepSpeed",
        Cell("`zero_optimization.stage` (fsdp is ZeRO)", "DR238"),
        Cell("FSDP2 (zero as FSDP2)", "DR238"),
        Cell("fsdp2"),
        Cell("`deepspeed` (zero) or `fsdp` (fsdp)"),
    ),
    Row(
        "adam without weight decay",
        Cell("`Adam` with `adam_w_mode: false`"),
        Cell("the script's optimizer", "DR222"),
        Cell("FSDP `torch.optim.Adam`"),
        Cell("`optim: adamw_torch` (the same update)", "DR237"),
    ),
    Row(
        "batch left to the training script (micro and global auto)",
        Cell("the three batch keys `auto`", "DR223"),
        Cell("the script's DataLoader (header comment)"),
        Cell("none: verl needs numbers", "DR208"),
        Cell("no batch keys: the script's flags", "DR223"),
    ),
    Row(
        "precision auto (an HF Trainer template's)",
        Cell("`bf16.enabled` / `fp16.enabled` `auto`", "DR235"),
        Cell("no `mixed_precision`", "DR235"),
        Cell("verl's own dtypes", "DR235"),
        Cell("no `bf16` / `fp16`: the script's flags", "DR235"),
    ),
    Row(
        "launch settings stated (launch.master_port)",
        Cell("none: the launcher's", "DR234"),
        Cell("`main_process_port`"),
        Cell("none: the launcher's", "DR234"),
        Cell("none: the launcher's", "DR234"),
    ),
    Row(
        "rl on GPUs the rollout's tensor parallelism does not divide",
        Cell("not applicable"),
        Cell("not applicable"),
        Cell("`rollout.tensor_model_parallel_size` from `native.verl`, else verl's 2", "DR221"),
        Cell("not applicable"),
    ),
)
"""DESIGN.md's equivalence table, extended with the cases the emitters meet."""


def markdown() -> str:
    """The tables and the codes as one Markdown page (`docs/equivalence.md` is this, verbatim)."""
    lines = [
        "# What each recipe setting becomes in each engine",
        "",
        "Generated from `distrecipe/translator/equivalence.py`; do not edit by hand.",
        "A **code** marks an inexact mapping: `compile` prints it and `--strict` refuses",
        "every one that is not `info`.",
        "",
        "| recipe | DeepSpeed | Accelerate | verl actor | HF Trainer |",
        "|---|---|---|---|---|",
    ]
    for row in TABLE:
        cells = [_cell_text(row.cell(engine)) for engine in ENGINES]
        lines.append(f"| {row.recipe} | " + " | ".join(cells) + " |")
    lines += ["", "## Every recipe field", "",
              "What each file does with each field; a stated field no file of the target carries is",
              "named by its code (`translator/carry.py`).", "", *carry.markdown()]
    lines += ["", "## Codes", "", "| code | severity | meaning |", "|---|---|---|"]
    lines += [f"| {code} | {entry.severity} | {entry.summary} |" for code, entry in CODES.items()]
    return "\n".join(lines) + "\n"


def _cell_text(cell: Cell) -> str:
    return f"{cell.native} **{cell.code}**" if cell.code else cell.native
