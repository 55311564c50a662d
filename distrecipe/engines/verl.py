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

from distrecipe.engines import TORCH_OPTIMIZERS
from distrecipe.engines.tables import VerlConfig, trainer_modules
from distrecipe.job import Plan, data_parallel
from distrecipe.keys import get
from distrecipe.source import KeyPath

OVERRIDES_FILE = "verl_overrides.txt"
ACTOR_FILE = "verl_actor.yaml"
"""The file names `compile` writes the overrides under, as Hydra lines and as YAML."""

ENTRY = "verl.trainer.main_ppo"
"""verl's trainer module: a script that runs it (`python3 -m verl.trainer.main_ppo ...`)
passes verl overrides, whichever groups they set."""

REMOVED_ENTRIES = {"verl.trainer.fsdp_sft_trainer": "verl.trainer.sft_trainer"}
"""Trainer modules older verl releases had → what replaced each (verl ≤ 0.5 ran SFT from
`fsdp_sft_trainer`); named only while the installed verl lacks the module."""

VERL_CONFIG_NAMES = ("ppo_trainer", "ppo_megatron_trainer")
"""The configs verl's PPO entry composes (`--config-name`)."""

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

MICRO_BATCH_UNSET: tuple[tuple[KeyPath, str, str], ...] = (
    (ACTOR, "ppo_micro_batch_size",
     "[actor] Please set at least one of 'actor.ppo_micro_batch_size' or "
     "'actor.ppo_micro_batch_size_per_gpu' if use_dynamic_bsz is not enabled."),
    (("actor_rollout_ref", "ref"), "log_prob_micro_batch_size",
     "[actor_rollout_ref.ref] Please set at least one of "
     "'actor_rollout_ref.ref.log_prob_micro_batch_size' or "
     "'actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu'."),
    (("actor_rollout_ref", "rollout"), "log_prob_micro_batch_size",
     "[actor_rollout_ref.rollout] Please set at least one of "
     "'actor_rollout_ref.rollout.log_prob_micro_batch_size' or "
     "'actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu'."),
)
"""The micro-batches verl wants sized, in the order `validate_config` asks (verl 0.9.1,
`utils/config.py:90-220`), each as (its section, the deprecated global key, verl's own
refusal): with `actor.use_dynamic_bsz` off, the actor's update (`ActorConfig.__post_init__`,
`workers/config/actor.py:205`), the reference policy's log-prob pass when there is one
(`algorithm.use_kl_in_reward` or `actor.use_kl_loss`: `need_reference_policy`) and the
rollout's log-prob pass (`check_mutually_exclusive`) each need `KEY_per_gpu` or the
deprecated `KEY`; every default is null. Setting both is DR350's."""
REFERENCE_POLICY: tuple[KeyPath, ...] = (("algorithm", "use_kl_in_reward"), (*ACTOR, "use_kl_loss"))
"""What makes verl run a reference policy (`trainer/ppo/utils.py: need_reference_policy`)."""

ACTOR_STRATEGIES = ("fsdp", "fsdp2", "fsdp_turbo", "megatron", "veomni", "torchtitan")
"""`actor.strategy` values verl has an engine for."""
VERL_FSDP_VERSION = {"fsdp": 1, "fsdp2": 2}
"""verl's `actor_rollout_ref.actor.strategy` → the FSDP version its dp actor builds."""

FSDP_DTYPE = {"bf16": "bf16", "fp16": "fp16", "fp32": "fp32"}
MEGATRON_DTYPE = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}
FSDP_OPTIMIZER = TORCH_OPTIMIZERS
"""The FSDP engine's `optim.optimizer` names: torch's class names."""
MEGATRON_OPTIMIZER = {"adamw": "adam", "adam": "adam", "sgd": "sgd"}
"""Megatron's `adam` is decoupled (AdamW) weight decay, so adamw and adam share it."""


def removed_entry(module: str) -> str | None:
    """What replaced the verl trainer module `module`, when the installed verl lacks it
    and an older one had it (`REMOVED_ENTRIES`); None otherwise."""
    if module in REMOVED_ENTRIES and module not in trainer_modules():
        return REMOVED_ENTRIES[module]
    return None


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


