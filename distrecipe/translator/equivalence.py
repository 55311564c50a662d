"""The equivalence table as data: what each recipe setting becomes in each engine.

One table serves three readers. The emitters report an inexact mapping by its code
(`finding`), so the wording and severity of every DR2xx message live here and
nowhere else; `docs/equivalence.md` is `markdown()` verbatim; and a test checks that
every code an emitter can raise is in the table and the catalogue, so the table
cannot silently drift from what the emitters do.

Codes DR2xx are mapping findings (DR1xx is the recipe's arithmetic, DR3xx+ lint).
A `warning` is a mapping that changes what the engine does (`--strict` refuses it);
`info` is a faithful mapping the user should still know about; `error` means the
target cannot express the recipe at all, so nothing is written for it.
"""

from __future__ import annotations

from dataclasses import dataclass

from distrecipe.engines import ENGINES, Engine
from distrecipe.errors import RecipeError
from distrecipe.findings import Finding, Severity
from distrecipe.job import Plan
from distrecipe.recipe import Offload


@dataclass(frozen=True, slots=True)
class Code:
    """A mapping finding's fixed identity: severity and the one-line reason."""

    severity: Severity
    summary: str


CODES: dict[str, Code] = {
    "DR200": Code("info", "not emitted by --target all"),
    "DR201": Code("warning", "ZeRO-1 has no FSDP2 form; emitted as stage 2, which also shards gradients"),
    "DR202": Code(
        "warning",
        "optimizer-only offload has no FSDP2 form; FSDP2's CPU offload also moves parameters "
        "and gradients and runs the optimizer step on CPU",
    ),
    "DR203": Code(
        "info",
        "FSDP2's CPU offload of parameters also keeps gradients and the optimizer step on CPU",
    ),
    "DR204": Code("warning", "no NVMe offload in this engine; offloading to CPU memory instead"),
    "DR205": Code(
        "warning",
        "verl has no DDP actor; emitted FSDP2 with fsdp_size=1 (every rank holds a full copy)",
    ),
    "DR206": Code(
        "warning",
        "sequence parallelism becomes context parallelism (ring attention) instead of "
        "Ulysses all-to-all; the batch is split the same way",
    ),
    "DR207": Code("warning", "selective recompute is not expressible; whole blocks are recomputed"),
    "DR208": Code("error", "cannot express this recipe"),
    "DR209": Code(
        "warning",
        "Accelerate runs FSDP and multi-GPU only on GPUs; on CPU ranks it falls back to one "
        "non-distributed process",
    ),
    "DR210": Code(
        "warning",
        "verl's Megatron actor has no CPU parameter offload during training; param_offload only "
        "moves parameters to CPU between phases",
    ),
    "DR211": Code("info", "multi-node without launch.master_addr; pass the head node's address at launch"),
    "DR212": Code(
        "info",
        "verl always clips gradients; the recipe has no clipping, so clip_grad=inf (clips nothing)",
    ),
    "DR214": Code(
        "info",
        "HSDP, tensor and context parallel sizes are not TrainingArguments; launch with the "
        "emitted accelerate_config.yaml, whose parallelism_config the Trainer's Accelerator reads",
    ),
    "DR215": Code(
        "warning",
        "Adam with coupled (L2) weight decay has no form here; AdamW (decoupled decay) is used",
    ),
    "DR216": Code(
        "warning",
        "DeepSpeed ZeRO-1/2 has no hybrid sharding; optimizer state and gradients are sharded "
        "over all data-parallel ranks",
    ),
    "DR217": Code(
        "warning",
        "shard_group becomes ZeRO++ hpZ: a secondary parameter copy within each group, while "
        "optimizer state and gradients stay sharded over all data-parallel ranks (not HSDP)",
    ),
    "DR218": Code(
        "warning",
        "strategy megatron becomes DeepSpeed ZeRO data parallelism; tensor and pipeline "
        "parallelism need a Megatron mpu passed to deepspeed.initialize",
    ),
    "DR219": Code(
        "info",
        "tensor parallelism becomes DeepSpeed AutoTP (`tensor_parallel.autotp_size`); "
        "DeepSpeed's train_batch_size counts every rank of a tensor-parallel group, which "
        "share one batch, so it is the global batch × tensor",
    ),
    "DR220": Code("error", "the recipe breaks verl's batch rules; verl would refuse it"),
    "DR221": Code("error", "verl's workers cannot lay the rollout engine out on these GPUs, or it cannot "
                  "split the model's stated heads over its tensor parallelism; verl would refuse it after "
                  "the cluster starts"),
    "DR232": Code("warning", "expert parallelism is the training script's (DeepSpeed MoE's "
                  "`deepspeed.moe.layer.MoE(ep_size=...)`); no ds_config key carries it, so the script "
                  "must say the same"),
}
"""Every mapping finding code with its severity; `explain DR2xx` can read `summary`."""


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
        found.append(finding("DR202", target, native))
    if params != "none" and optimizer == "none":
        found.append(finding("DR203", target, native))
    if "nvme" in (params, optimizer):
        found.append(finding("DR204", target))
    return found


def finding(code: str, target: str, detail: str = "") -> Finding:
    """The finding for `code` on `target`, worded and graded from the catalogue.

    `detail` carries the numbers of this case; the reason is always the catalogue's,
    so two targets reporting the same code say the same thing.
    """
    entry = CODES[code]
    message = f"{target}: {entry.summary}" + (f" ({detail})" if detail else "")
    return Finding(code, message, entry.severity)


def refuse_errors(found: list[Finding]) -> None:
    """Raise when a target cannot express the recipe, naming every reason at once.

    An error finding means a config would be wrong, not merely approximate, so no
    file is written; `--target all` catches this and reports the target as skipped.
    """
    errors = [f for f in found if f.severity == "error"]
    if errors:
        raise RecipeError("; ".join(f"{f.code} {f.message}" for f in errors))


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
        Cell("`MULTI_GPU` / `NO` (replication is DDP)"),
        Cell("`fsdp_size=1`"),
        Cell("no `fsdp` (DDP), as Accelerate"),
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
        "rl: prompts_per_step, rollout_n",
        Cell("not applicable"),
        Cell("not applicable"),
        Cell("`data.train_batch_size`, `rollout.n`, `ppo_mini_batch_size` = global / n", "DR220"),
        Cell("not applicable"),
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
    """The table and the codes as one Markdown page (`docs/equivalence.md` is this, verbatim)."""
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
    lines += ["", "## Codes", "", "| code | severity | meaning |", "|---|---|---|"]
    lines += [f"| {code} | {entry.severity} | {entry.summary} |" for code, entry in CODES.items()]
    return "\n".join(lines) + "\n"


def _cell_text(cell: Cell) -> str:
    return f"{cell.native} **{cell.code}**" if cell.code else cell.native
