"""Plan → Accelerate `accelerate_config.yaml` (FSDP2, DDP, or DeepSpeed through Accelerate).

Accelerate checks the YAML's top-level keys but silently ignores unknown keys inside
`fsdp_config` and `parallelism_config` (a misspelt or FSDP1-only key just vanishes),
so this module writes only keys that `accelerate launch` copies into its arguments
and exports to the workers; the tests hold it to the key set Accelerate's source
reads. The YAML has no batch keys: the per-GPU micro-batch belongs to the script's
DataLoader and accumulation to `ACCELERATE_GRADIENT_ACCUMULATION_STEPS` (`launch_env`).
"""

from __future__ import annotations

from typing import Any

import yaml

from distrecipe.engines import Engine
from distrecipe.engines.accelerate import (
    CONFIG_FILE,
    FSDP1_STAGE,
    MIXED_PRECISION,
    STATE_DICT_TYPE,
    distributed_type,
)
from distrecipe.engines.deepspeed import CONFIG_FILE as DS_CONFIG_FILE
from distrecipe.findings import Finding
from distrecipe.job import Plan
from distrecipe.output import one_line
from distrecipe.translator import carry, deepspeed
from distrecipe.translator.codes import finding
from distrecipe.translator.equivalence import (
    expert_findings,
    offload_findings,
    precision_findings,
    refuse_errors,
    token_batch_findings,
    virtual_stages,
)
from distrecipe.translator.native import merge
from distrecipe.translator.targets import EmitOptions, Output, render_deepspeed

TARGET = "accelerate"


def launch_env(plan: Plan) -> dict[str, str]:
    """Environment `Accelerator()` reads for what the YAML cannot hold.

    On the DeepSpeed path the ds_config carries accumulation (and Accelerate forbids
    setting it twice), so nothing is needed there.
    """
    if distributed_type(plan) == "DEEPSPEED":
        return {}
    if plan.script_batch and plan.script_accumulation is None:
        return {}  # the script's Accelerator (or its Trainer) says it
    accumulation = plan.script_accumulation or plan.batch.accumulation
    return {"ACCELERATE_GRADIENT_ACCUMULATION_STEPS": str(accumulation)}


def findings(plan: Plan, *, launched: bool = False, carried: bool = True) -> list[Finding]:
    """Every way the Accelerate config differs from the recipe; errors mean no config.
    `carried` false leaves out the carry table's findings, for a target that writes this
    file beside another (TRL's config) and asks the table over both."""
    kind = distributed_type(plan)
    found = token_batch_findings(plan, TARGET)
    if plan.recipe.strategy == "megatron":
        found.append(finding("DR208", TARGET, "strategy megatron; use --target verl"))
    if plan.dims.pipeline > 1:
        found.append(finding("DR208", TARGET,
                             f"pipeline parallel {plan.dims.pipeline}{virtual_stages(plan)}"))
    if kind in ("NO", "MULTI_GPU") and (plan.dims.tensor > 1 or plan.dims.sequence > 1):
        found.append(
            finding(
                "DR208",
                TARGET,
                f"tensor {plan.dims.tensor} / sequence {plan.dims.sequence} need an FSDP2 shard "
                f"group of 2+ ranks; shard_group is {plan.dims.shard_group}",
            )
        )
    if kind != "DEEPSPEED":  # DeepSpeed's findings say it for its path
        found.extend(expert_findings(plan, TARGET))
    if kind == "FSDP":
        found.extend(_fsdp_findings(plan))
    if kind == "DEEPSPEED":  # the ds_config it points at, e.g. AutoTP's
        found.extend(deepspeed.findings(plan, alone=False))
    else:
        found.extend(precision_findings(plan, TARGET))
    if kind in ("MULTI_GPU", "FSDP") and plan.recipe.cluster.device == "cpu":
        found.append(finding("DR209", TARGET, f"{plan.dims.world} CPU ranks"))
    if plan.dims.nodes > 1 and plan.recipe.launch.master_addr is None:
        found.append(finding("DR211", TARGET, "accelerate launch --main_process_ip ADDR"))
    if plan.stage > 0 and kind in ("NO", "MULTI_GPU"):
        written = carry.as_written("strategy", plan.recipe.strategy)
        found.append(finding("DR236", TARGET, f"strategy {plan.recipe.strategy}{written} stage {plan.stage} "
                             f"over one shard (parallel.shard_group {plan.dims.shard_group}) is {kind}"))
    elif plan.recipe.strategy == "zero" and kind == "FSDP":
        version = carry.as_written("fsdp_version", 2)
        found.append(finding("DR238", TARGET, f"strategy zero{carry.as_written('strategy', 'zero')} stage "
                             f"{plan.stage} runs as FSDP2, fsdp_version 2{version} "
                             "(launch.backend accelerate-deepspeed keeps DeepSpeed)"))
    recompute = plan.recipe.activation_checkpointing
    if kind != "FSDP" and recompute != "none" and carried:  # else the file beside it may carry it (TRL's)
        written = carry.as_written("activation_checkpointing")
        found.append(finding("DR222", TARGET, f"activation_checkpointing {recompute}{written}: Accelerate's "
                             f"{kind} path has no key for it: the script checkpoints its blocks"))
    weights = plan.recipe.checkpoint.weights if plan.recipe.checkpoint else None
    if kind in ("NO", "MULTI_GPU") and weights == "sharded":
        written = carry.as_written("checkpoint.weights")
        found.append(finding("DR222", TARGET, f"checkpoint.weights sharded{written}: DDP keeps the whole "
                             "model on every rank, and a checkpoint saves it whole"))
    if kind != "DEEPSPEED" and plan.recipe.precision == "auto":
        found.append(finding("DR235", TARGET, "mixed_precision is left out: the Trainer's --bf16 / --fp16 "
                             "set it; a script without the Trainer runs Accelerate's default, no (fp32); "
                             f"precision auto{carry.as_written('precision')}"))
    columns: tuple[Engine, ...] = ("accelerate", "deepspeed") if kind == "DEEPSPEED" else ("accelerate",)
    return found + carry.findings(plan, columns, TARGET, launched=launched) if carried else found


