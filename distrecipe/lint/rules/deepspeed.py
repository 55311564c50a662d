"""What raw DeepSpeed (0.19) accepts silently, or refuses only at start-up on the cluster.

Unknown keys are judged in `unknown_keys.py`, from the key tables generated from the
installed DeepSpeed (`engines/tables`).
"""

from __future__ import annotations

from collections.abc import Iterator

from distrecipe.engines.deepspeed import ACCELERATE_FILLS, autos, enabled
from distrecipe.engines.tables import removed_keys
from distrecipe.keys import integer, joined
from distrecipe.lint.rule import Problem, Source


def auto_in_raw_deepspeed(src: Source) -> Iterator[Problem]:
    """`"auto"` in a ds_config that nothing will fill in.

    `"auto"` is a placeholder for the Hugging Face Trainer (which fills every one from
    TrainingArguments) and, partly, for Accelerate. Raw DeepSpeed does not know it: at
    the top level it fails with a TypeError; inside a block it is dropped without a
    word and the default is used, so `"zero_optimization": {"stage": "auto"}` trains
    with ZeRO stage 0 (no sharding at all). Through Accelerate without the Trainer,
    only the batch, clipping, precision, bucket, optimizer lr/weight decay and
    scheduler values are filled; any other `"auto"` raises "not found in kwargs".

    A ds_config counts as used by the Trainer or Accelerate when a TrainingArguments
    JSON (`"deepspeed": "ds_config.json"`) or an Accelerate config
    (`deepspeed_config_file`) in the same directory names it.

    Fails: `{"train_batch_size": 32, "zero_optimization": {"stage": "auto"}}`.
    Fix: write the number (`distrecipe compile` writes all of them), or suppress
    with `"//distrecipe-ignore": ["DR310"]` when another tool fills them.
    """
    users = {sibling.kind for sibling in src.workspace.consumers(src.path)}
    if "hf" in users:
        return
    for path in autos(src.data):
        if "accelerate" in users:
            if path not in ACCELERATE_FILLS:
                yield Problem(path, f'"auto" at {joined(path)}: Accelerate (without the HF Trainer) '
                                    "cannot fill it and raises at start-up")
        elif len(path) == 1:
            yield Problem(path, f'"auto" at top-level {path[0]}: raw DeepSpeed fails with a TypeError')
        else:
            stage = " (stage 0: no sharding)" if path == ("zero_optimization", "stage") else ""
            yield Problem(path, f'"auto" at {joined(path)}: raw DeepSpeed silently drops it and uses '
                                f"its default{stage}")


def removed_key(src: Source) -> Iterator[Problem]:
    """A feature removed from DeepSpeed 0.19, whose key it now refuses at start-up.

    DeepSpeed 0.19 removed Apex AMP (`amp`), elasticity, sparse attention, curriculum
    learning (top level), progressive layer drop, the compression library, MoQ
    (`quantize_training`, `eigenvalue`), Nebula, graph harvesting, sparse gradients,
    MiCS (`zero_optimization.mics_shard_size`, `mics_hierarchical_params_gather`) and
    LoCo (`zeropp_loco_param`); a config that still has one fails in `deepspeed.initialize`.

    Fails: `"amp": {"enabled": true}`. Fix: remove the block (use `bf16`/`fp16` for
    AMP; `data_efficiency.data_sampling.curriculum_learning` for curriculum learning).
    """
    for key in src.data:
        if key in removed_keys(()):
            yield Problem((key,), f"{key!r} was removed in DeepSpeed 0.19; it refuses the config", key=True)
    zero = src.get("zero_optimization")
    for key in zero if isinstance(zero, dict) else ():
        if key in removed_keys(("zero_optimization",)):
            yield Problem(("zero_optimization", key),
                          f"zero_optimization.{key} was removed in DeepSpeed 0.19; it refuses the config",
                          key=True)