# The rollout engine beside the actor (verl's hybrid engine), as verl 0.9.1 runs it.
# Paths are under site-packages/verl unless they name vllm.
ROLLOUT: KeyPath = ("actor_rollout_ref", "rollout")
ROLLOUT_MEMORY: KeyPath = (*ROLLOUT, "gpu_memory_utilization")
ROLLOUT_MEMORY_DEFAULT = 0.5
"""`rollout.gpu_memory_utilization` when a config does not set it (trainer/config/rollout/
rollout.yaml:46, workers/config/rollout.py:185). verl hands it on unchanged: to vLLM as
`gpu_memory_utilization` (workers/rollout/vllm_rollout/vllm_async_server.py:340), to SGLang
as `mem_fraction_static` (sglang_rollout/async_sglang_server.py:317). For vLLM it is the
fraction of the GPU's *total* memory its instance may take, weights, activations, CUDA
graphs and KV cache together (vllm/config/cache.py: `Field(gt=0, le=1)`, so a value
outside (0, 1] is refused when the server starts), and vLLM's worker refuses to start
when the free memory is below that fraction of the total (vllm/v1/worker/gpu_worker.py,
`init_device`: "Free memory on device ... is less than desired GPU memory utilization").
Neither `validate_config` (utils/config.py:88) nor `RolloutConfig.__post_init__`
(workers/config/rollout.py:278) checks it: only the started server does, after Ray."""
ROLLOUT_MEMORY_RANGE = (0.0, 1.0)
"""vLLM's bounds on the fraction: above the first, at most the second."""
FREE_CACHE: KeyPath = (*ROLLOUT, "free_cache_engine")
FREE_CACHE_DEFAULT = True
"""`rollout.free_cache_engine` (rollout.yaml:61, workers/config/rollout.py:190). When true the
trainer puts the rollout replicas to sleep right after generation (trainer/ppo/ray_trainer.py:
1513-1514, `sleep_replicas`); in the hybrid engine vLLM then sleeps at level 2 (level 1 under
LoRA adapters, MTP or NPU: vllm_async_server.py:853-860, 1289-1317), which frees both its
weights and its KV cache from the GPU. When false, `sleep` returns at once
(vllm_async_server.py:854): the whole fraction stays reserved through the actor's update."""
SLEEP_MODE: KeyPath = (*ROLLOUT, "enable_sleep_mode")
"""`rollout.enable_sleep_mode`, default true (workers/config/rollout.py:268). vLLM's sleep frees
only what it allocated in its `CuMemAllocator` pool, which it uses only in sleep mode
(vllm/v1/worker/gpu_worker.py, `_maybe_get_memory_pool_context`); with it off verl turns on
expandable segments instead (vllm_async_server.py:300-303) and a sleep frees nothing."""
ROLLOUT_TP: KeyPath = (*ROLLOUT, "tensor_model_parallel_size")
ROLLOUT_TP_DEFAULT = 2
"""The rollout engine's tensor parallelism (rollout.yaml:64): its weights per GPU are its
16-bit copy (`rollout.dtype: bfloat16`, rollout.yaml:43) divided by this, inside the fraction."""
ROLLOUT_DTYPE: KeyPath = (*ROLLOUT, "dtype")
ROLLOUT_DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "half": 2, "auto": 2, "float32": 4, "float": 4}
"""Bytes per weight of the rollout engine's copy by `rollout.dtype` (default `bfloat16`,
rollout.yaml:43), which verl hands to vLLM as `dtype` (vllm_async_server.py:326). vLLM's `auto`
takes the checkpoint's dtype, 16-bit for the models verl trains."""
ROLLOUT_PROFILE = 2 * 2**30
"""What vLLM's start-up profile takes inside the fraction beside the weights: vLLM gives the KV
cache `fraction × total − (weights + the profile run's activation peak + its non-torch increase)`
(vllm/v1/worker/gpu_worker.py, `determine_available_memory`: `requested_memory −
non_kv_cache_memory`) and refuses to start when that is not positive ("No available memory for the
cache blocks", vllm/v1/core/kv_cache_utils.py, `check_enough_kv_cache_memory`). The profile run is
one forward over `max_num_batched_tokens` (verl's 8192, rollout.yaml:78) plus a sampler run over
`max_num_seqs` (256); vLLM logs about 1.2-1.5 GiB of activation peak and a few hundred MB of
non-torch memory (NCCL, cuBLAS workspaces) for 7-8B models there. 2 GiB is the stated allowance
for both, not a figure computed from the model's shape."""
LOAD_FORMAT_DEFAULT = "dummy"
"""`rollout.load_format` (rollout.yaml:100): the rollout engine starts with random weights and
receives the actor's before the first generation; it does not change what is resident."""
PHASE_OFFLOAD: tuple[KeyPath, KeyPath] = ((*ACTOR, "fsdp_config", "param_offload"),
                                          (*ACTOR, "fsdp_config", "optimizer_offload"))
