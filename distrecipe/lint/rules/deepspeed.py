"""What raw DeepSpeed (0.19) accepts silently, or refuses only at start-up on the cluster.

Unknown keys are judged in `unknown_keys.py`, from the key tables generated from the
installed DeepSpeed (`engines/tables`).
"""

from __future__ import annotations

from collections.abc import Iterator

from distrecipe.engines.accelerate import DEEPSPEED_FILLS
from distrecipe.engines.deepspeed import BATCH_KEYS, autos, enabled
from distrecipe.engines.hf import TRAINER_FILLS
from distrecipe.engines.tables import removed_keys, section
from distrecipe.keys import integer, joined
from distrecipe.lint.rule import Problem
from distrecipe.lint.workspace import Source, Use
from distrecipe.source import KeyPath


def auto_in_raw_deepspeed(src: Source) -> Iterator[Problem]:
    """`"auto"` in a ds_config that nothing will fill in.

    `"auto"` is a placeholder the HF Trainer and Accelerate replace (DR315 lists what
    fills each). Raw DeepSpeed does not know it: at the top level it fails with a
    TypeError; inside a block it is dropped without a word and the default is used,
    so `"zero_optimization": {"stage": "auto"}` trains with ZeRO stage 0 (no sharding
    at all) and `"bfloat16": {"enabled": "auto"}` trains in fp32. Through the Trainer or
    Accelerate, an `"auto"` neither fills (`bfloat16.enabled`, the unprefixed
    `prefetch_bucket_size`; through Accelerate alone also the optimizer's betas and
    eps) makes Accelerate raise "not found in kwargs" at start-up.

    Who reads the file: `--ds-config-consumer hf|accelerate|raw`, `ds_config` in
    `[tool.distrecipe]` (one value, or a table of glob = consumer), else what names it:
    a TrainingArguments file (`deepspeed`) or Accelerate config
    (`deepspeed_config_file`) beside it, a launch script (`--deepspeed` for the
    Trainer, `--deepspeed_config` for raw DeepSpeed). When nothing says, an `"auto"`
    the Trainer or Accelerate fills is a template value (DR315); one nobody fills is an error.
    An Accelerate config or launch names the launcher, not the program: unless a launch
    script shows the program (Trainer flags: the HF Trainer), an `"auto"` only the Trainer
    fills is DR319's warning, not an error here; `--ds-config-consumer accelerate` says
    the program is a plain Accelerate loop.

    Fails: deepspeed --world 8
    ```json
    {"train_batch_size": 32, "bfloat16": {"enabled": "auto"}}
    ```
    (Nobody fills the legacy `bfloat16` spelling: raw DeepSpeed trains in fp32.)

    Passes: deepspeed --world 8
    ```json
    {"train_batch_size": 32, "zero_optimization": {"stage": 2}}
    ```

    Passes: deepspeed --world 8
    ```json ds_config.json
    {"train_batch_size": "auto", "zero_optimization": {"stage": 2}}
    ```
    ```json training_args.json
    {"output_dir": "out", "per_device_train_batch_size": 4, "deepspeed": "ds_config.json"}
    ```
    (The Trainer fills every `"auto"`.)

    Fix: write the number (`distrecipe compile` writes all of them), or say who fills it.
    """
    found = list(autos(src.data))
    use = src.workspace.use(src.path) if found else None
    top = section("deepspeed", ())
    for path in found:
        source = _filler(path, use.consumer if use else None)
        if source is not None or _trainer_only(path, use):
            continue  # filled; or filled under the Trainer only, which DR319 says
        unread = len(path) == 1 and top is not None and path[0] not in top.keys
        if unread and (use is None or use.consumer != "accelerate"):
            continue  # DeepSpeed ignores an unknown top-level key, "auto" or not: DR311 says so
        if use is None or use.consumer != "raw":
            who = {"hf": "the HF Trainer does not fill it", "accelerate": "Accelerate does not fill it"}[
                use.consumer] if use else "neither the HF Trainer nor Accelerate fills it"
            by = f" (used by {use.by})" if use else ""
            yield Problem(path, f'"auto" at {joined(path)}: {who}, so it raises "not found in '
                                f'kwargs" at start-up{by}; {_raw_consequence(path)}')
        else:
            yield Problem(path, f'"auto" at {joined(path)}: used raw ({use.by}), {_raw_consequence(path)}')


