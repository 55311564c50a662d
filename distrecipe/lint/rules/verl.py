"""verl (0.9.1) actor batch rules, including those only its GPU workers check.

verl counts `data.train_batch_size` in prompts; each is rolled out `rollout.n` times,
and one optimizer step consumes `ppo_mini_batch_size × n` sequences. The batch rules
themselves are `engines.verl.batch_violations`, which `compile --target verl` also
applies; here they are worded in verl's key names. A rule runs only on numbers the
file writes.
"""

from __future__ import annotations

from collections.abc import Iterator

from distrecipe.engines.hydra import verl_commands
from distrecipe.engines.native import DATA_SUFFIXES
from distrecipe.engines.shell import is_script
from distrecipe.engines.tables import label
from distrecipe.engines.verl import (
    ACTOR,
    ACTOR_STRATEGIES,
    DEPRECATED,
    DYNAMIC,
    FSDP_SIZE,
    GPUS_PER_NODE,
    MICRO,
    MICRO_BATCH_UNSET,
    MINI,
    PROMPTS,
    REFERENCE_POLICY,
    ROLLOUT_DP,
    ROLLOUT_MEMORY,
    ROLLOUT_MEMORY_RANGE,
    ROLLOUT_N,
    ROLLOUT_NAME,
    ROLLOUT_PP,
    ROLLOUT_TP,
    ROLLOUT_TP_DEFAULT,
    ULYSSES,
    VERL_CONFIG_NAMES,
    VerlBatch,
    Violation,
    batch_violations,
    removed_entry,
    rollout_layout_refusal,
    uses_megatron,
)
from distrecipe.job import model_parallel
from distrecipe.keys import did_you_mean, dotted, integer, joined
from distrecipe.lint.rule import Problem
from distrecipe.lint.workspace import Source
from distrecipe.source import KeyPath


def batch_rules(src: Source) -> Iterator[Problem]:
    """A verl batch that verl refuses, before the GPUs start or inside its workers.

    With P = `data.train_batch_size` prompts, n = `rollout.n`, M =
    `actor.ppo_mini_batch_size` prompts, m = `ppo_micro_batch_size_per_gpu`, N GPUs
    and DP = N / ulysses (FSDP) or N / (TP × PP × CP) (Megatron):

    * `validate_config`: P × n divisible by N (Megatron: by DP × m); P ≥ M.
    * only inside the GPU workers: P a multiple of M; M × n divisible by DP; M × n / DP
      divisible by m; N divisible by the Ulysses size and by `fsdp_size`.

    The worker-side failures cost a cluster start-up each (Ray, the rollout engine,
    the model load) before the assertion. Same fact as DR220, which `compile --target
    verl` reports for recipes.

    Fails: verl
    ```text
    data.train_batch_size=60
    actor_rollout_ref.rollout.n=2
    actor_rollout_ref.actor.ppo_mini_batch_size=12
    actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2
    actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=8
    trainer.n_gpus_per_node=8
    ```
    (12 × 2 = 24 sequences split over 8 ranks as 3, but micro 2 does not divide 3.)

    Passes: verl
    ```text
    data.train_batch_size=64
    actor_rollout_ref.rollout.n=2
    actor_rollout_ref.actor.ppo_mini_batch_size=16
    actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2
    actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=8
    trainer.n_gpus_per_node=8
    ```
    (16 × 2 = 32 sequences, 4 per rank, two micro-batches of 2.)

    Without a GPU count (`trainer.n_gpus_per_node=$N`) the rules that need none are
    checked: P ≥ M, and P a multiple of M.

    Fix: the message names the numbers; keep M × n a multiple of DP × m.
    """
    world_free = ("below-one", "mini-exceeds-prompts", "whole-mini-batches")
    megatron = uses_megatron(src.data, src.doc.lines)
    if megatron:
        split = [integer(src.get(*ACTOR, "megatron", f"{k}_parallel_size")) or 1
                 for k in ("tensor_model", "pipeline_model", "context")]
        replica = model_parallel(*split)
    else:
        replica = integer(src.get(*ULYSSES)) or 1
    b = VerlBatch(world=src.ranks or replica, model_parallel=replica, megatron=megatron,
                  prompts=integer(src.get(*PROMPTS)), n=integer(src.get(*ROLLOUT_N)) or 1,
                  mini=integer(src.get(*MINI)), micro=integer(src.get(*MICRO)),
                  fsdp_size=integer(src.get(*FSDP_SIZE)))
    for v in batch_violations(b):
        if src.ranks is not None or v.rule in world_free:
            yield Problem(v.path, _message(v, b))


