"""verl's rollout engine on the same GPUs as the actor: the second phase `fits?` must cover.

TRL's GRPO with vLLM colocated is priced the same way (`_trl`), with GRPOConfig's own
defaults: no offload between phases, vLLM's tensor parallelism 1, and the fraction kept
through training unless vLLM's sleep mode is on. So is OpenRLHF's colocated job
(`_openrlhf`), read from the command distrecipe writes for it, with the reference model
beside the actor in both phases and the critic and reward model named as not priced
(docs/plan.md, "OpenRLHF's colocated job"). A vLLM server (`rl.rollout_mode: server`) runs
on GPUs outside the recipe's cluster: no rollout phase on the trainer's.

verl's hybrid engine runs generation (vLLM or SGLang) and the actor's update on every
GPU in turn, so a GPU must hold the worse of two phases (`distrecipe.engines.verl` has
the sources):

* **rollout**: the engine's fraction of the GPU's total memory (`rl.rollout_memory`,
  vLLM's `gpu_memory_utilization`, 0.5 by default), plus what the actor keeps resident
  beside it: the engine view's state at rest (fp32 parameter shards and optimizer state;
  gradients are freed), less what verl's between-phase offloads (`param_offload`,
  `optimizer_offload` in `native.verl`) move to CPU, plus the trainer's own CUDA context.
  The allocator's cache is emptied before the KV cache is woken, so no fragmentation
  share is added. This is also vLLM's start-up check: free memory ≥ fraction × total.
* **the fraction's floor**: inside its fraction vLLM first holds its weights (the whole
  model at `rollout.dtype`, 16-bit by default, over the rollout's own tensor parallelism
  `rollout.tensor_model_parallel_size`, 2 by default; the recipe has no key for either,
  so they are read from `native.verl` or taken as verl's defaults, and `plan` says which)
  and its start-up profile (`engines.verl.ROLLOUT_PROFILE`), and, where `native.verl`
  states `rollout.max_model_len` and the recipe the model's shape, the KV cache of one
  sequence that long (vLLM's second start-up check); the KV cache gets the rest, and with
  none left (or less than that sequence) vLLM refuses to start. A fraction below the floor
  does not fit whatever the GPU's size.
* **the layout**: verl's workers refuse a world that is not a multiple of the rollout's
  tensor × data × pipeline parallelism (`engines.verl_rollout.rollout_layout`); `refused`
  says why, and `plan` shows it.
* **training**: today's estimate, plus the whole fraction when the engine is not freed
  (`rl.free_rollout_memory: false`, or `rollout.enable_sleep_mode=false` in `native.verl`);
  freed (verl's default), none of it is counted.

Not modelled: the rollout engine's own CUDA context and captured CUDA graphs, which stay
through training even when freed; the profile's dependence on the model's shape and
`max_num_batched_tokens`; and the one-sequence KV cache when `rollout.max_model_len` is
not stated (verl then takes the checkpoint's `max_position_embeddings`, which a recipe
does not state).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from distrecipe.engines.openrlhf import VLLM_WIDTH, colocated
from distrecipe.engines.trl import runs_trl, vllm_defaults
from distrecipe.engines.verl import (
    FREE_CACHE_DEFAULT,
    PHASE_OFFLOAD,
    ROLLOUT_DTYPE,
    ROLLOUT_DTYPE_BYTES,
    ROLLOUT_MAX_LEN,
    ROLLOUT_MEMORY_DEFAULT,
    ROLLOUT_PROFILE,
    ROLLOUT_TP,
    ROLLOUT_TP_DEFAULT,
    SLEEP_MODE,
    one_sequence_kv,
)
from distrecipe.engines.verl_rollout import native_stated, rollout_layout, stated_degree
from distrecipe.job import Plan
from distrecipe.keys import joined
from distrecipe.plan.allocator import CONTEXT
from distrecipe.plan.engine import EngineView
from distrecipe.plan.units import gb
from distrecipe.source import KeyPath
from distrecipe.translator.openrlhf import arguments as openrlhf_arguments
from distrecipe.translator.trl import vllm_mode

PARAM_OFFLOAD, OPTIMIZER_OFFLOAD = (joined(path) for path in PHASE_OFFLOAD)


@dataclass(frozen=True, slots=True)
class Rollout:
    """Per-GPU bytes of verl's rollout phase, and what it leaves in the training phase."""

    fraction: float
    """`rl.rollout_memory` (verl's `gpu_memory_utilization`)."""
    stated: bool
    """Whether the recipe states the fraction (else it is verl's default)."""
    freed: bool
    """Whether the rollout engine frees its memory while the actor trains."""
    engine: float | None
    """fraction × `cluster.gpu_memory`; None when the GPU's size is unknown."""
    actor: dict[str, float]
    """The actor's state resident beside the rollout engine, by part."""
    weights: float
    """The rollout engine's weights per GPU: Ψ × `width` / `tensor`."""
    width: int
    """Bytes per weight of the rollout's copy (`rollout.dtype`, from `native.verl` or verl's default)."""
    tensor: int
    """The rollout's tensor parallelism (`rollout.tensor_model_parallel_size`)."""
    tensor_stated: bool
    """Whether `native.verl` states it (else verl's default)."""
    max_len: int | None = None
    """`rollout.max_model_len` as `native.verl` states it; None when it does not."""
    sequence_kv: float = 0.0
    """KV cache bytes per GPU for one sequence of `max_len` tokens (0 when either is unknown)."""
    refused: str | None = None
    """Why verl's workers refuse the rollout's layout on these GPUs, or None."""
    trainer: str = "verl"
    """Whose rollout engine: verl's hybrid engine, TRL's colocated vLLM (`TRL`), or
    OpenRLHF's (`OpenRLHF`)."""
    beside: dict[str, float] = field(default_factory=dict)
    """Other models on the same GPU through both phases, by name (OpenRLHF's reference model)."""
    unpriced: tuple[str, ...] = ()
    """Models the job holds on these GPUs that `plan` cannot price, each with why: the
    verdict is then a lower bound."""
    said: dict[str, str] = field(default_factory=dict)
    """Where a value not from the recipe comes from, by what it sets (`tensor`, `max_len`: a
    template for the length, `freed`), where verl's wording does not fit: `plan` prints it."""

    @property
    def floor(self) -> float:
        """The least share vLLM starts with: its weights, its start-up profile, and room for
        one sequence of `max_model_len` where known; the KV cache gets what the fraction
        holds beyond weights and profile."""
        return self.weights + ROLLOUT_PROFILE + self.sequence_kv

    def floor_text(self, how: str = "") -> str:
        """The floor's terms, as `plan` and its advice print them; `how` follows the weights."""
        text = f"weights {gb(self.weights)}{how} + start-up profile {gb(ROLLOUT_PROFILE)}"
        if self.sequence_kv:
            text += (f" + one sequence's KV cache {gb(self.sequence_kv)} "
                     f"({self.said.get('max_len', 'rollout.max_model_len {}').format(self.max_len)})")
        return text

    @property
    def kv_cache(self) -> float | None:
        """What the fraction leaves vLLM's KV cache beyond the floor (negative: vLLM refuses
        to start)."""
        return None if self.engine is None else self.engine - self.floor

    @property
    def starved(self) -> bool:
        """vLLM refuses to start: nothing is left for the KV cache ("No available memory for
        the cache blocks"), or less than one sequence of `max_model_len` ("To serve at least
        one request with the models's max seq len")."""
        if self.kv_cache is None:
            return False
        return self.kv_cache < 0 or self.kv_cache + self.sequence_kv <= 0

    @property
    def need(self) -> float | None:
        """The rollout phase's bytes: the engine's share, the actor's state, the other models
        beside them, the context."""
        if self.engine is None:
            return None
        return self.engine + sum(self.actor.values()) + sum(self.beside.values()) + CONTEXT

    @property
    def kept(self) -> float:
        """What the rollout engine still holds during the actor's update."""
        return 0.0 if self.freed or self.engine is None else self.engine

    @property
    def in_training(self) -> float:
        """What the training phase holds beyond the actor's own estimate: the rollout engine
        where it is kept, and the other models (`beside`)."""
        return self.kept + sum(self.beside.values())


