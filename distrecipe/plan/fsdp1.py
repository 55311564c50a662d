"""torch FSDP1 (`FullyShardedDataParallel`) where a recipe says so, and what it holds
beyond FSDP2.

Every target distrecipe writes runs FSDP2 unless the recipe's `fsdp_version` says 1, and
`plan` models FSDP2 by default. The field is the one place: resolve fills it from the
engines' own keys where the recipe leaves it unset (Accelerate's
`fsdp_config.fsdp_version`, the HF Trainer's `fsdp_config.version`, verl's actor
`strategy`; `translator.native.FSDP_VERSION_KEYS`), and refuses a native key that
contradicts it. A script of the user's own that builds the FSDP1 wrapper says so with
`fsdp_version: 1`. FSDP1's model state at the peak is FSDP2's (measured on CPU ranks:
docs/plan.md, "Measured against real engines"). What differs:

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
    """The key that said FSDP1 (the field, or the native key it was read from), for the
    engine view's name."""


def _section(native: dict[str, Any]) -> dict[str, Any]:
    value = native.get("fsdp_config")
    return value if isinstance(value, dict) else {}


def fsdp1(plan: Plan) -> Fsdp1 | None:
    """FSDP1's settings when the plan's `fsdp_version` is 1, else None (FSDP2). verl's FSDP1
    actor is planned as its FSDP2 one: its workers' own model is not this one."""
    if plan.fsdp_version != 1 or not runs_fsdp2(plan) or plan.backend == "verl":
        return None
    read = plan.provenance.get("fsdp_version", "")  # the native key resolve read it from, if any
    source = read if read.startswith("native.") else "fsdp_version: 1"
    hf = _section(plan.recipe.native.hf)
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
