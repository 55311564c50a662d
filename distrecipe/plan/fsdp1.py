"""torch FSDP1 (`FullyShardedDataParallel`) where a recipe asks for it, and what it holds
beyond FSDP2.

Every target distrecipe writes runs FSDP2, and `plan` models FSDP2. A recipe gets FSDP1
only through the engines' own keys, carried verbatim by `native`: Accelerate's
`fsdp_config.fsdp_version: 1` (`native.accelerate`, read when Accelerate launches) or the
HF Trainer's `fsdp_config.version: 1` (`native.hf`, whichever launcher starts it). A
script of the user's own that builds FSDP1 states it nowhere, and is planned as FSDP2. The
plan reads those keys as the engines do, so what it prices is what will run. FSDP1's model
state at the peak is FSDP2's (measured on CPU ranks: docs/plan.md, "Measured against real
engines"). What differs:

* **One rank** (`shard_ranks` 1): torch clamps every sharding strategy to `NO_SHARD`
  (`_init_utils._init_process_group_state`, "FSDP is switching to use `NO_SHARD`"). A
  unit's flat parameter is then the parameter itself: without parameter mixed precision
  (a model cast to bf16, `optimizer.master_weights: bf16`) nothing is gathered, no 16-bit
  copy is made and the gradient is reduced in place (`_reduce_grad_no_shard`), so the
  gathered blocks, head and reduce-scatter buffers of FSDP2 are not held.
* **All-gathers without the rate limiter** (the Trainer's `fsdp_config.limit_all_gathers:
  false`; torch's default before 2.1, pytorch#104900; Accelerate's plugin's before
  December 2023, accelerate#2288): no bytes. `_unshard` then never waits on the
  free-event queue, so the CPU thread may issue all-gathers far ahead of the compute
  stream, each gathered parameter freed with
  `_no_dispatch_record_stream` once the CPU is past its unit. But a cudaMalloc that fails
  makes the caching allocator wait for those streams and return the blocks
  (`release_cached_blocks` → `synchronize_and_free_events`) before it retries: the lead
  costs malloc retries (time; pytorch#104509), never an out-of-memory the limited run
  would not hit. It is shown in the plan's label, not priced.

The rows this moves, and why, are in docs/plan.md ("Held-out round 2026-12: FSDP1, ...").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from distrecipe.engines.runner import runs_fsdp2
from distrecipe.job import Plan
from distrecipe.plan.memory import pure_bf16, shard_ranks


@dataclass(frozen=True, slots=True)
class Fsdp1:
    """FSDP1's settings that change memory, as the engines read them from `native`."""

    limit_all_gathers: bool
    """torch's rate limiter (True since torch 2.1 and in Accelerate's plugin): without it the
    CPU runs ahead, which costs malloc retries, not bytes (the module's docstring)."""
    no_shard: bool
    """One rank: torch runs `NO_SHARD` whatever strategy was asked."""
    mixed_precision: bool
    """Parameters in fp32 computed in 16-bit (a 16-bit copy per unit); False for a model
    cast to bf16, whose flat parameters are already the compute dtype."""
    source: str
    """The key that asked for FSDP1, for the engine view's name."""


def _section(native: dict[str, Any]) -> dict[str, Any]:
    value = native.get("fsdp_config")
    return value if isinstance(value, dict) else {}


def _is_one(value: Any) -> bool:
    return not isinstance(value, bool) and str(value).strip() == "1"


def fsdp1(plan: Plan) -> Fsdp1 | None:
    """FSDP1's settings when the recipe's `native` keys make the engine run FSDP1, else None
    (FSDP2: the plan's default). Only `strategy: fsdp` outside verl runs either."""
    if plan.recipe.strategy != "fsdp" or not runs_fsdp2(plan) or plan.backend == "verl":
        return None
    hf = _section(plan.recipe.native.hf)
    if _is_one(hf.get("version")):
        source = "native.hf.fsdp_config.version: 1"
    elif plan.backend == "accelerate" and _is_one(
            _section(plan.recipe.native.accelerate).get("fsdp_version")):
        source = "native.accelerate.fsdp_config.fsdp_version: 1"
    else:
        return None
    # The Trainer hands `limit_all_gathers` to torch (training_args.py); Accelerate's config
    # file has no key for it, and its plugin's default is torch's today (True).
    limit = hf.get("limit_all_gathers", True)
    return Fsdp1(limit_all_gathers=str(limit).lower() != "false", no_shard=shard_ranks(plan) == 1,
                 mixed_precision=not pure_bf16(plan) and plan.precision_bytes < 4, source=source)


def holds_no_buffers(plan: Plan) -> bool:
    """FSDP1 on one rank without parameter mixed precision: nothing gathered, no 16-bit
    copy, the gradient reduced in place (see the module's docstring)."""
    settings = fsdp1(plan)
    return settings is not None and settings.no_shard and not settings.mixed_precision