def rollout(plan: Plan, engine: EngineView) -> Rollout | None:
    """The rollout phase of a verl plan (`rl` set), or of TRL's colocated vLLM (`rl` under
    `accelerate launch`, `_trl`); None for any other recipe."""
    if plan.recipe.rl is None or plan.recipe.rl.rollout_mode == "server":
        return None  # a vLLM server's GPUs are not the trainer's
    if runs_trl(plan.backend, plan.recipe.rl):
        return _trl(plan, engine)
    if plan.backend == "openrlhf":
        return _openrlhf(plan, engine)
    stated = plan.recipe.rl.rollout_memory is not None
    rl = plan.recipe.rl
    fraction = float(rl.rollout_memory) if rl.rollout_memory is not None else ROLLOUT_MEMORY_DEFAULT
    freed = FREE_CACHE_DEFAULT if rl.free_rollout_memory is None else rl.free_rollout_memory
    native = native_stated(plan)
    if _native(native, SLEEP_MODE) is False:
        freed = False  # vLLM's sleep frees only its sleep-mode pool
    moved = _phase_offloaded(plan)
    actor = {part: size for part, size in engine.points["rest"].items() if size and part not in moved}
    size = None if plan.gpu_memory is None else fraction * plan.gpu_memory
    stated_tp = _native(native, ROLLOUT_TP)
    tensor = stated_degree(native, ROLLOUT_TP, ROLLOUT_TP_DEFAULT)
    dtype = _native(native, ROLLOUT_DTYPE)
    width = ROLLOUT_DTYPE_BYTES.get(str(dtype), ROLLOUT_DTYPE_BYTES["bfloat16"])
    params = plan.recipe.model.params
    assert params is not None, "estimate() refuses a plan without model.params"
    stated_len = _native(native, ROLLOUT_MAX_LEN)
    max_len = stated_len if type(stated_len) is int and stated_len >= 1 else None
    return Rollout(fraction, stated, freed, size, actor, params * width / tensor, width, tensor,
                   tensor == stated_tp, max_len, _sequence_kv(plan, max_len, width, tensor),
                   None if (refused := rollout_layout(plan)) is None else refused[0])