def _message(v: Violation, b: VerlBatch) -> str:
    """The violation in verl's own key names, and where verl would find it."""
    where = "checked only inside the workers" if v.worker_side else "validate_config refuses it"
    dp, prompts, mini, micro, n = b.dp or 0, b.prompts or 0, b.mini or 0, b.micro, b.n
    if v.rule == "below-one":
        return f"{dotted(v.path)} is below 1; verl's workers divide the batch by it ({where})"
    if v.rule == "model-parallel":
        return f"{b.world} GPUs are not divisible by the model-parallel size ({where})"
    if v.rule == "rollout-split":
        what = f"DP {dp} × micro {micro}" if b.megatron else f"{b.world} GPUs"
        return (f"train_batch_size × rollout.n = {prompts} × {n} = {prompts * n} "
                f"is not divisible by {what} ({where})")
    if v.rule == "whole-mini-batches":
        return (f"data.train_batch_size {prompts} is not a whole number of mini-batches "
                f"of {mini} prompts ({where})")
    if v.rule == "mini-exceeds-prompts":
        return f"ppo_mini_batch_size {mini} > data.train_batch_size {prompts} ({where})"
    sequences = mini * n
    if v.rule == "mini-split":
        return (f"ppo_mini_batch_size × rollout.n = {mini} × {n} = {sequences} sequences "
                f"do not split over DP {dp} ranks ({where})")
    if v.rule == "micro-split":
        return (f"per-rank mini-batch {sequences} / DP {dp} = {sequences // dp} "
                f"is not divisible by ppo_micro_batch_size_per_gpu {micro} ({where})")
    return f"{b.world} GPUs are not divisible by fsdp_size {b.fsdp_size} ({where})"


def unknown_actor_strategy(src: Source) -> Iterator[Problem]:
    """An actor strategy verl does not have.

    `actor_rollout_ref.actor.strategy` picks the training engine: `fsdp` (FSDP1, the
    default), `fsdp2` or `fsdp_turbo` with the dp engine; `megatron`, `veomni` or
    `torchtitan` with theirs. Anything else (`deepspeed`, `FSDP2`) passes
    `validate_config` and fails only when the workers build the actor, after Ray and
    the rollout engine have started.

    Fails: verl
    ```text
    actor_rollout_ref.actor.strategy=deepspeed
    ```

    Passes: verl
    ```text
    actor_rollout_ref.actor.strategy=fsdp2
    ```

    Fix: `fsdp2` (or `megatron`).
    """
    strategy = src.get(*ACTOR, "strategy")
    if isinstance(strategy, str) and strategy not in ACTOR_STRATEGIES:
        hint = did_you_mean(strategy, list(ACTOR_STRATEGIES))
        yield Problem((*ACTOR, "strategy"), f"actor strategy {strategy!r} does not exist in verl{hint} "
                      f"(one of {', '.join(ACTOR_STRATEGIES)}); it fails only when the workers start")


def deprecated_micro_batch(src: Source) -> Iterator[Problem]:
    """The deprecated global `ppo_micro_batch_size` (or `log_prob_micro_batch_size`).

    verl 0.9 sizes micro-batches per GPU (`..._per_gpu`). With both forms set,
    `validate_config` refuses the config ("set exactly once"); with only the global
    one, it passes `validate_config` but the workers never convert it and fail for
    lack of the `_per_gpu` value, after the cluster has started.

    Fails: verl
    ```text
    actor_rollout_ref.actor.ppo_micro_batch_size=64
    trainer.n_gpus_per_node=8
    ```

    Passes: verl
    ```text
    actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=8
    trainer.n_gpus_per_node=8
    ```

    With dynamic batching on (`actor.use_dynamic_bsz`, `critic.use_dynamic_bsz`), verl
    cuts micro-batches by token count, checks neither form and never reads the key: it
    has no effect, and is not reported.

    Fix: `ppo_micro_batch_size_per_gpu` = the global value / number of GPUs.
    """
    actor_dynamic = src.get(*DYNAMIC) is True
    for path, replacement in DEPRECATED:
        value = src.get(*path)
        if value is None:
            continue
        both = src.get(*path[:-1], replacement) is not None
        checked = not (src.get("critic", "use_dynamic_bsz", default=actor_dynamic) is True
                       if path[0] == "critic" else actor_dynamic)  # what validate_config gates on
        if both and checked:
            consequence = "both forms are set, validate_config refuses it"
        elif _dynamic(src, path, actor_dynamic):
            continue
        else:
            consequence = "the workers never convert it and fail without the _per_gpu value"
        yield Problem(path, f"{joined(path)} is deprecated: use {replacement} ({consequence})", key=True)