def auto_filled(src: Source) -> Iterator[Problem]:
    """`"auto"` in a template ds_config: what will fill it, and from where.

    The HF Trainer fills batch sizes, clipping, optimizer and scheduler values,
    fp16/bf16 and the bucket sizes from TrainingArguments and the model; Accelerate
    fills a subset from its config, the DataLoader and the model. Where lint knows (or
    is told, see DR310) which of them reads the file, it names the source; when it
    does not, only the values both fill are accepted.

    Fails: deepspeed --world 8
    ```json ds_config.json
    {"train_batch_size": 32, "train_micro_batch_size_per_gpu": "auto", "zero_optimization": {"stage": 2}}
    ```
    ```json training_args.json
    {"output_dir": "out", "per_device_train_batch_size": 4, "deepspeed": "ds_config.json"}
    ```
    (Reported: filled by the HF Trainer from per_device_train_batch_size.)

    Passes: deepspeed --world 8
    ```json
    {"train_batch_size": 32, "train_micro_batch_size_per_gpu": 4, "zero_optimization": {"stage": 2}}
    ```

    Fix: nothing to fix; write the number instead to make the file usable raw.
    """
    found = list(autos(src.data))
    use = src.workspace.use(src.path) if found else None
    for path in found:
        if _trainer_only(path, use):
            continue  # DR319
        consumer = use.consumer if use is not None and use.decided else None
        source = _filler(path, consumer)
        if source is not None:
            by = f" (used by {use.by})" if use else ""
            yield Problem(path, f'"auto" at {joined(path)} is filled by {source}{by}')


def auto_filled_under_trainer_only(src: Source) -> Iterator[Problem]:
    """`"auto"` that only the HF Trainer fills, in a ds_config an Accelerate config names.

    An Accelerate config (`deepspeed_config_file`) or `accelerate launch
    --deepspeed_config_file` says who launches the job, not which program it runs. Under
    the HF Trainer, which writes `"auto"` in its templates, every `"auto"` it fills is
    filled from TrainingArguments (the optimizer's `betas` and `eps`, the scheduler's
    total steps, ...); under a plain Accelerate loop, Accelerate fills fewer
    (`engines.accelerate.DEEPSPEED_FILLS`), and `accelerator.prepare` raises "not found
    in kwargs" on the rest. Lint settles it where a launch script runs the Accelerate
    config with a Trainer program (its flags, `--per_device_train_batch_size`, or a
    TrainingArguments, Axolotl or LLaMA-Factory file: filled, DR315); where none is in
    view, it says both. `--ds-config-consumer accelerate` (or `hf`) says which.

    Fails: deepspeed
    ```json ds.json
    {"train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": 1,
     "optimizer": {"type": "AdamW", "params": {"lr": "auto", "betas": "auto"}},
     "zero_optimization": {"stage": 2}}
    ```
    ```yaml accelerate_config.yaml
    distributed_type: DEEPSPEED
    num_processes: 8
    deepspeed_config:
      deepspeed_config_file: ds.json
    ```

    Passes: deepspeed
    ```json ds.json
    {"train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": 1,
     "optimizer": {"type": "AdamW", "params": {"lr": "auto", "betas": "auto"}},
     "zero_optimization": {"stage": 2}}
    ```
    ```yaml accelerate_config.yaml
    distributed_type: DEEPSPEED
    num_processes: 8
    deepspeed_config:
      deepspeed_config_file: ds.json
    ```
    ```sh run.sh
    accelerate launch --config_file accelerate_config.yaml train.py --per_device_train_batch_size 4
    ```
    (The Trainer fills `betas` from `adam_beta1` and `adam_beta2`.)

    Fix: write the value (`"betas": [0.9, 0.999]`) if a plain loop may read the file;
    else keep the launch script that runs the Trainer beside it, or declare the reader.
    """
    found = list(autos(src.data))
    use = src.workspace.use(src.path) if found else None
    for path in found:
        if use is not None and _trainer_only(path, use):
            yield Problem(path, f'"auto" at {joined(path)}: whether it is filled depends on the program '
                                f"accelerate launch runs (used by {use.by}): under the HF Trainer it is "
                                f"filled from {TRAINER_FILLS[path]}; under a plain Accelerate loop nothing "
                                'fills it: Accelerate raises "not found in kwargs" at start-up')