def _trl(plan: Plan, engine: EngineView) -> Rollout | None:
    """TRL's GRPO with vLLM colocated (`rl.rollout_mode: colocate`, or `rl.rollout_memory`
    stated: `--target trl` writes `use_vllm`, `vllm_mode: colocate`; the fraction is
    GRPOConfig's default where the recipe states none): vLLM takes its fraction beside the whole training
    state (TRL moves nothing to CPU for generation), holds the weights at 16 bits over
    `vllm_tensor_parallel_size` (1), and keeps its fraction through training unless its
    sleep mode is on (`rl.free_rollout_memory`; GRPOConfig's default: off). Otherwise TRL
    generates with the trained model itself: no second engine."""
    rl = plan.recipe.rl
    if rl is None or vllm_mode(plan) != "colocate":
        return None
    defaults = vllm_defaults()
    fraction = defaults.memory if rl.rollout_memory is None else float(rl.rollout_memory)
    freed = defaults.sleep if rl.free_rollout_memory is None else rl.free_rollout_memory
    actor = {part: size for part, size in engine.points["rest"].items() if size}
    size = None if plan.gpu_memory is None else fraction * plan.gpu_memory
    width = ROLLOUT_DTYPE_BYTES["bfloat16"]
    params = plan.recipe.model.params
    assert params is not None, "estimate() refuses a plan without model.params"
    weights = params * width / defaults.tensor
    stated = rl.rollout_memory is not None
    return Rollout(fraction, stated, freed, size, actor, weights, width, defaults.tensor, False,
                   trainer="TRL")


