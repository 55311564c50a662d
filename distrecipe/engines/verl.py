"""verl (0.9.1) as facts: its override keys, names, and the batch rules it enforces.

verl counts `data.train_batch_size` in prompts; each is rolled out `rollout.n` times,
and one optimizer step consumes `ppo_mini_batch_size × n` sequences. `validate_config`
checks some divisibility before any GPU is used; the rest are asserted inside the
workers, after Ray, the rollout engine and the model have started on the cluster.
`batch_violations` is the one statement of those rules: `compile --target verl` and
lint's DR220 both call it and word what it returns in their own vocabulary.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from distrecipe.engines import TORCH_OPTIMIZERS, data_parallel
from distrecipe.engines.tables import VerlConfig
from distrecipe.keys import get
from distrecipe.source import KeyPath

OVERRIDES_FILE = "verl_overrides.txt"
ACTOR_FILE = "verl_actor.yaml"
"""The file names `compile` writes the overrides under, as Hydra lines and as YAML."""

ENTRY = "verl.trainer.main_ppo"
"""verl's trainer module: a script that runs it (`python3 -m verl.trainer.main_ppo ...`)
passes verl overrides, whichever groups they set."""

VERL_ROOTS = ("actor_rollout_ref", "data", "trainer", "algorithm", "critic", "reward_model", "model_engine")
"""verl's top-level config groups: only overrides under them are read from a script."""

ACTOR: KeyPath = ("actor_rollout_ref", "actor")
MINI: KeyPath = (*ACTOR, "ppo_mini_batch_size")
MICRO: KeyPath = (*ACTOR, "ppo_micro_batch_size_per_gpu")
PROMPTS: KeyPath = ("data", "train_batch_size")
ROLLOUT_N: KeyPath = ("actor_rollout_ref", "rollout", "n")
DYNAMIC: KeyPath = (*ACTOR, "use_dynamic_bsz")
MAX_TOKENS: KeyPath = (*ACTOR, "ppo_max_token_len_per_gpu")
MAX_TOKENS_DEFAULT = 16384
"""`ppo_max_token_len_per_gpu` when a config turns `use_dynamic_bsz` on without it (verl's actor.yaml)."""
ULYSSES: KeyPath = (*ACTOR, "ulysses_sequence_parallel_size")
FSDP_SIZE: KeyPath = (*ACTOR, "fsdp_config", "fsdp_size")
LEGACY_MICRO: KeyPath = (*ACTOR, "ppo_micro_batch_size")
"""verl's deprecated micro-batch over all data-parallel ranks: 0.9's workers never read it."""
DEPRECATED: tuple[tuple[KeyPath, str], ...] = (
    (LEGACY_MICRO, "ppo_micro_batch_size_per_gpu"),
    (("critic", "ppo_micro_batch_size"), "ppo_micro_batch_size_per_gpu"),
    (("actor_rollout_ref", "rollout", "log_prob_micro_batch_size"), "log_prob_micro_batch_size_per_gpu"),
    (("actor_rollout_ref", "ref", "log_prob_micro_batch_size"), "log_prob_micro_batch_size_per_gpu"),
)

ACTOR_STRATEGIES = ("fsdp", "fsdp2", "fsdp_turbo", "megatron", "veomni", "torchtitan")
"""`actor.strategy` values verl has an engine for."""

FSDP_DTYPE = {"bf16": "bf16", "fp16": "fp16", "fp32": "fp32"}
MEGATRON_DTYPE = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}
FSDP_OPTIMIZER = TORCH_OPTIMIZERS
"""The FSDP engine's `optim.optimizer` names: torch's class names."""
MEGATRON_OPTIMIZER = {"adamw": "adam", "adam": "adam", "sgd": "sgd"}
"""Megatron's `adam` is decoupled (AdamW) weight decay, so adamw and adam share it."""


def uses_megatron(data: dict[str, Any], lines: Sequence[str]) -> bool:
    """verl trains the actor with Megatron: `model_engine=megatron`, the actor's strategy,
    or a script that starts from `ppo_megatron_trainer` (whose actor strategy is megatron)."""
    return get(data, *ACTOR, "strategy") == "megatron" or verl_config(data, lines) == "ppo_megatron_trainer"


def verl_config(data: dict[str, Any], lines: Sequence[str]) -> VerlConfig:
    """The composed config verl starts from: `ppo_megatron_trainer` when the script names
    it (`--config-name`) or sets `model_engine=megatron`, else `ppo_trainer`."""
    megatron = data.get("model_engine") == "megatron" or any("ppo_megatron_trainer" in line for line in lines)
    return "ppo_megatron_trainer" if megatron else "ppo_trainer"


Rule = Literal["below-one", "model-parallel", "rollout-split", "whole-mini-batches",
               "mini-exceeds-prompts", "mini-split", "micro-split", "fsdp-size"]


@dataclass(frozen=True, slots=True)
class VerlBatch:
    """The numbers verl's batch rules read; None where the config does not write one."""

    world: int
    model_parallel: int
    """Ulysses size (FSDP) or tensor × pipeline × context (Megatron)."""
    megatron: bool
    prompts: int | None
    n: int
    mini: int | None
    micro: int | None
    fsdp_size: int | None = None

    @property
    def dp(self) -> int | None:
        return data_parallel(self.world, self.model_parallel)


@dataclass(frozen=True, slots=True)
class Violation:
    """One broken rule: which, the key it is about, and where verl finds it."""

    rule: Rule
    path: KeyPath
    worker_side: bool
    """True when only the GPU workers check it (after a cluster start-up)."""
    divisor: int = 0
    """The number that does not divide (rollout-split: the GPUs or DP × micro)."""


def batch_violations(b: VerlBatch) -> list[Violation]:
    """Every batch rule `b` breaks, in the order verl checks them.

    With P prompts, n rollouts, M = ppo_mini_batch_size prompts, m = micro per GPU,
    N GPUs and DP = N / model parallel: `validate_config` wants P × n divisible by N
    (Megatron: by DP × m) and P ≥ M; the workers want P a multiple of M, M × n
    divisible by DP, M × n / DP divisible by m, and N divisible by `fsdp_size`.
    """
    for path, size in ((PROMPTS, b.prompts), (MINI, b.mini), (MICRO, b.micro)):
        if size is not None and size < 1:  # every rule below divides by it
            return [Violation("below-one", path, worker_side=True)]
    dp = b.dp
    if dp is None:
        return [Violation("model-parallel", ULYSSES, worker_side=True)]
    out: list[Violation] = []
    if b.prompts is not None:
        minimal = dp * b.micro if b.megatron and b.micro else b.world
        if b.prompts * b.n % minimal:
            out.append(Violation("rollout-split", PROMPTS, worker_side=False, divisor=minimal))
        elif b.mini and b.prompts % b.mini and b.prompts > b.mini:
            out.append(Violation("whole-mini-batches", PROMPTS, worker_side=True))
        if b.mini is not None and b.prompts < b.mini:
            out.append(Violation("mini-exceeds-prompts", MINI, worker_side=False))
    if b.mini is not None:
        sequences = b.mini * b.n
        if sequences % dp:
            out.append(Violation("mini-split", MINI, worker_side=True))
        elif b.micro is not None and sequences // dp % b.micro:
            out.append(Violation("micro-split", MICRO, worker_side=True))
    size = b.fsdp_size
    if not b.megatron and size and 0 < size < b.world and b.world % size:
        out.append(Violation("fsdp-size", FSDP_SIZE, worker_side=True))
    return out