def _trainer_only(path: KeyPath, use: Use | None) -> bool:
    """Whether the `"auto"` at `path` is filled only if the program `use` leaves open (an
    Accelerate launch or config, `Use.decided` False) is the HF Trainer."""
    return (use is not None and not use.decided and use.consumer == "accelerate"
            and path in TRAINER_FILLS and path not in DEEPSPEED_FILLS)


def _filler(path: KeyPath, consumer: str | None) -> str | None:
    """What fills the `"auto"` at `path` for `consumer` (None: unknown), or None when nothing does."""
    trainer = TRAINER_FILLS.get(path)
    accelerate = DEEPSPEED_FILLS.get(path)
    if consumer == "hf":
        if trainer is not None:
            return f"the HF Trainer from {trainer}"
        return None if accelerate is None else f"Accelerate (under the HF Trainer) from {accelerate}"
    if consumer == "accelerate":
        return None if accelerate is None else f"Accelerate from {accelerate}"
    if consumer is None and accelerate is not None:
        from_trainer = trainer or accelerate
        return f"the HF Trainer (from {from_trainer}) or Accelerate (from {accelerate})"
    if consumer is None and trainer is not None:
        # An "auto" only the Trainer fills marks a Trainer template; lint says so, and
        # --ds-config-consumer accelerate (or raw) makes it the error it then is.
        return (f"the HF Trainer from {trainer} (Accelerate alone does not fill it; declare "
                "who reads the file with --ds-config-consumer to have that checked)")
    return None


def _raw_consequence(path: KeyPath) -> str:
    """What raw DeepSpeed does with an `"auto"` at `path`."""
    if len(path) == 1 and path[0] in BATCH_KEYS.values():
        return "raw DeepSpeed fails with a TypeError"
    top = section("deepspeed", ())
    if len(path) == 1 and top is not None and path[0] not in top.keys:
        return "raw DeepSpeed ignores the key"
    if len(path) == 1 or path[0] in ("optimizer", "scheduler"):
        return 'raw DeepSpeed passes the string "auto" on and fails where it is used'
    stage = " (stage 0: no sharding)" if path == ("zero_optimization", "stage") else ""
    return f"raw DeepSpeed drops it without a word and uses its default{stage}"


