"""ds_config.json → recipe: the inverse of `translator/deepspeed.py`.

DeepSpeed states the batch (all of it, or two numbers and DeepSpeed derives the
third: the recipe says `auto` there and resolves it exactly, where DeepSpeed floors),
precision, optimizer, clipping, ZeRO stage, offload, the ZeRO++ partition (the
recipe's `shard_group`), the sequence-parallel size and AutoTP's tensor degree (whose
ranks `train_batch_size` counts once each: the recipe's global batch is it ÷ tensor).
The bucket sizes are HF's function of the hidden size, so `reduce_bucket_size = h²` gives back `hidden_size`.
"""

from __future__ import annotations

import math
from typing import Any

from distrecipe.engines import deepspeed as engine
from distrecipe.engines.deepspeed import autos, enabled
from distrecipe.keys import section
from distrecipe.translator.importers import Context, Imported, cluster, inverse, stage_strategy

OPTIMIZERS = inverse(engine.OPTIMIZER_TYPE)


def to_recipe(data: dict[str, Any], context: Context) -> Imported:
    world = context.need_world("a ds_config")
    notes: list[str] = []
    zero = section(data, "zero_optimization")
    stage = zero.get("stage", 0)
    if isinstance(stage, str) and stage.isdigit():
        stage = int(stage)  # DeepSpeed's pydantic model reads "1" as stage 1
    if not isinstance(stage, int) or isinstance(stage, bool):
        notes.append(f"zero_optimization.stage {stage!r}: raw DeepSpeed drops it and runs stage 0, "
                     "and so does this recipe")
        stage = 0
    recipe: dict[str, Any] = {"recipe": 1, "model": _model(zero, notes), "cluster": cluster(world),
                              "strategy": stage_strategy(stage), "stage": stage}
    offload = _offload(zero, stage)
    if offload:
        recipe["offload"] = offload
    parallel: dict[str, Any] = {}
    sequence, partition = data.get("sequence_parallel_size"), zero.get("zero_hpz_partition_size")
    if isinstance(sequence, int) and sequence > 1:
        parallel["sequence"] = sequence
    if stage == 3 and isinstance(partition, int) and not isinstance(partition, bool) and partition > 1:
        if partition < world.size:
            parallel["shard_group"] = partition
        else:  # DeepSpeed's groups take min(partition, world size): every rank, as shard_group all
            notes.append(f"zero_optimization.zero_hpz_partition_size {partition} is not below the "
                         f"{world.size} ranks: DeepSpeed partitions over min({partition}, {world.size}), "
                         "all of them, which is the recipe's shard_group all")
    tensor = section(data, "tensor_parallel").get("autotp_size")
    if isinstance(tensor, int) and not isinstance(tensor, bool) and tensor > 1:
        parallel["tensor"] = tensor
    if parallel:
        recipe["parallel"] = parallel
    recipe["batch"] = batch(data, parallel.get("tensor", 1))
    precision_autos = [k for k in ("bf16", "bfloat16", "fp16") if section(data, k).get("enabled") == "auto"]
    recipe["precision"] = "auto" if precision_autos and precision(data) == "fp32" else precision(data)
    optimizer = _optimizer(data.get("optimizer"), notes)
    bf16 = section(data, "bf16") or section(data, "bfloat16")
    if recipe["precision"] == "bf16" and bf16.get("bf16_master_weights_and_grads") is True:
        if optimizer:  # pure bf16: the recipe's optimizer says it
            optimizer["master_weights"] = "bf16"
            if bf16.get("bf16_optimizer_states") is True:
                optimizer["state_dtype"] = "bf16"
        else:
            notes.append("bf16.bf16_master_weights_and_grads: the ds_config leaves the optimizer to the "
                         "script, so the recipe has no optimizer section to say pure bf16 in; the keys are "
                         "carried in native.deepspeed and plan counts an fp32 master copy")
    if optimizer:
        recipe["optimizer"] = optimizer
    clip = data.get("gradient_clipping")
    if isinstance(clip, int | float) and not isinstance(clip, bool):
        recipe["grad_clip"] = clip
    schedule = _schedule(data.get("scheduler"))
    if schedule:
        recipe["schedule"] = schedule
    weights = _weights(zero, stage)
    if weights:
        recipe["checkpoint"] = {"weights": weights}
    # The section only configures deepspeed.checkpointing; what it turns on says the script uses it.
    if any(value is True for value in section(data, "activation_checkpointing").values()):
        recipe["activation_checkpointing"] = "full"
    if context.via is None and next(autos(data), None) is not None:
        notes.append('"auto" values are filled by the HF Trainer or Accelerate, not by this file: import the '
                     "TrainingArguments JSON that names it instead, for their values")
    return Imported(recipe, notes)


