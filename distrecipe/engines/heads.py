"""What each engine requires of the model's heads and the sequence to split them.

Tensor and sequence parallelism cut attention by heads or the sequence by positions;
an engine refuses, when the model is built or the first batch arrives, a degree that
does not divide what it cuts. Read from the installed sources (DeepSpeed 0.19.8,
torch 2.13, verl 0.9.1, Accelerate 1.15 with transformers) and, for the two not
installed, torchtitan's and Megatron-LM's:

* DeepSpeed Ulysses (`sequence_parallel_size`): `UlyssesSPAttentionHF.__init__`
  (`deepspeed/runtime/sequence_parallel/ulysses_sp.py:147-152`) raises unless heads %
  sp == 0 and (kv heads % sp == 0 or sp % kv heads == 0, kv heads then replicated);
  `UlyssesSPDataLoaderAdapter` (l.706) raises unless the batch's sequence length % sp == 0.
* verl's Ulysses (FSDP engine): the same two head rules as asserts
  (`verl/models/transformers/monkey_patch.py:343-349`); it pads the sequence to a
  multiple of sp (`verl/utils/ulysses.py:291`), so no sequence rule.
* DeepSpeed AutoTP (`tensor_parallel.autotp_size`): `get_shard_size`
  (`deepspeed/module_inject/tp_shard.py:120-123`) splits q, k, v, o by kv-head groups and
  allows an uneven split (rank r takes kv // tp heads, one more when r < kv % tp), so kv
  heads ≥ tp is what it needs: below that a rank gets no head and empty projections,
  and the model's `view(..., -1, head_dim)` of an empty tensor fails in the first forward.
* Column-wise tensor parallelism on torch tensors (torchtitan's `parallelize_module`
  `ColwiseParallel` on wq, wk, wv; Accelerate's `parallelism_config` tp through
  transformers' `tp_plan` `colwise` on q/k/v_proj; Megatron's `divide(num_query_groups,
  tp)` assert in `megatron/core/transformer/attention.py`): an even split of the rows, so
  heads % tp == 0 and kv heads % tp == 0; otherwise a rank's rows are not whole heads
  and the attention's reshape to `head_dim` fails (kv heads < tp included: a rank would
  hold a fraction of one kv head).
* torch's ring attention (torchtitan's and Accelerate's context parallelism):
  `_create_default_load_balancer`
  (`torch/distributed/tensor/experimental/_context_parallel/_load_balancer.py:475`) uses
  the head-tail sharder only when sequence % (2·cp) == 0, and `_HeadTailLoadBalancer`
  (l.148) asserts it. torchtitan asks for that sharder by default
  (`ParallelismConfig.context_parallel_load_balancer = "headtail"`), so it needs
  sequence % (2·cp) == 0; Accelerate calls torch's `context_parallel`
  (`accelerate/accelerator.py:1660`), which falls back to no balancing
  (`_attention.py:1580-1582`) and an even `Shard` of the sequence: sequence % cp == 0.
* Megatron-LM's context parallelism cuts the sequence into 2·cp chunks
  (`get_batch_on_this_cp_rank` in `megatron/training/utils.py`): sequence % (2·cp) == 0;
  verl's Megatron engine pads to it (`preprocess_packed_seqs`), so no sequence rule there.

When the recipe does not state the heads (or the sequence length), nothing is said:
no rule is checked on a guess.
"""

from __future__ import annotations

import math

from distrecipe.engines.runner import uses_deepspeed
from distrecipe.engines.verl import actor_engine
from distrecipe.errors import Refusal
from distrecipe.job import Plan


def _refusal(key: str, message: str) -> Refusal:
    """Why the engine running a plan refuses its split, about the recipe key to change
    (`parallel.tensor`, `parallel.sequence` or `batch.seq_len`); the caller places it."""
    return Refusal(message, keys=(key,))


def refusal(plan: Plan) -> Refusal | None:
    """The first head or sequence rule `plan`'s layout breaks in its engine, or None."""
    engine = _engine(plan)
    heads = plan.recipe.model.heads
    kv = plan.recipe.model.kv_heads or heads
    tp, sp, seq = plan.dims.tensor, plan.dims.sequence, plan.recipe.batch.seq_len
    if tp > 1 and heads is not None and kv is not None:
        if engine == "deepspeed":
            if kv < tp:
                return _refusal("parallel.tensor", (
                    f"DeepSpeed AutoTP splits attention by kv heads: {kv} kv heads leave "
                    f"{tp - kv} of the tensor {tp} ranks without a head; tensor ≤ {kv}"))
        elif engine != "verl" and (heads % tp or kv % tp):
            return _refusal("parallel.tensor", (
                f"{_NAMES[engine]}'s tensor parallelism splits the attention heads evenly: "
                f"{heads} heads and {kv} kv heads do not both divide by tensor {tp}; "
                f"tensor ∈ {_divisors(math.gcd(heads, kv))}"))
    if sp > 1 and heads is not None and kv is not None and engine in ("deepspeed", "verl"):
        if heads % sp:
            return _refusal("parallel.sequence", (
                f"{_NAMES[engine]} Ulysses splits attention heads over the sequence group: "
                f"{heads} heads do not divide by sequence {sp}; sequence ∈ {_ulysses(heads, kv)}"))
        if kv % sp and sp % kv:
            return _refusal("parallel.sequence", (
                f"{_NAMES[engine]} Ulysses needs kv heads % sequence == 0 or sequence % kv heads "
                f"== 0: {kv} kv heads and sequence {sp} are neither; sequence ∈ {_ulysses(heads, kv)}"))
    if sp > 1 and seq is not None:
        chunks = sp * _chunks_per_rank(engine)
        if chunks and seq % chunks:
            how = f"2 × sequence = {chunks}" if chunks != sp else f"sequence {sp}"
            return _refusal("batch.seq_len", (
                f"{_NAMES[engine]} splits each sequence into {how} equal parts: batch.seq_len "
                f"{seq} does not divide by {chunks}"))
    return None


_NAMES = {"deepspeed": "DeepSpeed", "verl": "verl", "torchtitan": "torchtitan",
          "accelerate": "Accelerate", "megatron": "Megatron", "verl-megatron": "verl's Megatron"}


def _engine(plan: Plan) -> str:
    """Which engine splits the model: under verl the actor engine verl builds
    (`engines.verl.actor_engine`: FSDP2 for `zero` and `ddp` too, so verl's Ulysses
    rules, not DeepSpeed's), otherwise DeepSpeed where `engines.runner.uses_deepspeed` says."""
    backend = plan.backend
    if backend == "verl":
        return "verl-megatron" if actor_engine(plan) == "megatron" else "verl"
    if plan.recipe.strategy == "megatron":
        return "megatron"
    if uses_deepspeed(plan):
        return "deepspeed"
    return "torchtitan" if backend == "torchrun" else "accelerate"


def _chunks_per_rank(engine: str) -> int:
    """Equal sequence parts per rank of the sequence group; 0 when the engine pads."""
    return {"deepspeed": 1, "accelerate": 1, "torchtitan": 2, "megatron": 2}.get(engine, 0)


def _divisors(n: int) -> str:
    return "{" + ", ".join(str(d) for d in range(1, n + 1) if n % d == 0) + "}"


def _ulysses(heads: int, kv: int) -> str:
    """The sequence degrees both Ulysses head rules allow."""
    return "{" + ", ".join(str(d) for d in range(1, heads + 1)
                           if heads % d == 0 and (kv % d == 0 or d % kv == 0)) + "}"