def removed_key(src: Source) -> Iterator[Problem]:
    """A feature removed from DeepSpeed 0.19, whose key it now refuses at start-up.

    DeepSpeed 0.19 removed Apex AMP (`amp`), elasticity, sparse attention, curriculum
    learning (top level), progressive layer drop, the compression library, MoQ
    (`quantize_training`, `eigenvalue`), Nebula, graph harvesting, sparse gradients,
    MiCS (`zero_optimization.mics_shard_size`, `mics_hierarchical_params_gather`) and
    LoCo (`zeropp_loco_param`); a config that still has one fails in `deepspeed.initialize`.

    Fails: deepspeed --world 8
    ```json
    {"train_batch_size": 32, "amp": {"enabled": true}}
    ```

    Passes: deepspeed --world 8
    ```json
    {"train_batch_size": 32, "bf16": {"enabled": true}}
    ```

    Fix: remove the block (use `bf16`/`fp16` for AMP;
    `data_efficiency.data_sampling.curriculum_learning` for curriculum learning).
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

    Fails: deepspeed --world 8
    ```json
    {"train_batch_size": 32, "zero_optimization": {"stage": 2, "offload_param": {"device": "cpu"}}}
    ```

    Passes: deepspeed --world 8
    ```json
    {"train_batch_size": 32, "zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu"}}}
    ```

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

    Fails: deepspeed --world 8
    ```json
    {"train_batch_size": 32,
     "zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu", "ratio": 0.3}}}
    ```

    Passes: deepspeed --world 8
    ```json
    {"train_batch_size": 32,
     "zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu", "ratio": 0.3}}}
    ```

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


def bf16_master_weights_refused(src: Source) -> Iterator[Problem]:
    """Pure bf16 (`bf16_master_weights_and_grads`) where DeepSpeed refuses it.

    DeepSpeed keeps no fp32 master copy under `bf16.bf16_master_weights_and_grads`, and
    refuses it in `deepspeed.initialize`, on every rank: below ZeRO stage 1
    (`DeepSpeedConfig` asserts "only supported with ZeRO Stage 1, 2, or 3"), with
    `bf16_optimizer_states` but without it ("requires bf16_master_weights_and_grads"), and
    with fp32 Adam moments (no `bf16_optimizer_states`) outside ZeRO-Offload: the ZeRO
    optimizer's `_configure_master_weights` then demands `offload_optimizer` with
    DeepSpeedCPUAdam.

    Fails: deepspeed --world 8
    ```json
    {"train_batch_size": 32, "bf16": {"enabled": true, "bf16_master_weights_and_grads": true},
     "zero_optimization": {"stage": 0}}
    ```

    Fails: deepspeed --world 8
    ```json
    {"train_batch_size": 32, "bf16": {"enabled": true, "bf16_master_weights_and_grads": true},
     "zero_optimization": {"stage": 2}}
    ```

    Passes: deepspeed --world 8
    ```json
    {"train_batch_size": 32,
     "bf16": {"enabled": true, "bf16_master_weights_and_grads": true, "bf16_optimizer_states": true},
     "zero_optimization": {"stage": 2}}
    ```

    Fix: ZeRO stage 1 to 3 with `bf16_optimizer_states: true` (Adam's moments in bf16 too:
    2 + 2 + 4 bytes a parameter), or `offload_optimizer` to keep fp32 moments on the host.
    """
    key = "bf16" if "bf16" in src.data else "bfloat16"
    bf16 = src.section(key)
    master = bf16.get("bf16_master_weights_and_grads") is True
    states = bf16.get("bf16_optimizer_states") is True
    stage = integer(src.section("zero_optimization").get("stage", 0))
    if not (master or states) or stage is None:
        return
    named = "bf16_master_weights_and_grads" if master else "bf16_optimizer_states"
    device = src.section("zero_optimization", "offload_optimizer").get("device")
    if stage not in (1, 2, 3):
        yield Problem((key, named), f"{key}.{named} needs ZeRO stage 1, 2 or 3; this file has stage {stage}: "
                      "deepspeed.initialize asserts it", key=True)
    elif not master:
        yield Problem((key, "bf16_optimizer_states"), f"{key}.bf16_optimizer_states needs "
                      "bf16_master_weights_and_grads: true; deepspeed.initialize asserts it", key=True)
    elif not states and not (isinstance(device, str) and device.lower() in ("cpu", "nvme")):
        yield Problem((key, named), f"{key}.bf16_master_weights_and_grads with fp32 Adam moments (no "
                      "bf16_optimizer_states) needs offload_optimizer with DeepSpeedCPUAdam: the ZeRO "
                      "optimizer asserts it at start-up", key=True)


def offload_without_optimizer(src: Source) -> Iterator[Problem]:
    """Optimizer offload with no `optimizer` section, in a ds_config raw DeepSpeed reads.

    Without an `optimizer` section the script brings its own optimizer, and
    `deepspeed.initialize` refuses any but DeepSpeed's CPU ones under ZeRO-Offload
    (`offload_optimizer.device` cpu or nvme): "You are using ZeRO-Offload with a client
    provided optimizer ... " (ZeRORuntimeException), on every rank, at start-up. Through
    the HF Trainer or Accelerate it works: Accelerate maps the Trainer's torch optimizer to
    `DeepSpeedCPUAdam`. So it is reported only where raw DeepSpeed reads the file
    (`--deepspeed_config`, `--ds-config-consumer raw`); a warning, since a script that
    builds `DeepSpeedCPUAdam` itself passes.

    Fails: deepspeed
    ```json ds.json
    {"train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 1,
     "zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu"}}}
    ```
    ```sh run.sh
    deepspeed --num_gpus 8 train.py --deepspeed --deepspeed_config ds.json
    ```

    Passes: deepspeed
    ```json ds.json
    {"train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 1,
     "optimizer": {"type": "AdamW", "params": {"lr": 1e-5}},
     "zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu"}}}
    ```
    ```sh run.sh
    deepspeed --num_gpus 8 train.py --deepspeed --deepspeed_config ds.json
    ```

    Fix: an `optimizer` section (DeepSpeed then builds its CPU optimizer), or
    `"zero_force_ds_cpu_optimizer": false` to run the script's own (slowly).
    """
    if "optimizer" in src.data or src.get("zero_force_ds_cpu_optimizer") is False:
        return
    device = src.section("zero_optimization", "offload_optimizer").get("device")
    if not isinstance(device, str) or device.lower() not in ("cpu", "nvme"):
        return
    use = src.workspace.use(src.path)
    if use is None or use.consumer != "raw":
        return
    yield Problem(("zero_optimization", "offload_optimizer"),
                  f"offload_optimizer (device {device}) with no optimizer section, read raw ({use.by}): "
                  "deepspeed.initialize refuses the script's own torch optimizer under ZeRO-Offload "
                  "(ZeRORuntimeException) unless it is DeepSpeedCPUAdam; add an optimizer section, or set "
                  "zero_force_ds_cpu_optimizer: false", key=True)


def fp16_and_bf16(src: Source) -> Iterator[Problem]:
    """fp16 and bf16 are both enabled.

    A run has one 16-bit format. DeepSpeed asserts "bf16 and fp16 modes cannot be
    simultaneously enabled" in `deepspeed.initialize`; TrainingArguments raises the
    same in its constructor, inside every rank of the launched job.

    Fails: deepspeed --world 8
    ```json
    {"train_batch_size": 32, "fp16": {"enabled": true}, "bf16": {"enabled": true}}
    ```

    Fails: hf
    ```json
    {"output_dir": "out", "fp16": true, "bf16": true}
    ```

    Passes: deepspeed --world 8
    ```json
    {"train_batch_size": 32, "bf16": {"enabled": true}}
    ```

    Fix: keep bf16 on GPUs that have it (A100, H100), fp16 on older ones.
    """
    if src.kind == "deepspeed":
        fp16 = enabled(src.get("fp16"))
        bf16_key = "bf16" if "bf16" in src.data else "bfloat16"
        if fp16 and enabled(src.get(bf16_key)):
            yield Problem((bf16_key, "enabled"), f"{bf16_key}.enabled and fp16.enabled are both true")
    elif src.kind in ("hf", "llamafactory") and src.get("fp16") is True and src.get("bf16") is True:
        yield Problem(("bf16",), "bf16 and fp16 are both true")




def accumulation_left_to_accelerate(src: Source) -> Iterator[Problem]:
    """A ds_config used through Accelerate states no `gradient_accumulation_steps`.

    Accelerate's `DeepSpeedPlugin` then writes 1 into it, over the accumulation the
    Accelerator is given (`Accelerator(gradient_accumulation_steps=...)`, the launcher's
    `ACCELERATE_GRADIENT_ACCUMULATION_STEPS`): the job steps the optimizer every
    micro-batch and the global batch shrinks by the accumulation factor; an HF Trainer
    in that process then finds its `gradient_accumulation_steps` contradicted and stops.
    The Accelerate YAML naming the file says the same (DR344); this is the ds_config's
    side, for a review that changes only the ds_config.

    Fails: deepspeed --world 8
    ```json ds.json
    {"train_micro_batch_size_per_gpu": 2, "zero_optimization": {"stage": 2}}
    ```
    ```yaml accelerate_config.yaml
    distributed_type: DEEPSPEED
    num_processes: 8
    deepspeed_config:
      deepspeed_config_file: ds.json
    ```

    Passes: deepspeed --world 8
    ```json ds.json
    {"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 4, "zero_optimization": {"stage": 2}}
    ```
    ```yaml accelerate_config.yaml
    distributed_type: DEEPSPEED
    num_processes: 8
    deepspeed_config:
      deepspeed_config_file: ds.json
    ```

    Fix: write `gradient_accumulation_steps` in the ds_config (`"auto"` under the Trainer).
    """
    if src.within or "gradient_accumulation_steps" in src.data:
        return
    use = src.workspace.use(src.path)
    if use is not None and use.consumer == "accelerate":
        yield Problem((), f"no gradient_accumulation_steps, and Accelerate reads this file ({use.by}): its "
                          "DeepSpeedPlugin writes 1, over the Accelerator's accumulation")