def _openrlhf(plan: Plan, engine: EngineView) -> Rollout:
    """OpenRLHF's colocated job as `compile --target openrlhf` and `launch` write its command
    (`translator.openrlhf.arguments`): one vLLM engine per GPU at tensor parallelism 1, its
    fraction and sleep mode as stated or OpenRLHF's defaults (0.95, no sleep), its
    `max_model_len` OpenRLHF's `--data.max_len`. Beside it, through both phases (the command
    never sets `--ds.enable_sleep`): the actor's DeepSpeed state at rest, the reference model
    (the actor's checkpoint, Ψ × the 16-bit width, ÷ the world under ZeRO-3, whole otherwise);
    the critic (OpenRLHF's default estimator `gae` keeps one, from the reward model's
    checkpoint) and the reward model are `$REWARD`'s size, which the recipe does not state:
    named as not priced, never guessed (`engines.openrlhf.Colocated` has the sources)."""
    argv = [word for option, value in openrlhf_arguments(plan)
            for word in (option, *(() if value is None else (value,)))]
    job = colocated(argv)
    params = plan.recipe.model.params
    assert params is not None, "estimate() refuses a plan without model.params"
    actor = {part: size for part, size in engine.points["rest"].items() if size}
    said = {"tensor": "--vllm.tensor_parallel_size, one engine per GPU",
            "max_len": "--data.max_len {}" + ("" if job.max_len_stated else ", OpenRLHF's default")}
    beside: dict[str, float] = {}
    if job.reference:
        shards = plan.dims.world if job.zero_stage == 3 else 1
        beside["reference model"] = params * plan.precision_bytes / shards
        said["reference model"] = (f"the actor's checkpoint, Ψ × {plan.precision_bytes} bytes "
                                   + (f"÷ {shards} under ZeRO-3" if shards > 1 else
                                      "whole: OpenRLHF's inference config below ZeRO-3 is stage 0"))
    unpriced = []
    if job.critic is not None:
        how = "" if job.estimator_stated else ", OpenRLHF's default"
        unpriced.append(f"the critic (a trained DeepSpeed engine from {job.critic}: "
                        f"--algo.advantage.estimator {job.estimator}{how})")
    if job.reward is not None:
        unpriced.append(f"the reward model ({job.reward})")
    size = None if plan.gpu_memory is None else job.memory * plan.gpu_memory
    if plan.recipe.rl is not None and plan.recipe.rl.free_rollout_memory is None:
        said["freed"] = "kept while the actor trains (--vllm.enable_sleep off: OpenRLHF's default)"
    return Rollout(job.memory, job.memory_stated, job.sleep, size, actor, params * VLLM_WIDTH / job.tensor,
                   VLLM_WIDTH, job.tensor, True, job.max_len,
                   _sequence_kv(plan, job.max_len, VLLM_WIDTH, job.tensor), trainer="OpenRLHF",
                   beside=beside, unpriced=tuple(unpriced), said=said)


def _sequence_kv(plan: Plan, length: int | None, width: int, tensor: int) -> float:
    """One sequence's KV cache per rollout GPU; 0 when the length or the model's shape is unknown."""
    m = plan.recipe.model
    if length is None or m.layers is None or m.heads is None or m.hidden_size is None:
        return 0.0
    return float(one_sequence_kv(length, m.layers, m.kv_heads or m.heads, m.hidden_size // m.heads,
                                 width, tensor))


def _native(native: Mapping[str, tuple[int, object]], path: KeyPath) -> object:
    """The value `native.verl` gives `path` (`engines.verl_rollout.native_stated`), or None."""
    return native.get(joined(path), (0, None))[1]


def _phase_offloaded(plan: Plan) -> set[str]:
    """Engine-view parts verl moves to CPU for the rollout phase, by the native overrides."""
    on = {key for key, (_, value) in native_stated(plan).items() if value is True}
    moved: set[str] = set()
    if PARAM_OFFLOAD in on:
        moved |= {"parameters", "buffers"}
    if OPTIMIZER_OFFLOAD in on:
        moved.add("optimizer")
    return moved


def fractions(plan: Plan, phase: Rollout) -> tuple[float, float] | None:
    """The least and the largest fraction, in hundredths, that the rollout phase can take:
    above the floor (vLLM starts) and within `cluster.gpu_memory` beside the actor as
    resident as it is; None when no fraction is both."""
    if plan.gpu_memory is None:
        return None
    room = plan.gpu_memory - sum(phase.actor.values()) - sum(phase.beside.values()) - CONTEXT
    largest = int(room * 100 // plan.gpu_memory)
    least = int(phase.floor * 100 // plan.gpu_memory) + 1  # strictly above: some KV cache
    return (least / 100, min(largest, 100) / 100) if least <= min(largest, 100) else None