def offload_param_below_stage3(src: Source) -> Iterator[Problem]:
    """`offload_param` with a ZeRO stage below 3 does nothing.

    Only stage 3 partitions parameters, so only stage 3 reads `offload_param`; at
    stages 0-2 DeepSpeed accepts the block and ignores it, and the parameters stay
    on the GPU. (`offload_optimizer` works from stage 1.)

    Fails: `"zero_optimization": {"stage": 2, "offload_param": {"device": "cpu"}}`.
    Fix: stage 3, or remove `offload_param` (offload the optimizer instead).
    """
    zero = src.get("zero_optimization")
    if not isinstance(zero, dict):
        return
    stage = integer(zero.get("stage", 0))
    block = zero.get("offload_param")
    device = block.get("device") if isinstance(block, dict) else None
    if stage is not None and stage < 3 and device not in (None, "none"):
        yield Problem(("zero_optimization", "offload_param"),
                      f"offload_param (device {device}) is ignored at ZeRO stage {stage}: "
                      "only stage 3 partitions, and so offloads, parameters", key=True)


def zero_setting_refused_at_stage(src: Source) -> Iterator[Problem]:
    """A ZeRO setting DeepSpeed refuses at the configured stage.

    `DeepSpeedConfig` checks these only when `deepspeed.initialize` runs on the
    cluster: the stage must be 0 to 3; `compute_grad_norm: false` works only at
    stages 1 and 2; a partial optimizer offload (`offload_optimizer.ratio` below 1)
    only at stage 3; `gradient_allreduce_op: "sum"` not at stage 3.

    Fails: `"zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu", "ratio": 0.3}}`.
    Fix: the stage the setting needs, or drop the setting.
    """
    zero = src.section("zero_optimization")
    stage = integer(zero.get("stage", 0))
    if stage is None:
        return
    if not 0 <= stage <= 3:
        yield Problem(("zero_optimization", "stage"), f"ZeRO stage {stage} does not exist (0 to 3)")
        return
    if zero.get("compute_grad_norm") is False and stage not in (1, 2):
        yield Problem(("zero_optimization", "compute_grad_norm"),
                      f"compute_grad_norm: false works only at ZeRO stage 1 or 2, not {stage}", key=True)
    ratio = src.section("zero_optimization", "offload_optimizer").get("ratio")
    if isinstance(ratio, (int, float)) and not isinstance(ratio, bool) and ratio < 1 and stage != 3:
        yield Problem(("zero_optimization", "offload_optimizer", "ratio"),
                      f"offload_optimizer.ratio {ratio} (partial offload) works only at ZeRO stage 3, "
                      f"not {stage}")
    op = src.get("gradient_allreduce_op")
    if isinstance(op, str) and op.lower() == "sum" and stage == 3:
        yield Problem(("gradient_allreduce_op",), 'gradient_allreduce_op "sum" is refused with ZeRO stage 3')


def fp16_and_bf16(src: Source) -> Iterator[Problem]:
    """fp16 and bf16 are both enabled.

    A run has one 16-bit format. DeepSpeed asserts "bf16 and fp16 modes cannot be
    simultaneously enabled" in `deepspeed.initialize`; TrainingArguments raises the
    same in its constructor, inside every rank of the launched job.

    Fails: `"fp16": {"enabled": true}, "bf16": {"enabled": true}`.
    Fix: keep bf16 on GPUs that have it (A100, H100), fp16 on older ones.
    """
    if src.kind == "deepspeed":
        fp16 = enabled(src.get("fp16"))
        bf16_key = "bf16" if "bf16" in src.data else "bfloat16"
        if fp16 and enabled(src.get(bf16_key)):
            yield Problem((bf16_key, "enabled"), f"{bf16_key}.enabled and fp16.enabled are both true")
    elif src.kind == "hf" and src.get("fp16") is True and src.get("bf16") is True:
        yield Problem(("bf16",), "bf16 and fp16 are both true")