def _fsdp_findings(plan: Plan) -> list[Finding]:
    found: list[Finding] = []
    if plan.stage == 1:
        found.append(finding("DR201", TARGET, "fsdp_reshard_after_forward: false"))
    if plan.dims.shard_group == 1 and plan.dims.replicas > 1:
        # Accelerate refuses context/tensor parallel beside pure replication.
        found.append(finding("DR208", TARGET, "sequence parallel with unsharded replicas"))
    found.extend(offload_findings(plan.recipe.offload, TARGET, "fsdp_offload_params: true"))
    if plan.dims.sequence > 1:
        found.append(finding("DR206", TARGET, f"parallelism_config_cp_size: {plan.dims.sequence}"))
    if plan.recipe.activation_checkpointing == "selective":
        found.append(finding("DR207", TARGET, "fsdp_activation_checkpointing: true"))
    if plan.fsdp_version == 1 and (plan.dims.tensor > 1 or plan.dims.sequence > 1):
        # `accelerate launch` refuses a parallelism_config without fsdp_version 2.
        found.append(finding("DR208", TARGET, f"fsdp_version 1 with tensor {plan.dims.tensor} / sequence "
                             f"{plan.dims.sequence}: Accelerate's parallelism_config needs FSDP2"))
    elif plan.fsdp_version == 1 and plan.dims.hybrid and plan.dims.shard_group != plan.dims.gpus_per_node:
        found.append(finding("DR208", TARGET, "fsdp_version 1 with parallel.shard_group "
                             f"{plan.dims.shard_group}: FSDP1's HYBRID_SHARD shards within one node "
                             f"({plan.dims.gpus_per_node} ranks), and parallelism_config needs FSDP2"))
    return found


def emit(plan: Plan) -> dict[str, Any]:
    """The accelerate config for `plan`, assuming `findings(plan)` holds no error;
    the recipe's `native.accelerate` merged in last."""
    kind = distributed_type(plan)
    config: dict[str, Any] = {"compute_environment": "LOCAL_MACHINE", "distributed_type": kind}
    if kind != "DEEPSPEED" and plan.recipe.precision != "auto":
        # Beside a deepspeed_config_file Accelerate refuses mixed_precision: the ds_config's
        # bf16/fp16 blocks decide; `auto` leaves it to the Trainer's --bf16 / --fp16.
        config["mixed_precision"] = MIXED_PRECISION[plan.precision]
    config["use_cpu"] = False
    config["num_machines"] = plan.dims.nodes
    config["num_processes"] = plan.dims.world
    config["machine_rank"] = 0
    if plan.dims.nodes > 1:
        if plan.recipe.launch.master_addr is not None:
            config["main_process_ip"] = plan.recipe.launch.master_addr
        config["rdzv_backend"] = "static"
        config["same_network"] = True
    config["main_process_port"] = plan.recipe.launch.master_port
    if kind == "FSDP":
        config["fsdp_config"] = fsdp_config(plan)
        # FSDP1's hybrid is its sharding strategy: it has no parallelism_config.
        if plan.fsdp_version != 1 and (plan.dims.hybrid or plan.dims.tensor > 1 or plan.dims.sequence > 1):
            config["parallelism_config"] = {
                "parallelism_config_dp_replicate_size": plan.dims.replicas,
                "parallelism_config_dp_shard_size": plan.dims.shard_group,
                "parallelism_config_tp_size": plan.dims.tensor,
                "parallelism_config_cp_size": plan.dims.sequence,
            }
    elif kind == "DEEPSPEED":
        deepspeed: dict[str, Any] = {
            "deepspeed_config_file": DS_CONFIG_FILE,
            "zero3_init_flag": plan.stage == 3,
        }
        if plan.dims.nodes > 1:
            deepspeed["deepspeed_multinode_launcher"] = "standard"
        config["deepspeed_config"] = deepspeed
        if plan.dims.sequence > 1:
            # Ulysses through Accelerate (ParallelismConfig's sp_size, DeepSpeed's backend): the
            # ds_config's sequence_parallel_size alone sets no sequence-parallel groups up.
            config["parallelism_config"] = {
                "parallelism_config_dp_replicate_size": 1,
                "parallelism_config_dp_shard_size": plan.dims.dp,
                "parallelism_config_tp_size": 1,
                "parallelism_config_sp_size": plan.dims.sequence,
                "parallelism_config_sp_backend": "deepspeed",
            }
    return merge(config, plan.recipe.native.accelerate)


