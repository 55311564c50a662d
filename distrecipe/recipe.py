"""The declared job: a `Recipe` as the user wrote it, after schema validation.

Typed, immutable, and still allowed to say ``"auto"``: the resolved side, which every
view consumes, is `distrecipe.job.Plan`, holding this recipe beside what resolution
adds (as torchtitan keeps its config apart from `ParallelDims`), so no consumer ever
has to ask "was this resolved yet?".
"""

from __future__ import annotations

import json
import re
import types
import unicodedata
from dataclasses import MISSING, Field, dataclass, field, fields, is_dataclass
from functools import cache
from pathlib import PurePath
from typing import Any, Literal, get_args, get_type_hints

import yaml

from distrecipe.errors import Position
from distrecipe.overrides import OVERRIDE_PATTERN, split_override

AUTO: Literal["auto"] = "auto"

Strategy = Literal["ddp", "zero", "fsdp", "megatron"]
OffloadDevice = Literal["none", "cpu", "nvme"]
Precision = Literal["bf16", "fp16", "fp32"]
Device = Literal["gpu", "cpu"]
Recompute = Literal["none", "selective", "full"]
Attention = Literal["eager", "sdpa", "flash", "unknown"]
Tristate = bool | Literal["unknown"]
LossKernel = Literal["full", "chunked", "fused", "unknown"]
FusedOps = Literal["none", "liger", "unknown"]
MlpKernel = Literal["full", "tiled", "unknown"]
ScheduleDecay = Literal["constant", "linear", "cosine"]
CheckpointWeights = Literal["sharded", "full"]
Backend = Literal["deepspeed", "accelerate", "accelerate-deepspeed", "torchrun", "verl", "openrlhf"]
ProgramKind = Literal["hf", "accelerate", "deepspeed", "torchrun", "verl", "openrlhf"]
"""How a training program reads its settings: Trainer flags, `accelerate launch`'s config,
`--deepspeed_config`, environment variables (plain torchrun), Hydra overrides (verl), or
OpenRLHF's grouped command-line options (`openrlhf.cli.train_ppo_ray`)."""
OptimizerName = Literal["adamw", "adam", "sgd"]
Dtype = Literal["fp32", "bf16"]
AutoInt = int | Literal["auto"]
Gpu = Literal["v100-16gb", "v100-32gb", "a10g", "l4", "l40s", "a100-40gb", "a100-80gb", "h100", "h100-pcie",
              "h200", "gh200", "b200", "mi250x", "mi300x", "rtx3090", "rtx4090"]
"""GPU models whose memory, peak and bandwidths distrecipe knows (`distrecipe.engines.gpus.GPUS`)."""
Family = Literal["llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "gemma", "gemma2",
                 "gemma3_text", "phi3", "olmo2", "granite", "deepseek_v2", "deepseek_v3", "gpt2", "gpt_neox",
                 "falcon", "bloom"]
"""Decoder families by their Hugging Face `model_type`: each fixes which small tensors a
block holds and how its MLP is built (`distrecipe.model_shapes.LAYOUTS`)."""
Bias = Literal["none", "qkv", "attention", "mlp", "all"]
"""Which linear layers carry a bias: q/k/v, all of attention (q/k/v/o), the MLP, or both."""
MicroPolicy = Literal["largest-that-fits", "accumulation-1"]
RolloutMode = Literal["colocate", "server"]

STRATEGIES: tuple[Strategy, ...] = get_args(Strategy)
PRECISION_BYTES: dict[Precision, int] = {"bf16": 2, "fp16": 2, "fp32": 4}

# Each section's defaults are its fields' defaults and nowhere else: `translator.load`
# passes on only the keys a recipe wrote. The JSON schema is generated from these classes
# (`schemas/generate.py`): each field's docstring is its description, and what JSON Schema
# checks beyond the type (bounds, patterns, the written form of a size) sits beside the
# field in `spec`.

_SAME = object()


def spec(default: Any = MISSING, /, *, key: str | object | None = _SAME,
         written: dict[str, Any] | None = None, optional: bool = False, nullable: bool = False,
         **json: Any) -> Any:
    """A field with its schema beside it: `json` holds JSON Schema keywords for the value
    (`minimum`, `maximum`, `pattern`, `title`; `items` for a list's items; a keyword set to
    None drops one the type would give), `written` replaces the whole schema where a recipe
    writes the value in another form (a size as `80GB`), `key` is the dotted key when it is
    not the field's name (None: not written in a recipe), `optional` makes a field without
    default optional in a recipe (the loader fills it), and `nullable` admits a written null."""
    metadata: dict[str, Any] = {"json": json, "written": written, "optional": optional, "nullable": nullable}
    if key is not _SAME:
        metadata["key"] = key
    return field(default=default, metadata=metadata)