def micro_batch_unset(src: Source) -> Iterator[Problem]:
    """A micro-batch verl needs and the config sizes nowhere.

    Without dynamic batching (`actor.use_dynamic_bsz`), verl's `validate_config` wants
    every micro-batch stated, per GPU (or by the deprecated global key, DR350): the
    actor's update (`ppo_micro_batch_size_per_gpu`), the rollout's log-prob pass
    (`rollout.log_prob_micro_batch_size_per_gpu`) and, when a reference policy runs (a KL
    loss or a KL penalty in the reward), the reference's (`ref.log_prob_micro_batch_size_per_gpu`).
    All default to null, so a config that leaves one out stops in `validate_config`
    ("Please set at least one of ..."): before any GPU is used, but after the job has
    been queued and the cluster booked. What lint reads as verl's whole command line is
    judged, when it sizes the batch (`data.train_batch_size` and `ppo_mini_batch_size`):
    a launch script (unless it also passes its own arguments on, `"$@"`, or composes
    another config) or an override file; a YAML, which a Hydra config may compose with
    others, is not.

    Fails: verl
    ```text
    data.train_batch_size=64
    actor_rollout_ref.rollout.n=2
    actor_rollout_ref.actor.ppo_mini_batch_size=16
    actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2
    trainer.n_gpus_per_node=8
    ```
    (the rollout's log-prob pass has no micro-batch.)

    Passes: verl
    ```text
    data.train_batch_size=64
    actor_rollout_ref.rollout.n=2
    actor_rollout_ref.actor.ppo_mini_batch_size=16
    actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2
    actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=8
    trainer.n_gpus_per_node=8
    ```

    Fix: the `_per_gpu` key the message names (log-prob passes hold no gradients, so
    their micro-batch is usually larger than the actor's).
    """
    if src.within or src.path.suffix.lower() in DATA_SUFFIXES or src.get(*DYNAMIC) is True:
        return  # a YAML may be one of several a Hydra config composes: judged where all are known
    if src.get(*PROMPTS) is None or src.get(*MINI) is None:
        return  # not the job's batch: a fragment about something else
    where = None
    if is_script(src.path):
        commands = verl_commands("\n".join(src.doc.lines), src.doc.file)
        own = (None, *VERL_CONFIG_NAMES)
        if not commands or any(c.forwarded or c.config_name not in own or removed_entry(c.entry)
                               for c in commands):
            return
        where = commands[0].start
    reference = next((path for path in REFERENCE_POLICY if src.get(*path) is True), None)
    for owner, legacy, refusal in MICRO_BATCH_UNSET:
        if owner[-1] == "ref" and reference is None:
            continue
        section = src.section(*owner)
        if any(_stated(src, section, key) for key in (legacy, f"{legacy}_per_gpu")):
            continue
        name = "actor" if owner == ACTOR else dotted(owner)
        why = (f" (a reference policy runs: {dotted(reference)} is true)"
               if reference is not None and owner[-1] == "ref" else "")
        at = owner if section else reference if why and reference is not None else ()
        yield Problem(at, f"{name} sizes no micro-batch{why}: set {dotted((*owner, f'{legacy}_per_gpu'))}; "
                      f"verl's validate_config refuses the config (\"{refusal}\")", where=where,
                      key=bool(section))
        return  # verl stops at the first


def _stated(src: Source, section: dict[str, object], key: str) -> bool:
    """Whether the config sizes `key`: a value written (a script's `$VAR` too: the shell
    gives it one); a YAML `null` is verl's own default, no size."""
    return key in section and (section[key] is not None or is_script(src.path))


def _dynamic(src: Source, path: KeyPath, actor_dynamic: bool) -> bool:
    """Whether the workers cut the micro-batches `path` sizes by token count (dynamic
    batching), so that they never read it."""
    owner = path[:-1]
    flag = "use_dynamic_bsz" if owner in (ACTOR, ("critic",)) else "log_prob_use_dynamic_bsz"
    return src.get(*owner, flag, default=actor_dynamic) is True


def rollout_memory(src: Source) -> Iterator[Problem]:
    """A rollout engine's share of the GPU outside (0, 1].

    `actor_rollout_ref.rollout.gpu_memory_utilization` is the fraction of each GPU's
    total memory the rollout engine (vLLM, SGLang) takes while it generates. verl's
    `validate_config` does not check it; vLLM refuses a value outside (0, 1] when its
    server starts, after Ray and the actor have started on the cluster.

    Fails: verl
    ```text
    actor_rollout_ref.rollout.gpu_memory_utilization=60
    ```

    Passes: verl
    ```text
    actor_rollout_ref.rollout.gpu_memory_utilization=0.6
    ```

    Fix: a fraction, e.g. 0.6 for 60 % (what `distrecipe plan` counts as `rl.rollout_memory`).
    """
    value = src.get(*ROLLOUT_MEMORY)
    low, high = ROLLOUT_MEMORY_RANGE
    if isinstance(value, int | float) and not isinstance(value, bool) and not low < value <= high:
        yield Problem(ROLLOUT_MEMORY, f"gpu_memory_utilization {value} is not a fraction in ({low:g}, "
                      f"{high:g}]: vLLM refuses it when the rollout server starts, after Ray "
                      "(validate_config does not check it)")