"""The FSDP actor's between-phase offloads, default false (trainer/config/engine/fsdp.yaml:12,16).
Resident on each GPU, phase by phase, in the hybrid engine (workers/engine_workers.py):

* before the rollout engine starts, the actor is built and the cache emptied "so colocated
  vLLM processes can see it via cudaMemGetInfo" (engine_workers.py:690-691): vLLM's start-up
  check counts what the actor already holds;
* rollout phase (`update_weights`, engine_workers.py:769-823): the rollout's weights are woken,
  the actor's parameters are moved to CPU only under `param_offload` (:811-812), the cache is
  emptied (:814), then the KV cache is woken (:823). The actor's fp32 parameter shards (the
  actor trains in fp32, workers/engine/fsdp/transformer_impl.py:261-262) and, unless
  `optimizer_offload`, its optimizer state stay on the GPU beside the rollout's fraction; its
  gradients were freed by `zero_grad` when training ended (transformer_impl.py:1135-1138);
* training phase (`update_actor`): the rollout sleeps (above); `train_mode` brings back what the
  offloads moved and sends it to CPU again on exit (workers/engine/base.py:314-335).

FSDP2's `offload_policy` (what `compile` writes for the recipe's offload) turns both off and keeps
the parameters and optimizer state on CPU throughout (transformer_impl.py:459-463). The
reference model is built `forward_only`, which also means CPU offload (:459)."""


def actor_engine(plan: Plan) -> str:
    """The engine verl builds the actor with, as `translator.verl` emits it: Megatron for
    `megatron`, FSDP1 (`fsdp`) for `fsdp` with `fsdp_version: 1`, FSDP2 for every other
    strategy (ZeRO-1/2 become FSDP2 without resharding, DR201; DDP FSDP2 with
    `fsdp_size=1`, DR205). `plan`'s engine view (`engines.runner.runs_fsdp2`) and the head
    rules (`engines.heads`) follow it."""
    if plan.recipe.strategy == "megatron":
        return "megatron"
    return "fsdp" if plan.fsdp_version == 1 else "fsdp2"


def fsdp_size(plan: Plan) -> int:
    """`fsdp_config.fsdp_size`: the ranks verl's FSDP2 shards over. Its `create_device_mesh`
    makes a (world / fsdp_size, fsdp_size) ("ddp", "fsdp") mesh below the world, so 1 for
    DDP (DR205) is FSDP2 on a shard group of one: every rank a whole fp32 copy, the
    gradients all-reduced across all ranks (HSDP's replicate dimension)."""
    return 1 if plan.stage == 0 else plan.dims.world // plan.dims.replicas


ROLLOUT_DP: KeyPath = (*ROLLOUT, "data_parallel_size")
ROLLOUT_PP: KeyPath = (*ROLLOUT, "pipeline_model_parallel_size")
ROLLOUT_NAME: KeyPath = (*ROLLOUT, "name")
GPUS_PER_NODE: KeyPath = ("trainer", "n_gpus_per_node")
NODES: KeyPath = ("trainer", "nnodes")


def rollout_layout_refusal(world: int, gpus_per_node: int | None, tp: int, dp: int = 1, pp: int = 1,
                           name: object = None) -> str | None:
    """Why verl's workers refuse to lay the rollout engine out on these GPUs, or None.

    One rollout replica takes R = TP × DP × PP GPUs (`rollout.tensor_model_parallel_size`,
    default 2, rollout.yaml:64; `data_parallel_size` and `pipeline_model_parallel_size`,
    default 1, :67, :75). Each is an assertion met only after Ray and the actor have started:

    * the hybrid worker builds the rollout's device mesh: the world (`trainer.nnodes ×
      n_gpus_per_node`) must be a multiple of R (workers/engine_workers.py:655-660,
      "rollout world_size ... is not divisible by infer_world_size");
    * a replica wider than a node must fill whole nodes: R a multiple of `n_gpus_per_node`
      (workers/rollout/replica.py:107-116);
    * vLLM with rollout data parallelism splits each node into DP groups of TP GPUs:
      `n_gpus_per_node` a multiple of TP (workers/rollout/vllm_rollout/vllm_async_server.py:
      384-387, "gpus_per_node should be divisible by tensor_model_parallel_size").

    On one GPU verl's default TP 2 cannot start. `gpus_per_node` None skips the per-node rules.
    """
    replica = tp * dp * pp
    if world % replica:
        return (f"{world} GPUs are not a multiple of the rollout's tensor × data × pipeline "
                f"parallelism {tp} × {dp} × {pp} = {replica} (verl's worker asserts it when it builds "
                "the rollout's device mesh, after Ray and the actor have started)")
    if gpus_per_node is None:
        return None
    if replica > gpus_per_node and replica % gpus_per_node:
        return (f"a rollout replica of {replica} GPUs spans nodes of {gpus_per_node} GPUs without "
                "filling them (verl's rollout replica asserts it at start-up)")
    if dp > 1 and name == "vllm" and gpus_per_node % tp:
        return (f"{gpus_per_node} GPUs per node are not a multiple of the rollout's tensor "
                f"parallelism {tp} with rollout data parallelism {dp} (verl's vLLM server asserts it "
                "at start-up)")
    return None