def fsdp_config(plan: Plan) -> dict[str, Any]:
    """The FSDP keys of the plan's `fsdp_version`; stage 1 lands on stage 2 (reported as DR201).
    FSDP2 says the stage as `fsdp_reshard_after_forward`; FSDP1 as `fsdp_sharding_strategy`,
    which `accelerate launch` always exports and the plugin reads before that key.

    The Trainer emitter re-spells these for `TrainingArguments.fsdp_config`, so the
    choices are made here once.
    """
    # Loading on rank 0 and broadcasting is FSDP's counterpart of ZeRO-3's zero.Init;
    # the launcher insists on sync_module_states beside it, even under FSDP2.
    efficient_loading = plan.stage == 3
    fsdp: dict[str, Any] = {"fsdp_version": plan.fsdp_version or 2}
    if plan.fsdp_version == 1:
        fsdp["fsdp_sharding_strategy"] = fsdp1_sharding(plan)
    else:
        fsdp["fsdp_reshard_after_forward"] = plan.reshard_after_forward
    fsdp |= {
        "fsdp_offload_params": plan.recipe.offload.enabled,
        "fsdp_auto_wrap_policy": "TRANSFORMER_BASED_WRAP",
    }
    if plan.recipe.model.layer_cls is not None:
        fsdp["fsdp_transformer_layer_cls_to_wrap"] = plan.recipe.model.layer_cls
    weights = plan.recipe.checkpoint.weights if plan.recipe.checkpoint else None
    if weights is not None:  # else Accelerate's own: SHARDED_STATE_DICT under FSDP2
        fsdp["fsdp_state_dict_type"] = STATE_DICT_TYPE[weights]
    fsdp["fsdp_cpu_ram_efficient_loading"] = efficient_loading
    fsdp["fsdp_sync_module_states"] = efficient_loading
    fsdp["fsdp_activation_checkpointing"] = plan.recipe.activation_checkpointing != "none"
    return fsdp


def fsdp1_sharding(plan: Plan) -> str:
    """FSDP1's sharding strategy for the plan's stage (1 lands on 2) and shard groups
    (`engines.accelerate.FSDP1_STAGE`, read the other way)."""
    wanted = (max(plan.stage, 2), plan.dims.hybrid)
    return next(name for name, held in FSDP1_STAGE.items() if held == wanted)


def render(plan: Plan, options: EmitOptions) -> Output:
    """`accelerate_config.yaml`, plus the ds_config it points at on the DeepSpeed path."""
    found = findings(plan, launched=options.launched)
    refuse_errors(found)
    files: dict[str, str] = {}
    if distributed_type(plan) == "DEEPSPEED":
        files.update(render_deepspeed(plan, options).files)
    files[CONFIG_FILE] = text(plan)
    return Output(files=files, findings=tuple(found))


def _batch_line(plan: Plan) -> str:
    if plan.script_batch and plan.script_accumulation is not None:
        return ("# Batch (no Accelerate keys): the training script's micro-batch (its DataLoader's "
                f"batch_size, or the Trainer's --per_device_train_batch_size) x accumulation "
                f"{plan.script_accumulation}.")
    if plan.script_batch:
        return ("# Batch (no Accelerate keys): the training script's (its DataLoader's batch_size, or the "
                "Trainer's --per_device_train_batch_size and --gradient_accumulation_steps).")
    return (f"# Batch (no Accelerate keys): micro {plan.batch.micro} per GPU (the DataLoader's batch_size)"
            f" x accumulation {plan.batch.accumulation} x DP {plan.dims.dp} = global {plan.batch.global_}.")


def text(plan: Plan) -> str:
    """The YAML, headed by what it cannot hold (batch numbers), as comments."""
    env = " ".join(f"{key}={value}" for key, value in launch_env(plan).items())
    header = [
        f"# distrecipe: {one_line(plan.recipe.name)}. "
        "accelerate launch --config_file accelerate_config.yaml SCRIPT",
        _batch_line(plan),
    ]
    if plan.dims.nodes > 1:
        nodes = plan.dims.nodes
        header.append(f"# Run on each of the {nodes} nodes with --machine_rank 0..{nodes - 1}.")
    if env:
        header.append(f"# Accumulation reaches Accelerator() through the environment: {env}")
    body = yaml.safe_dump(emit(plan), sort_keys=False, default_flow_style=False)
    return "\n".join(header) + "\n" + body