def rollout_layout(src: Source) -> Iterator[Problem]:
    """GPUs that verl cannot split into rollout replicas.

    verl's rollout engine (vLLM, SGLang) runs replicas of `rollout.tensor_model_parallel_size`
    (default 2) × `data_parallel_size` × `pipeline_model_parallel_size` GPUs each. The workers
    assert that the GPUs (`trainer.nnodes × n_gpus_per_node`) are a multiple of that, that a
    replica wider than a node fills whole nodes, and (vLLM with rollout data parallelism)
    that a node's GPUs are a multiple of the tensor parallelism: after Ray, the actor and the
    model load, so one GPU with verl's default TP 2 fails only at start-up. For a recipe
    the degrees come from `native.verl` or verl's defaults, on the recipe's GPUs
    (`compile --target verl` refuses it as DR221); where the recipe states `model.heads`,
    vLLM's split of them over the rollout's TP is checked too (heads % TP, kv heads
    divided or replicated whole: `engines.verl.rollout_heads_refusal`). A verl script
    names no heads, so only its layout is checked.

    Fails: verl
    ```text
    actor_rollout_ref.rollout.name=vllm
    trainer.n_gpus_per_node=1
    ```
    (verl's default rollout tensor parallelism 2 on one GPU.)

    Passes: verl
    ```text
    actor_rollout_ref.rollout.name=vllm
    actor_rollout_ref.rollout.tensor_model_parallel_size=1
    trainer.n_gpus_per_node=1
    ```

    Fix: a rollout tensor parallelism that divides the GPUs per node.
    """
    if src.plan is not None:
        from distrecipe.engines.verl_rollout import rollout_layout as recipe_layout

        at_key = recipe_layout(src.plan)
        if at_key is not None:
            yield Problem(at_key[1], at_key[0])
        return
    if src.ranks is None or src.kind != "verl":
        return
    gpus_per_node = integer(src.get(*GPUS_PER_NODE))
    if gpus_per_node is not None and gpus_per_node < 1:
        yield Problem(GPUS_PER_NODE, f"trainer.n_gpus_per_node {gpus_per_node} is below 1: verl places no "
                                     "worker, and its resource pool refuses it before training")
        return
    degrees = [integer(src.get(*path)) for path in (ROLLOUT_TP, ROLLOUT_DP, ROLLOUT_PP)]
    tp, dp, pp = (value if value is not None and value >= 1 else default
                  for value, default in zip(degrees, (ROLLOUT_TP_DEFAULT, 1, 1), strict=True))
    refused = rollout_layout_refusal(src.ranks, gpus_per_node, tp, dp, pp, src.get(*ROLLOUT_NAME))
    if refused is not None:
        stated = next((path for path in (ROLLOUT_TP, ROLLOUT_DP, ROLLOUT_PP) if src.get(*path) is not None),
                      GPUS_PER_NODE)
        yield Problem(stated, refused)


def removed_entry_module(src: Source) -> Iterator[Problem]:
    """A launch script runs a verl trainer module the installed verl no longer has.

    `python3 -m verl.trainer.fsdp_sft_trainer` was verl's SFT entry up to 0.5; with the
    installed verl, Python stops at once ("No module named verl.trainer.fsdp_sft_trainer"),
    and the overrides were written for that trainer's config, not the PPO config the
    other rules know, so they are not judged.

    Fails: verl
    ```sh
    torchrun --nproc_per_node 8 -m verl.trainer.fsdp_sft_trainer data.train_batch_size=256
    ```

    Passes: verl
    ```sh
    python3 -m verl.trainer.main_ppo data.train_batch_size=256 trainer.n_gpus_per_node=8
    ```

    Fix: the module the message names, with its own config's keys.
    """
    if not is_script(src.path) or src.within:
        return
    for command in verl_commands("\n".join(src.doc.lines), src.doc.file):
        instead = removed_entry(command.entry)
        if instead is not None:
            yield Problem((), f"{command.entry} is not a module of {label('verl')} (its trainer is now "
                              f"{instead}): Python stops with \"No module named {command.entry}\"",
                          where=command.start)