def batch(data: dict[str, Any], tensor: int = 1) -> dict[str, Any]:
    """The three batch numbers; one DeepSpeed would derive becomes `auto`.

    Under AutoTP `train_batch_size` counts each of a tensor group's `tensor` ranks
    (`engine.batch_ranks`); a count they do not divide stays as written, so the
    recipe's batch check reports it.
    """
    numbers = {ours: data[theirs] if isinstance(data.get(theirs), int) else "auto"
               for ours, theirs in engine.BATCH_KEYS.items()}
    total = numbers["global"]
    if isinstance(total, int) and total % tensor == 0:
        numbers["global"] = total // tensor
    if isinstance(total, int) and not any(theirs in data for theirs in
                                          (engine.BATCH_KEYS["micro"], engine.BATCH_KEYS["accumulation"])):
        numbers["micro_policy"] = "accumulation-1"  # DeepSpeed's rule for a train_batch_size alone
    return numbers


def precision(data: dict[str, Any]) -> str:
    if enabled(data.get("bf16")) or enabled(data.get("bfloat16")):
        return "bf16"
    return "fp16" if enabled(data.get("fp16")) else "fp32"


def _offload(zero: dict[str, Any], stage: int) -> dict[str, Any]:
    """Offload as DeepSpeed applies it: `offload_param` only at stage 3 (below, it is inert
    and carried natively as written)."""
    out: dict[str, Any] = {}
    for ours, theirs in (("optimizer", "offload_optimizer"), ("params", "offload_param")):
        block = zero.get(theirs)
        if ours == "params" and stage < 3:
            continue
        if isinstance(block, dict) and block.get("device", "none") != "none":
            out[ours] = block["device"]
            if "nvme_path" in block:
                out["nvme_path"] = block["nvme_path"]
            if block.get("pin_memory") is False:
                out["pin_memory"] = False
    return out


def _optimizer(block: Any, notes: list[str]) -> dict[str, Any]:
    if not isinstance(block, dict):
        return {}
    kind = str(block.get("type", "")).lower()
    params = section(block, "params")
    if kind not in OPTIMIZERS:
        notes.append(f"optimizer.type {block.get('type')!r} has no recipe name: the block is carried in "
                     "native.deepspeed and compiles as written; the recipe's optimizer fields do not "
                     "describe it (plan counts AdamW's state)")
        return {}
    name = OPTIMIZERS[kind]
    if name == "adam" and params.get("adam_w_mode", True) is not False:
        name = "adamw"  # DeepSpeed's Adam decouples weight decay unless adam_w_mode is false
    out: dict[str, Any] = {"name": name}
    for key in ("lr", "betas", "eps", "weight_decay"):
        if key in params and params[key] != "auto":
            out[key] = params[key]
    return out


SCHEDULES = inverse(engine.SCHEDULERS)


def _schedule(block: Any) -> dict[str, Any]:
    """DeepSpeed's warmup schedulers as the recipe's schedule (what differs from the recipe's
    shape, a log warmup or a floor, stays native: `residue`); other schedulers are native."""
    kind = str(block.get("type", "")).lower() if isinstance(block, dict) else ""
    if kind not in SCHEDULES:
        return {}
    params = section(block, "params")
    out: dict[str, Any] = {"decay": SCHEDULES[kind]}
    for ours, theirs in (("warmup_steps", "warmup_num_steps"), ("total_steps", "total_num_steps")):
        value = params.get(theirs)
        least = 0 if ours == "warmup_steps" else 1
        if isinstance(value, int) and not isinstance(value, bool) and value >= least:
            out[ours] = value
    ratio = params.get("cos_min_ratio")
    # 0 is no floor, what the recipe says by leaving min_lr_ratio out (and the emitter writes so).
    if out["decay"] == "cosine" and isinstance(ratio, int | float) and not isinstance(ratio, bool) \
            and 0 < ratio <= 1:
        out["min_lr_ratio"] = ratio
    return out


def _weights(zero: dict[str, Any], stage: int) -> str | None:
    """`checkpoint.weights` from ZeRO-3's gather-on-save switch (either spelling)."""
    for key in (engine.GATHER_ON_SAVE, "stage3_gather_fp16_weights_on_model_save"):
        if stage == 3 and isinstance(zero.get(key), bool):
            return "full" if zero[key] else "sharded"
    return None


def _model(zero: dict[str, Any], notes: list[str]) -> dict[str, Any]:
    """`hidden_size` when `reduce_bucket_size` is a perfect square (HF's rule); else nothing."""
    size = zero.get("reduce_bucket_size")
    if not isinstance(size, int) or isinstance(size, bool) or size < 1:
        return {}
    hidden = math.isqrt(size) if size > 0 else 0
    if hidden and hidden * hidden == size:
        notes.append(f"model.hidden_size {hidden} is read from zero_optimization.reduce_bucket_size "
                     "(hidden², the HF Trainer's rule), and gives "
                     "zero_optimization.stage3_prefetch_bucket_size and stage3_param_persistence_threshold "
                     "back: a file without them (another engine's) carries none")
        return {"hidden_size": hidden}
    notes.append(f"zero_optimization.reduce_bucket_size {size} is not hidden²: model.hidden_size stays "
                 "unknown, and the size is carried in native.deepspeed")
    return {}