def rollout_heads_refusal(heads: int | None, kv_heads: int | None, tp: int,
                          name: object = None) -> str | None:
    """Why the rollout engine refuses to split the model's attention heads over its tensor
    parallelism, or None.

    vLLM checks the query heads when it builds the engine (vllm/config/model.py,
    `ModelConfig.verify_with_parallel_config`: "Total number of attention heads (H) must be
    divisible by tensor parallel size (T)") and splits the kv heads in
    `QKVParallelLinear.__init__` (vllm/model_executor/layers/linear.py): kv heads ≥ TP are
    divided (`divide` asserts kv % TP == 0), fewer are replicated (`divide(tp, kv)`: TP %
    kv == 0). SGLang's `QKVParallelLinear` (sglang/srt/layers/linear.py) is the same code.
    Both after Ray and the actor have started. verl's `hf` rollout splits no heads, and
    without stated heads nothing is checked on a guess (`engines.heads`)."""
    if heads is None or tp == 1 or name not in (None, "vllm", "sglang"):
        return None
    kv = kv_heads or heads
    engine = "SGLang" if name == "sglang" else "vLLM"
    allowed = [d for d in range(1, heads + 1) if _rollout_splits(heads, kv, d)]
    choice = "{" + ", ".join(map(str, allowed)) + "}"
    if heads % tp:
        return (f"the model's {heads} attention heads do not divide by the rollout's tensor parallelism "
                f"{tp} ({engine} refuses it when the rollout starts, after Ray and the actor); rollout "
                f"tensor parallelism ∈ {choice}")
    if not _rollout_splits(heads, kv, tp):
        return (f"the model's {kv} kv heads neither divide by the rollout's tensor parallelism {tp} nor "
                f"divide it ({engine} splits or replicates whole kv heads when the rollout starts, after "
                f"Ray and the actor); rollout tensor parallelism ∈ {choice}")
    return None


def _rollout_splits(heads: int, kv: int, tp: int) -> bool:
    """`rollout_heads_refusal`'s rule: query heads split evenly, kv heads split or replicated."""
    return heads % tp == 0 and (tp % kv == 0 if tp >= kv else kv % tp == 0)


ROLLOUT_MAX_LEN: KeyPath = (*ROLLOUT, "max_model_len")
"""`rollout.max_model_len`, default null (rollout.yaml:81): verl then takes the checkpoint's
`max_position_embeddings` (vllm_async_server.py:1101-1111, `_validate_configs`; a larger value is
refused there), and hands it to vLLM as `max_model_len` (:332). `data.max_prompt_length` and
`max_response_length` (the rollout's `prompt_length` / `response_length`) do not set it: they
only cap each request (:593-597). So a recipe states the length only through this key."""
KV_BLOCK = 16
"""vLLM's KV cache block on CUDA (`CacheConfig.block_size` default); verl does not set it. A
sequence's KV cache is whole blocks: `FullAttentionSpec.max_memory_usage_bytes` =
cdiv(max_model_len, block_size) × page bytes (vllm/v1/kv_cache_interface.py)."""


def one_sequence_kv(length: int, layers: int, kv_heads: int, head_dim: int, width: int, tp: int) -> int:
    """Bytes of KV cache one GPU of the rollout needs for one sequence of `length` tokens: vLLM's
    second start-up check (vllm/v1/core/kv_cache_utils.py, `check_enough_kv_cache_memory`: "To
    serve at least one request with the models's max seq len ..."). Per layer K and V, each
    `kv_heads` ÷ TP heads (at least one: vLLM replicates kv heads below TP, `get_num_kv_heads`)
    × `head_dim` × `width` bytes (the KV cache takes the model's dtype, `kv_cache_dtype: auto`),
    over whole blocks of `KV_BLOCK` tokens."""
    blocks = -(-length // KV_BLOCK)
    return layers * 2 * max(1, kv_heads // tp) * head_dim * width * blocks * KV_BLOCK