COUNT_FORM: dict[str, Any] = {
    "anyOf": [
        {"type": "integer", "minimum": 1, "maximum": 10**15},
        {"type": "number", "exclusiveMinimum": 0, "maximum": 10**15},
        {"type": "string", "pattern": r"^\s*[0-9]{1,16}(\.[0-9]{1,16})?([eE][+]?[0-9]{1,2})?\s*[KMBT]?\s*$",
         "examples": ["8.2B"]},
    ],
}
"""A parameter count as a recipe writes it: an integer, a float (`8.2e9`) or `8.2B`."""
SIZE_FORM: dict[str, Any] = {
    "oneOf": [
        {"type": "integer", "minimum": 1, "maximum": 2**50},
        {"type": "string", "pattern": r"^\s*[0-9]{1,16}(\.[0-9]{1,16})?\s*([KMGT]i?B|B)\s*$",
         "examples": ["80GiB"]},
    ],
}
"""Bytes as a recipe writes them: an integer, or a number with a unit (`80GiB`, `80GB`)."""
HEADROOM_FORM: dict[str, Any] = {
    "oneOf": [
        {"type": "number", "minimum": 0, "exclusiveMaximum": 1},
        SIZE_FORM["oneOf"][1],
    ],
}
"""`cluster.headroom` as written: a share of the GPU (0.05), or a size (`4GB`)."""
RECOMPUTE_FORM: dict[str, Any] = {
    "oneOf": [
        {"type": "boolean"},
        {"enum": list(get_args(Recompute))},
        {"type": "object", "additionalProperties": False, "required": ["mode"],
         "properties": {"mode": {"enum": list(get_args(Recompute))}}},
    ],
}
"""`activation_checkpointing` as written: true/false, a mode, or `{mode, every}` (`every` is
`Recipe.recompute_every`, which the schema generator places in the mapping form)."""
MEMORY_FORM: dict[str, Any] = {
    "oneOf": [
        {"type": "integer", "minimum": 0, "maximum": 10**12},
        {"type": "string", "pattern": "^(default|[0-9]{1,12}[KMGT]?)$",
         "title": "a SLURM memory size such as 512G, 64000M or 0 (all of the node's), or default"},
    ],
}
"""`launch.slurm.mem` as SLURM writes it: megabytes as a number, or a number with a unit."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Model:
    """The model's shape; enough for bucket sizes, memory and activation estimates."""

    params: int | None = spec(None, written=COUNT_FORM)
    """Parameter count Ψ: an integer, a float such as 8.2e9, or 8.2B (K/M/B/T). Computed from
    the shape when a Hugging Face config is given."""
    hidden_size: int | None = spec(None, minimum=1, maximum=2**20)
    """Width of the residual stream (d_model); sizes DeepSpeed's buckets. Default: unknown."""
    layers: int | None = spec(None, minimum=1, maximum=100_000)
    """Number of transformer blocks. Default: unknown."""
    heads: int | None = spec(None, minimum=1, maximum=65_536)
    """Attention (query) heads. Default: unknown."""
    kv_heads: int | None = spec(None, minimum=1, maximum=65_536)
    """Key/value heads (grouped-query attention); defaults to `heads`."""
    intermediate_size: int | None = spec(None, minimum=1, maximum=2**24)
    """Width of the MLP's hidden layer. Default: unknown."""
    vocab: int | None = spec(None, minimum=1, maximum=2**31)
    """Vocabulary size (rows of the embedding). Default: unknown."""
    layer_cls: str | None = None
    """The transformer block's class name, for FSDP's transformer auto-wrap policy."""
    attention: Attention = "flash"
    """Attention kernel: `eager` stores the s² scores, `sdpa`/`flash` do not; `unknown` is
    planned as `flash` with a wider error band (`plan.activations.kernel_choice`). Default `flash`."""
    tied_embeddings: bool = False
    """The output projection shares the input embedding's weights. Default false."""
    hf_config: str | None = None
    """Path of a Hugging Face `config.json`, relative to the recipe; it fills the shape's
    fields the recipe leaves out (`resolve` names the config key each came from)."""
    family: Family = "llama"
    """The decoder family (Hugging Face's `model_type`): which norms, biases and q/k norms a
    block holds (BLOOM: a LayerNorm after the embedding too) and whether its MLP is gated
    (three matrices) or plain (two: GPT-2, GPT-NeoX, Falcon, BLOOM). Default `llama` (two
    RMSNorms, no biases, a gated MLP), which Mistral, Mixtral, Phi-3 and Granite share."""
    head_dim: int | None = spec(None, minimum=1, maximum=2**16)
    """Width of one attention head; default hidden_size / heads (Gemma and Qwen3 set 256
    and 128 whatever the hidden size). With multi-latent attention, the query/key head:
    the no-position part plus `rope_head_dim`."""
    bias: Bias | None = None
    """Which linear layers have a bias: `none`, `qkv`, `attention` (q/k/v/o), `mlp` or `all`.
    Default: the family's (`qwen2` qkv, `gpt2`, `gpt_neox` and `bloom` all, the rest none)."""
    block_norms: int | None = spec(None, minimum=1, maximum=16)
    """Norms of hidden width in each block. Default: the family's (2; Gemma 2 and 3: 4;
    Falcon's parallel attention: 1)."""
    position_embeddings: int | None = spec(None, minimum=1, maximum=2**31)
    """Rows of a learned position embedding (GPT-2's `n_positions`). Default: none (rotary)."""
    experts: int | None = spec(None, minimum=1, maximum=65_536)
    """Routed experts in each mixture-of-experts layer. Default: none (a dense model). All
    are counted in memory; only `experts_per_token` of them in a token's FLOPs."""
    experts_per_token: int | None = spec(None, minimum=1, maximum=65_536)
    """Routed experts each token visits (top-k). Needed with `experts`."""
    expert_intermediate_size: int | None = spec(None, minimum=1, maximum=2**24)
    """Width of one routed expert's MLP. Default `intermediate_size` (Mixtral's experts are
    its MLP's width)."""
    shared_experts: int = spec(0, minimum=0, maximum=65_536)
    """Experts every token visits beside the routed ones (DeepSeek's `n_shared_experts`,
    Qwen-MoE's shared expert). Default 0."""
    shared_expert_size: int | None = spec(None, minimum=1, maximum=2**24)
    """Width of one shared expert's MLP. Default `expert_intermediate_size`."""
    dense_layers: int = spec(0, minimum=0, maximum=100_000)
    """Layers whose MLP is dense (`intermediate_size` wide) instead of experts: DeepSeek's
    first `first_k_dense_replace`, Qwen-MoE's `mlp_only_layers`. Default 0 (every layer
    has experts, when `experts` is set)."""
    q_lora_rank: int | None = spec(None, minimum=1, maximum=2**20)
    """Multi-latent attention (DeepSeek-V2/V3): rank of the query's low-rank projection.
    Default: none (queries projected at full rank)."""
    kv_lora_rank: int | None = spec(None, minimum=1, maximum=2**20)
    """Multi-latent attention: rank of the compressed key/value latent; setting it makes
    attention MLA. Default: none (multi-head or grouped-query attention)."""
    rope_head_dim: int | None = spec(None, minimum=1, maximum=2**16)
    """Multi-latent attention: the rotary part of each query/key head, shared by all heads'
    keys (`qk_rope_head_dim`). Needed with `kv_lora_rank`."""
    v_head_dim: int | None = spec(None, minimum=1, maximum=2**16)
    """Multi-latent attention: width of one value head. Default `head_dim`."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Cluster:
    """Where the job runs. `gpus_per_node` counts ranks per node (CPU processes on `cpu`)."""

    nodes: int = spec(1, minimum=1, maximum=1_000_000)
    """Machines in the job. Default 1."""
    gpus_per_node: AutoInt = spec(AUTO, minimum=1, maximum=1024)
    """Ranks per node; `auto` (the default) counts this machine's GPUs at launch."""
    gpu_memory: int | None = spec(None, written=SIZE_FORM)
    """Bytes of memory per accelerator, for the `fits?` verdict: an integer, or a number with a
    unit (80GiB, 80GB = 10⁹, 512MiB). Default: `gpu`'s size; one that contradicts `gpu` is
    refused."""
    headroom: float | int | None = spec(None, written=HEADROOM_FORM)
    """GPU memory to leave free beyond what the plan says the job needs: a share of
    `gpu_memory` (0.05) or a size (4GB). `fits?`, `plan --search`, `batch.micro: auto` and
    `init` judge against `gpu_memory` less this. Default: none (0)."""
    cpu_memory: int | None = spec(None, written=SIZE_FORM)
    """Bytes of host memory per node, for offload, written as `gpu_memory`. Default: unknown."""
    device: Device = "gpu"
    """`cpu` runs every rank as a CPU process with gloo (laptops, CI, demo). Default `gpu`."""
    gpu: Gpu | None = None
    """The GPU model: it implies `gpu_memory` (a100-80gb: 80 GB), and gives step time its
    peak FLOPS, NVLink and network bandwidth (`distrecipe/engines/gpus.py`, with sources).
    Default: unknown."""
    peak_tflops: float | None = spec(None, exclusiveMinimum=0, maximum=100_000)
    """Dense bf16 peak per GPU in TFLOPS, overriding `gpu`'s. Default: `gpu`'s."""
    intra_node_bandwidth: float | None = spec(None, exclusiveMinimum=0, maximum=100_000)
    """GB/s one GPU sends to its node's peers (per direction), overriding `gpu`'s. Default: `gpu`'s."""
    inter_node_bandwidth: float | None = spec(None, exclusiveMinimum=0, maximum=100_000)
    """GB/s one GPU sends to other nodes (per direction), overriding `gpu`'s. Default: `gpu`'s."""
    network_latency: float | None = spec(None, exclusiveMinimum=0, maximum=1_000_000)
    """Microseconds one ring step across nodes costs (what `plan` charges each collective call
    per network hop, as NCCL's tuning model does). Default: NCCL's 9.6."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Offload:
    """Where optimizer state and parameters live between uses."""

    optimizer: OffloadDevice = "none"
    """Where optimizer state (and its step) lives: `none` (on the GPU, the default), `cpu`, `nvme`."""
    params: OffloadDevice = "none"
    """Where parameters live between uses: `none` (the default), `cpu`, `nvme`."""
    nvme_path: str | None = None
    """Directory for NVMe offload, used when either device is `nvme`. Default: none."""
    pin_memory: bool = True
    """Page-locked host buffers: faster copies, more host memory. Default true."""
    activations: Literal["none", "cpu"] = "none"
    """Where the checkpointed layer inputs wait for backward: `none` (on the GPU, the
    default) or `cpu` (DeepSpeed's `activation_checkpointing.cpu_checkpointing`: each
    block's saved input is copied to host memory in forward and back in backward, so
    the GPU holds about one layer's instead of every layer's). Needs
    `activation_checkpointing: full`."""

    @property
    def enabled(self) -> bool:
        """True when model state is offloaded (FSDP2 has one switch for all of it); CPU-held
        activation checkpoints are not model state (`activations`)."""
        return self.optimizer != "none" or self.params != "none"


@dataclass(frozen=True, kw_only=True, slots=True)
class Kernels:
    """The kernels that change what a step saves for backward and how long it takes
    (measured in `benchmarks/saved_activations.py`; docs/plan.md, "Kernels"). The defaults
    are eager Hugging Face's: no compile, the full loss, no fused ops, the whole MLP."""

    compile: Tristate = False
    """Blocks run under `torch.compile` (torchtitan's `compile`, the Trainer's
    `torch_compile`): inductor's partitioner saves less per block. `true`, `false` (the
    default) or `unknown`."""
    loss: LossKernel = "full"
    """How the head's cross-entropy runs: `full` (fp32 logits of the whole sequence, the
    default), `chunked` (torchtune's chunked output: no whole 16-bit logits held), `fused`
    (Liger's fused linear cross-entropy: no logits saved at all), or `unknown`."""
    fused_ops: FusedOps = "none"
    """Fused norm / SwiGLU / RoPE kernels: `none` (the default), `liger` (the Trainer's
    `use_liger_kernel`, which also fuses the loss), or `unknown`."""
    mlp: MlpKernel = "full"
    """How each block's MLP runs: `full` (the whole sequence at once, the default) or
    `tiled` (DeepSpeed's `TiledMLP`, ArcticTraining's `tiled_mlp_compute`: ceil(s / h)
    shards, each recomputed in backward, so only the MLP's input is saved), or `unknown`."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Parallel:
    """Model-parallel degrees; what is left of the world is data parallel."""

    tensor: int = spec(1, minimum=1, maximum=2**20)
    """Tensor-parallel degree (ranks splitting each layer's matrices). Default 1."""
    pipeline: int = spec(1, minimum=1, maximum=2**20)
    """Pipeline-parallel degree (stages of consecutive layers). Default 1."""
    sequence: int = spec(1, minimum=1, maximum=2**20)
    """Sequence-parallel degree (ranks splitting each sample's tokens). Default 1."""
    virtual_stages: int = spec(1, minimum=1, maximum=2**20)
    """Model chunks each pipeline rank holds (Megatron's interleaved 1F1B,
    `virtual_pipeline_model_parallel_size`): v chunks of layers / (pipeline × v) layers
    each divide the 1F1B bubble by v at v times the point-to-point sends. Needs pipeline
    > 1, layers divisible by pipeline × v, and micro-batches per step a multiple of
    pipeline (Megatron's interleaved schedule). Default 1 (plain 1F1B)."""
    shard_group: int | Literal["all"] = spec("all", minimum=1, maximum=2**30)
    """Ranks one shard is split over; fewer than the DP world means hybrid sharding. Default `all`."""
    tensor_sequence: bool | None = None
    """Megatron's sequence parallelism (`sequence_parallel`) beside tensor parallelism: the
    norms' and dropouts' activations are split over the tensor group as well, so a layer
    keeps 34·sbh/t instead of (10 + 24/t)·sbh (Korthikanti et al. 2022, §4.2.2). Default:
    Megatron's on whenever tensor > 1 (verl's engine sets it so, and `compile` leaves the key
    to it); the other engines' tensor parallelism has no such switch."""
    tensor_overlap: bool = False
    """Tensor-parallel communication overlapped with the matrix multiplies that produce and
    consume it (Megatron's `tp_comm_overlap`, Transformer Engine's userbuffers; torchtitan's
    async TP). Off, every tensor-parallel gather and reduction is exposed. Default false,
    as in every engine."""
    first_stage_layers: int | None = spec(None, minimum=0, maximum=100_000)
    """Transformer layers on the first pipeline stage (Megatron's
    `num_layers_in_first_pipeline_stage`): fewer leaves room for the embedding it also
    holds; the other stages share the rest evenly. Default: an even split."""
    last_stage_layers: int | None = spec(None, minimum=0, maximum=100_000)
    """Transformer layers on the last pipeline stage (`num_layers_in_last_pipeline_stage`),
    which also holds the output head and the loss. Default: an even split."""
    expert: int = spec(1, minimum=1, maximum=2**20)
    """Expert-parallel degree: ranks the routed experts of a mixture-of-experts layer are
    divided over, taken from the data (× sequence) parallel ranks, which it must divide
    (Megatron's `expert_model_parallel_size`, DeepSpeed MoE's `ep_size` in the script).
    Default 1."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Batch:
    """`micro × accumulation × DP = global`; any one or two may be `auto`."""

    micro: AutoInt = spec(AUTO, minimum=1, maximum=2**31)
    """Samples per rank per forward pass. Default `auto` (derived)."""
    accumulation: AutoInt = spec(AUTO, minimum=1, maximum=2**31)
    """Micro-batches per optimizer step. Default `auto` (derived)."""
    global_: AutoInt = spec(AUTO, key="batch.global", minimum=1, maximum=2**40)
    """Samples per optimizer step over all data-parallel ranks (`batch.global`). Default `auto`."""
    seq_len: int | None = spec(None, minimum=1, maximum=2**31)
    """Tokens per sample, for activation memory. Default: unknown."""
    micro_policy: MicroPolicy = "largest-that-fits"
    """What `micro: auto` means when accumulation is `auto` too: `largest-that-fits` (the
    default) takes the largest micro-batch whose memory fits the GPU, which needs the model's
    size and shape, `seq_len` and `cluster.gpu_memory` (or `cluster.gpu`), and is refused
    without them; `accumulation-1` takes accumulation 1 and micro = global / DP, whatever
    memory it needs."""
    micro_tokens: int | None = spec(None, minimum=1, maximum=2**31)
    """Micro-batches packed by tokens, at most this many per GPU (verl's `use_dynamic_bsz`
    with `ppo_max_token_len_per_gpu`): a micro-batch's sample count then varies, so
    `micro` and `accumulation` stay `auto` and `global` fixes the step. Default: none
    (micro-batches count samples). Only verl can express it."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Optimizer:
    """The optimizer and its hyper-parameters. A value left out is the engine's own default
    where the engine builds the optimizer (DeepSpeed's, the HF Trainer's, verl's), never
    one distrecipe picks."""

    name: OptimizerName = "adamw"
    """`adamw` (decoupled weight decay, the default), `adam` (coupled L2 decay) or `sgd`."""
    lr: float | None = spec(None, exclusiveMinimum=0, maximum=1000.0)
    """Learning rate (the schedule's peak). Default: the engine's."""
    betas: tuple[float, float] | None = spec(None, items={"minimum": 0, "exclusiveMaximum": 1})
    """Adam's moment decay rates (β1, β2). Default: the engine's."""
    eps: float | None = spec(None, exclusiveMinimum=0, maximum=1.0)
    """Adam's denominator epsilon. Default: the engine's."""
    weight_decay: float | None = spec(None, minimum=0, maximum=1000.0)
    """Weight decay coefficient. Default: the engine's."""
    state_dtype: Dtype = "fp32"
    """dtype of Adam's moments m and v: `fp32` (the default, every engine's) or `bf16`
    (Megatron's precision-aware optimizer, `exp_avg_dtype` / `exp_avg_sq_dtype`: 4 bytes a
    parameter instead of 8; the fp32 master copy stays)."""
    master_weights: Dtype = "fp32"
    """dtype of the weights and gradients the optimizer updates: `fp32` (the default: an fp32
    master copy beside the 16-bit parameters) or `bf16` (pure bf16, no fp32 copy: DeepSpeed's
    `bf16.bf16_master_weights_and_grads`, torch FSDP or DDP over a model cast to bf16, whose
    torch optimizer then keeps its moments in bf16 too). Needs `precision: bf16`."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Schedule:
    """The learning rate over the run and the run's length: a linear warmup from 0 to
    `optimizer.lr`, then `decay` towards `min_lr_ratio` × lr at `total_steps` (every engine's
    shape; `docs/equivalence.md` says which keys each uses). A value left out is the engine's."""

    decay: ScheduleDecay = "constant"
    """After warmup: `constant` (the default), `linear` or `cosine` decay."""
    warmup_steps: int | None = spec(None, minimum=0, maximum=2**31)
    """Optimizer steps of linear warmup. Default: none, or `warmup_ratio`'s."""
    warmup_ratio: float | None = spec(None, minimum=0, maximum=1)
    """Warmup as a fraction of `total_steps` (the Trainer's and verl's ratio), instead of
    `warmup_steps`. Default: none."""
    min_lr_ratio: float | None = spec(None, minimum=0, maximum=1)
    """Where the decay ends, as a fraction of `optimizer.lr`. Default: the engine's (0)."""
    total_steps: int | None = spec(None, minimum=1, maximum=2**40)
    """The run's length in optimizer steps (DeepSpeed's `total_num_steps`, the Trainer's
    `max_steps`, verl's `total_training_steps`). Default: the script's or the data's."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Checkpoint:
    """What a saved checkpoint holds, and how often one is written."""

    weights: CheckpointWeights | None = None
    """`full`: the whole model's 16-bit weights gathered on save (DeepSpeed's
    `stage3_gather_16bit_weights_on_model_save`, Accelerate's `FULL_STATE_DICT`); `sharded`:
    each rank saves its shard. Default: the engine's."""
    every: int | None = spec(None, minimum=1, maximum=2**31)
    """Save every this many optimizer steps (the Trainer's `save_steps`, verl's `save_freq`).
    Default: the script's."""
    dir: str | None = spec(None, minLength=1, maxLength=4096)
    """Where checkpoints are written and looked for (the Trainer's `output_dir`, verl's
    `default_local_dir`; `launch` hands it to other scripts as `DISTRECIPE_CHECKPOINT_DIR`).
    Default: the script's."""
    keep: int | None = spec(None, minimum=1, maximum=2**31)
    """How many checkpoints to keep, the oldest deleted first (the Trainer's
    `save_total_limit`, verl's `max_actor_ckpt_to_keep`). Default: the script's (all)."""
    resume: str | None = spec(None, minLength=1, maxLength=4096)
    """How a launch resumes: `auto` (the latest complete checkpoint in `dir`, if there is one),
    `none` (from scratch), or a checkpoint's path; `launch` checks it can be loaded before any
    rank starts (`docs/checkpoints.md`). Default: the script's."""


@dataclass(frozen=True, kw_only=True, slots=True)
class RL:
    """verl only: a step's global batch counts sequences, data counts prompts."""

    rollout_n: int = spec(minimum=1, maximum=65_536)
    """Responses sampled per prompt (the GRPO group size). Required in `rl`."""
    prompts_per_step: int = spec(minimum=1, maximum=2**31)
    """Prompts per rollout (one generation batch of `prompts_per_step × rollout_n` sequences:
    verl's `data.train_batch_size`, GRPOConfig's `generation_batch_size` in groups, OpenRLHF's
    `--rollout.batch_size`), trained in optimizer steps of `batch.global` sequences. Required in `rl`."""
    rollout_memory: float | None = spec(None, exclusiveMinimum=0, maximum=1)
    """Fraction of each GPU's total memory the rollout engine (vLLM, SGLang) takes while it
    generates, its weights and KV cache included: verl's `rollout.gpu_memory_utilization`,
    in (0, 1]. Default: verl's 0.5, and `compile` leaves the key to verl."""
    free_rollout_memory: bool | None = None
    """The rollout engine gives its memory back while the actor trains (verl's
    `rollout.free_cache_engine`); false keeps `rollout_memory` reserved through training.
    Default: verl's true, and `compile` leaves the key to verl."""
    rollout_mode: RolloutMode | None = None
    """Where the rollout engine (vLLM) runs: `colocate` on the trainer's GPUs (verl's hybrid
    engine, TRL's `vllm_mode: colocate`, OpenRLHF's `--train.colocate_all`), or `server` on
    GPUs outside the recipe's cluster (TRL's `vllm_mode: server` beside `trl vllm-serve`),
    which `plan` leaves off the trainer's memory. Default: colocated where `rollout_memory`
    is stated, and TRL without vLLM otherwise."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Slurm:
    """The `#SBATCH` lines of `launch --slurm` that only the cluster's owners can decide.

    Unset, `partition`, `account`, `time` and `cpus_per_task` are written as
    `SET-launch.slurm.<key>` placeholders, which sbatch rejects and the script refuses to
    run past; `default` leaves the line out, so the cluster's own default applies.
    """

    partition: str | None = spec(None, pattern="^[A-Za-z0-9_.,-]+$", minLength=None,
                                 title="a SLURM partition name, or a comma-separated list of them")
    """`#SBATCH --partition` (the queue). Default: a placeholder; `default` leaves the line out
    (the cluster's default partition)."""
    account: str | None = spec(None, pattern="^[A-Za-z0-9_.-]+$", minLength=None,
                               title="a SLURM account name (letters, digits, '.', '_' and '-')")
    """`#SBATCH --account`, the account charged. Default: a placeholder; `default` leaves the
    line out (your default account)."""
    time: str | None = spec(None, pattern="^(default|([0-9]+-)?[0-9]+(:[0-9]{2}){0,2})$", minLength=None,
                            title="a SLURM time limit such as 2-00:00:00, 12:00:00 or 30, or default")
    """`#SBATCH --time`, the wall-time limit as SLURM writes it (`30` minutes, `1:00:00`,
    `12:00:00`, `2-00:00:00`, `1-12`). Default: a placeholder; `default` leaves the line out
    (the partition's limit). YAML 1.1 reads an unquoted `12:00:00` as the number 43200: the
    text as written is read back (`slurm_time_as_written`)."""
    cpus_per_task: int | Literal["default"] | None = spec(None, minimum=1, maximum=100_000)
    """`#SBATCH --cpus-per-task`: CPUs for each node's launcher, its ranks and their data
    loaders. Default: a placeholder (no count fits every cluster's nodes), none under
    `exclusive`; `default` leaves the line out (SLURM's one CPU)."""
    mem: int | str | None = spec(None, written=MEMORY_FORM)
    """`#SBATCH --mem`, memory per node: `512G`, a number of megabytes, `0` for all of it.
    Default: none asked, the partition's default applies (as with `default`)."""
    exclusive: bool = False
    """`#SBATCH --exclusive`: whole nodes, every CPU included. Default false."""

SLURM_TIME = ("launch", "slurm", "time")
"""The recipe key whose YAML 1.1 reading (sexagesimal `12:00:00` → 43200) is undone at load."""
_PLAIN_WORD = re.compile(r"[^\s,\[\]{}#\"'!&*|>%@`][^\s,\[\]{}#\"']*")
"""A plain scalar of one word, as a SLURM time is written (`12:00:00`, `1-12`); a tag
(`!!float 1`), anchor or alias is the user's own typing and is not read back."""


def slurm_time_as_written(value: object, written: str) -> object:
    """`launch.slurm.time` as the user wrote it, where YAML 1.1 read it as something else.

    SLURM's `12:00:00` and `1:00:00` are sexagesimal integers to YAML 1.1 (43200, 3600),
    `30` a plain one, `1.5` a float and `yes` a boolean; a time is text, so the word at
    the value's position (`written`, from there to the end of its line) is read back
    when YAML reads that word as `value`: the schema then judges the text, and its
    message quotes what was written. Anything else is returned as it came.
    """
    if isinstance(value, str) or value is None or isinstance(value, (dict, list)):
        return value
    word = _PLAIN_WORD.match(written.lstrip())
    if word is None:
        return value
    try:
        same = yaml.safe_load(word.group(0)) == value
    except yaml.YAMLError:
        same = False
    return word.group(0) if same else value


@dataclass(frozen=True, kw_only=True, slots=True)
class SkyPilot:
    """What `launch --skypilot` writes into the SkyPilot task besides the plan's nodes and GPUs."""

    accelerator: str | None = spec(None, pattern="^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$", minLength=None,
                                   title="a SkyPilot accelerator name such as H100 or A100-80GB")
    """SkyPilot's accelerator name (`sky show-gpus`: `H100`, `A100-80GB`, ...), for a GPU
    `cluster.gpu` does not name or names ambiguously. Default: `cluster.gpu`'s SkyPilot
    name, else a `SET-cluster.gpu` placeholder that `sky launch` refuses."""
    workdir: str | None = None
    """The local directory SkyPilot syncs to every node, where `run` starts; the recipe and
    the script must lie inside it. Default: the directory `launch --skypilot` runs in."""
    setup: str | None = None
    """Shell commands SkyPilot runs once per node before `run`. Default: installing the
    distrecipe that writes the task, with its launcher's extra, from its source tree, which the
    workdir holds or `file_mounts` ships (`pip install -e '.[deepspeed]'`)."""


QUANTITY_FORM: dict[str, Any] = {
    "oneOf": [
        {"type": "integer", "minimum": 1, "maximum": 2**50},
        {"type": "string", "maxLength": 32,
         "pattern": r"^([0-9]+(\.[0-9]*)?|\.[0-9]+)(([KMGTPE]i)|[numkMGTPE]|[eE][+]?[0-9]+)?$",
         "examples": ["32", "500m", "256Gi"]},
    ],
}
"""A Kubernetes resource quantity as a manifest writes it (`resource.Quantity`, positive):
an integer, or a number with a suffix (`500m` CPU, `256Gi` memory)."""
K8sKind = Literal["trainjob", "rayjob", "pytorchjob"]
"""The manifests `launch --k8s` writes: Kubeflow Trainer v2's TrainJob, KubeRay's RayJob
(verl, OpenRLHF), and the legacy Kubeflow training-operator PyTorchJob."""


@dataclass(frozen=True, kw_only=True, slots=True)
class K8s:
    """What `launch --k8s` writes into a manifest that only the cluster's owners can decide.

    The namespace and the CPU and memory limits are written only when stated (requests
    have the defaults `cpu` and `memory` name); the runtime and the
    Python have the defaults Trainer and images ship with. Unset, the image is the
    placeholder `SET-launch.k8s.image`, not a valid image reference, so the pods fail
    to start (`InvalidImageName`) instead of running another image.
    """

    kind: Literal["auto"] | K8sKind = AUTO
    """The manifest `launch --k8s` writes; `auto` (the default): a RayJob for verl and OpenRLHF,
    else a TrainJob."""
    image: str | None = spec(None, pattern=r"^[A-Za-z0-9][A-Za-z0-9._/:@-]*$", maxLength=500, minLength=None,
                             title="a container image reference, e.g. ghcr.io/org/train:1.0")
    """The container image of every node: Python, distrecipe and the training program (a
    TrainJob or PyTorchJob also reads the recipe from it, at the path `launch` was given,
    relative to the image's working directory). Default: a placeholder."""
    python: str = spec("python3", pattern=r"^[A-Za-z0-9_./+-]+$", maxLength=255, minLength=None,
                       title="a command name or path without spaces, e.g. python3 or /opt/venv/bin/python")
    """The image's Python, which runs `-m distrecipe` on every node (or verl's or OpenRLHF's
    entry point in a RayJob). Default: `python3`."""
    namespace: str | None = spec(None, pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", maxLength=63,
                                 minLength=None, title="a Kubernetes namespace (a DNS-1123 label)")
    """`metadata.namespace`. Default: unset, so `kubectl apply` uses the current context's."""
    runtime: str = spec("torch-distributed", pattern=r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$", maxLength=253,
                        minLength=None, title="a ClusterTrainingRuntime name (a DNS-1123 subdomain)")
    """The ClusterTrainingRuntime a TrainJob runs on. Default: `torch-distributed`, the runtime
    Kubeflow Trainer installs for torchrun jobs."""
    cpu: int | str | None = spec(None, written=QUANTITY_FORM)
    """CPUs each node requests and is limited to (`32`, `500m`). Default: no limit, and a
    request of one CPU per rank (a TrainJob's or PyTorchJob's nodes; the manifest's comment
    says so)."""
    memory: int | str | None = spec(None, written=QUANTITY_FORM)
    """Memory each node requests and is limited to (`256Gi`). Default: no limit, and a request
    of `cluster.cpu_memory` where the recipe states it, else none (the comment says so)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Native:
    """Engine settings the recipe does not model, carried verbatim into that engine's output.

    What `import` could not map into the recipe's own fields lands here, so nothing
    an input said is lost or silently replaced by a default; a user may write it too.
    At compile each engine's section is deep-merged into what distrecipe emits for
    that engine, the native value winning, and `null` removing the emitted key (the
    engine's own default then applies). A native key that contradicts a value the
    recipe decides (batch, stage, precision, offload, world) is refused at resolve,
    naming both; `"auto"` there is not a contradiction (the Trainer fills it from
    the same recipe). `translator/native.py` holds the merge and the decided keys.
    """

    deepspeed: dict[str, Any] = field(default_factory=dict)
    """Merged into every ds_config (the DeepSpeed, Accelerate-DeepSpeed and Trainer targets)."""
    accelerate: dict[str, Any] = field(default_factory=dict)
    """Merged into `accelerate_config.yaml`."""
    hf: dict[str, Any] = field(default_factory=dict)
    """Merged into the TrainingArguments JSON (and into a TRL config, which holds the Trainer's kwargs)."""
    trl: dict[str, Any] = field(default_factory=dict)
    """Merged into the TRL config, after `hf`: TRL's own keys (the model, data, loss and
    generation: `beta`, `max_length`, `reward_funcs`), which TrainingArguments refuses."""
    verl: tuple[str, ...] = spec((), items={
        "title": "a Hydra override key=value, +key=value, ++key=value or ~key "
                 "(e.g. actor_rollout_ref.actor.clip_ratio=0.2)",
        "pattern": OVERRIDE_PATTERN, "minLength": None})
    """Hydra overrides (`key=value`, `+key=value`, `++key=value`, `~key` to delete): each
    replaces distrecipe's override of the same key, or is appended."""

    def __bool__(self) -> bool:
        return bool(self.deepspeed or self.accelerate or self.hf or self.trl or self.verl)


@dataclass(frozen=True, kw_only=True, slots=True)
class Launch:
    """How `distrecipe launch` starts the job."""

    backend: Literal["auto"] | Backend = AUTO
    """The engine's launcher; `auto` (the default) picks the strategy's natural one (verl's
    with `rl`; OpenRLHF's when the program is `-m openrlhf.cli.train_ppo_ray`)."""
    script: str | None = None
    """Training script to run. Default: the reference trainer (verl, OpenRLHF: its PPO entry point)."""
    args: tuple[str, ...] = spec((), items={"minLength": None})
    """Arguments passed to the script. Default: none."""
    master_addr: str | None = None
    """Address of rank 0's node; several nodes need it, or a platform that names it (SLURM,
    SkyPilot, dstack, Kubeflow). Inside a SLURM allocation its first host is rank 0's node
    and wins over this (a note says so). Default: none."""
    master_port: int = spec(29500, minimum=1, maximum=65_535)
    """TCP port of the rendezvous on `master_addr`. Default 29500."""
    hostfile: str | None = None
    """DeepSpeed hostfile, for several nodes where distrecipe runs on node 0 only and DeepSpeed
    fans out over ssh; a platform that ranks every node needs none. Default: none."""
    program_kind: Literal["auto"] | ProgramKind = AUTO
    """How the script reads the recipe; `auto` (the default) infers it from the script's imports."""
    slurm: Slurm = field(default_factory=Slurm)
    """`#SBATCH` settings for `launch --slurm`. Default: placeholders where only the cluster knows."""
    skypilot: SkyPilot = field(default_factory=SkyPilot)
    """Task settings for `launch --skypilot`. Default: see `SkyPilot`."""
    k8s: K8s = field(default_factory=K8s)
    """Image and resources for `launch --k8s`. Default: a placeholder image, the cluster's defaults."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Recipe:
    """A recipe as declared (format version 1), after schema validation."""

    name: str = spec(optional=True, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$", minLength=None,
                     title="a safe slug (letters, digits, '.', '_' and '-', starting with a letter or digit, "
                           "at most 128 characters)")
    """The job's name: it names the run directory and the SLURM job, so it is data, never a
    path or code. Defaults to the recipe file's stem made a slug (`name_from_file`, with a
    note where that changes it)."""
    model: Model
    """The model's shape. Required."""
    cluster: Cluster
    """Nodes and ranks per node. Required."""
    strategy: Strategy
    """How the model is distributed: `ddp`, `zero`, `fsdp` or `megatron`. Required."""
    stage: int | None = spec(None, minimum=0, maximum=3)
    """ZeRO stage 0..3 (fsdp: 2 = `reshard_after_forward` false, 3 = true); unset (the default)
    means the strategy's natural stage."""
    fsdp_version: int | None = spec(None, nullable=True, minimum=1, maximum=2)
    """Which torch FSDP `strategy: fsdp` runs: 2, `fully_shard` (what distrecipe writes unless told
    otherwise), or 1, the `FullyShardedDataParallel` wrapper (Accelerate's `fsdp_version`, the
    Trainer's `fsdp_config.version`, verl's `strategy: fsdp`; a script's own choice of
    wrapper). Unset or null (the default): what the recipe's native keys say, else 2."""
    offload: Offload = field(default_factory=Offload)
    """Where optimizer state and parameters live. Default: all on the accelerator."""
    kernels: Kernels = field(default_factory=Kernels)
    """Compile, loss and fused kernels, for `plan`. Default: eager Hugging Face's."""
    parallel: Parallel = field(default_factory=Parallel)
    """Model-parallel degrees. Default: none (every rank is data parallel)."""
    batch: Batch
    """The batch arithmetic. Required."""
    precision: Literal["auto"] | Precision = "bf16"
    """Training dtype of parameters and activations: `bf16` (the default), `fp16`, `fp32`; or
    `auto`, what an HF Trainer template says (`"enabled": "auto"`): the Trainer's `--bf16` /
    `--fp16` decide, the files leave it to them, and `plan` assumes bf16 (and says so)."""
    optimizer: Optimizer | None = None
    """The optimizer. Default: none stated, so the training script builds its own (or the
    engine its default one); nothing is written for it."""
    reduce_dtype: Dtype | None = None
    """dtype gradients are reduced across data-parallel ranks in (and Megatron keeps its
    gradient buffer in): `fp32` or `bf16`. Default: the engine's own: fp32 under Megatron
    (`grad_reduce_in_fp32`, as verl sets it), torchtitan and verl's FSDP2; the training dtype
    under Accelerate's FSDP2 and DeepSpeed; fp32 under DDP, whose parameters are fp32."""
    schedule: Schedule | None = None
    """The learning-rate schedule and the run's length. Default: none stated (the engine's
    or the script's)."""
    grad_clip: float | None = spec(None, nullable=True, minimum=0, maximum=1e9)
    """Max gradient norm; 0 or null disables clipping. Default: the engine's (DeepSpeed, the
    Trainer and verl clip at 1.0)."""
    activation_checkpointing: Recompute = spec("none", written=RECOMPUTE_FORM)
    """What the backward recomputes: `none` (the default, written false); `full` (written true:
    every block wrapped whole, torch's checkpoint_wrapper, HF gradient_checkpointing);
    `selective` (torchtitan's op-level policy: saves matmul outputs except every second one,
    and attention outputs); `{mode: selective, every: k}` (torchtitan's layer-level policy)."""
    rl: RL | None = None
    """verl's RL batch; `None` (the default) for supervised training."""
    checkpoint: Checkpoint | None = None
    """What checkpoints hold and how often they are saved. Default: none stated (the engine's)."""
    launch: Launch = field(default_factory=Launch)
    """How the job starts. Default: the strategy's launcher running the reference trainer."""
    recompute_every: int | None = spec(None, key="activation_checkpointing.every", minimum=1)
    """With mode selective: wrap every k-th block whole (torchtitan's layer-level
    `selective_ac_option`) instead of op-level selection."""
    native: Native = field(default_factory=Native)
    """Engine settings carried verbatim (see `Native`). Default: none."""
    source: str = spec("<recipe>", key=None)
    """The file the recipe came from, for messages."""
    where: dict[str, Position] = field(default_factory=dict, compare=False, repr=False,
                                       metadata={"key": None})
    """Dotted key → where its value was written, so resolution errors point at it."""
    derived: dict[str, str] = field(default_factory=dict, compare=False, repr=False,
                                    metadata={"key": None})
    """Dotted key → where a value the recipe did not write came from (`model.hf_config
    config.json: num_local_experts`), for `resolve`'s provenance."""

    def at(self, *keys: str) -> Position:
        """Position of the first of `keys` that was written, else the file's start; either
        carries `keys`, so a refusal made at it names them (`DistrecipeError.keys`)."""
        for key in keys:
            if key in self.where:
                found = self.where[key]
                return Position(found.file, found.line, found.col, keys)
        return Position(self.source, 1, 1, keys)


NAME_LENGTH = 128
"""The longest `name` (the schema's pattern allows 1 + 127 characters)."""


def slug(text: str) -> str:
    """`text` made a valid `name` (the schema's pattern), the same text always the same slug.

    A name a file's stem supplies (`import` of `My Config (v2).json`) must still name a
    run directory and a SLURM job safely: accents are dropped to ASCII, each run of other
    characters becomes one `-`, and what may not start a name is trimmed; nothing left
    gives `imported`.
    """
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    dashed = re.sub(r"[^A-Za-z0-9._-]+", "-", ascii_text).lstrip("._-")
    return dashed[:NAME_LENGTH].rstrip("-") or "imported"


def name_from_file(file: str) -> tuple[str, str | None]:
    """The name a recipe takes where it writes none (and an import's): its file's stem
    made a `slug`, and, where that changed it, a note saying so: the name names the run
    directory and the SLURM job, so the user sees which."""
    stem = PurePath(file).stem
    name = slug(stem)
    if name == stem:
        return name, None
    return name, (f"name {json.dumps(name)} is derived from the file name "
                  f"{json.dumps(stem, ensure_ascii=False)}, made a slug as a name must be")


def batch_from_script(batch: object) -> bool:
    """A recipe's `batch` mapping writes `micro: auto` and `global: auto` on purpose: the
    training script decides the batch (an HF Trainer template's `"auto"`, an Accelerate
    config, which has no batch keys), as `import` writes such a file. Nothing fixes the
    batch, so resolve refuses it until `--set` gives a number; lint has nothing to check
    yet, as with `gpus_per_node: auto` and no world. Read from the document, since a
    `Batch` cannot tell a written `auto` from an omitted one."""
    return isinstance(batch, dict) and batch.get("micro") == AUTO and batch.get("global") == AUTO


def field_key(section: str, item: Field[Any]) -> str | None:
    """A field's dotted key as a recipe writes it (`batch.global` for `Batch.global_`), or
    None for what is not part of the job (the recipe's file and positions)."""
    if "key" in item.metadata:
        key: str | None = item.metadata["key"]
        return key
    return f"{section}.{item.name}" if section else item.name


def field_defaults() -> dict[str, object]:
    """Every recipe field's default, dotted key → value, walked from the dataclasses as
    `recipe_values` walks a recipe: a field a recipe must state, or the loader fills (`name`),
    has none, and a section is its fields."""
    out: dict[str, object] = {}
    _defaults(Recipe, "", out)
    return out


def _defaults(cls: Any, section: str, out: dict[str, object]) -> None:
    hints = get_type_hints(cls)
    for item in fields(cls):
        key = field_key(section, item)
        if key is None:
            continue
        if item.name in _sections(cls):
            hint = hints[item.name]
            args = get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
            _defaults(next(arg for arg in args if is_dataclass(arg)), key, out)
        elif item.default is not MISSING:
            out[key] = item.default
        elif item.default_factory is not MISSING:
            out[key] = item.default_factory()


def recipe_values(recipe: Recipe) -> dict[str, object]:
    """Every field of the recipe as dotted key → value, walked from the dataclasses, so a
    field added to the format is listed (and so compared and explained) without anyone
    listing it again; `native` key by key (verl's overrides by their dotted key, the last
    line winning as in Hydra, a `~key` deletion as null as a native mapping's null), a
    section left out (`rl: null`) as nothing."""
    out: dict[str, object] = {}
    _walk(recipe, "", out)
    return out


def _walk(node: Any, section: str, out: dict[str, object]) -> None:
    for name, key, section_field in _keys(node.__class__, section):
        value = getattr(node, name)
        if not section_field:
            out[key] = value
        elif isinstance(value, Native):
            _native(value, out)
        elif value is not None:
            _walk(value, key, out)


@cache
def _keys(cls: Any, section: str) -> tuple[tuple[str, str, bool], ...]:
    """(field name, dotted key, holds a section) for `cls`'s fields written in a recipe:
    `recipe_values` runs for every plan resolved (`plan --search` resolves thousands)."""
    sections = _sections(cls)
    out = []
    for item in fields(cls):
        key = field_key(section, item)
        if key is not None:
            out.append((item.name, key, item.name in sections))
    return tuple(out)


@cache
def _sections(cls: type[object]) -> frozenset[str]:
    """The fields of `cls` that hold a section (a dataclass, or None for a section left out)."""
    hints = get_type_hints(cls)
    return frozenset(name for name, hint in hints.items()
                     if any(is_dataclass(arg) for arg in (get_args(hint) if isinstance(hint, types.UnionType)
                                                          else (hint,))))


def _native(native: Native, out: dict[str, object]) -> None:
    for engine in ("deepspeed", "accelerate", "hf", "trl"):
        _leaves(getattr(native, engine), f"native.{engine}", out)
    for line in native.verl:
        item = split_override(line)
        if item is not None:  # the schema admits no other line
            out[f"native.verl.{item.key}"] = None if item.prefix == "~" else item.value


def _leaves(node: object, key: str, out: dict[str, object]) -> None:
    if isinstance(node, dict) and node:
        for name, value in node.items():
            _leaves(value, f"{key}.{name}", out)
    elif isinstance(node, dict):
        if key.count(".") > 1:  # an empty mapping written under an engine is a value
            out[key] = node
    else:
        out[key] = node
