"""The two intermediate forms: the declared `Recipe` and the resolved `Plan`.

A `Recipe` is what the user wrote, after schema validation: typed, immutable, and
still allowed to say ``"auto"``. A `Plan` is what every view (emitters, plan, lint,
diff, launch) consumes: every ``auto`` filled, every invariant proven, and each
resolved value carrying its provenance so the Plan can be explained field by field.
Keeping the two apart (as torchtitan keeps its config apart from `ParallelDims`)
means no consumer ever has to ask "was this resolved yet?".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from distrecipe.errors import Position

AUTO: Literal["auto"] = "auto"

Strategy = Literal["ddp", "zero", "fsdp", "megatron"]
OffloadDevice = Literal["none", "cpu", "nvme"]
Precision = Literal["bf16", "fp16", "fp32"]
Device = Literal["gpu", "cpu"]
Recompute = Literal["none", "selective", "full"]
Attention = Literal["eager", "sdpa", "flash"]
Backend = Literal["deepspeed", "accelerate", "accelerate-deepspeed", "torchrun", "verl"]
OptimizerName = Literal["adamw", "adam", "sgd"]
AutoInt = int | Literal["auto"]

STRATEGIES: tuple[Strategy, ...] = ("ddp", "zero", "fsdp", "megatron")
PRECISION_BYTES: dict[Precision, int] = {"bf16": 2, "fp16": 2, "fp32": 4}


@dataclass(frozen=True, kw_only=True)
class Model:
    """The model's shape; enough for bucket sizes, memory and activation estimates."""

    params: int | None = None
    """Parameter count Ψ. Computed from the shape when a Hugging Face config is given."""
    hidden_size: int | None = None
    layers: int | None = None
    heads: int | None = None
    kv_heads: int | None = None
    """Key/value heads (grouped-query attention); defaults to `heads`."""
    intermediate_size: int | None = None
    vocab: int | None = None
    layer_cls: str | None = None
    """The transformer block's class name, for FSDP's transformer auto-wrap policy."""
    attention: Attention = "flash"
    """Attention kernel: `eager` stores the s² scores, `sdpa`/`flash` do not."""
    tied_embeddings: bool = False
    hf_config: str | None = None
    """Path of the Hugging Face `config.json` the shape was read from, if any."""


@dataclass(frozen=True, kw_only=True)
class Cluster:
    """Where the job runs. `gpus_per_node` counts ranks per node (CPU processes on `cpu`)."""

    nodes: int = 1
    gpus_per_node: AutoInt = AUTO
    gpu_memory: int | None = None
    """Bytes of memory per accelerator, for the `fits?` verdict."""
    cpu_memory: int | None = None
    """Bytes of host memory per node, for offload."""
    device: Device = "gpu"
    """`cpu` runs every rank as a CPU process with the gloo backend (laptops, CI, demo)."""


@dataclass(frozen=True, kw_only=True)
class Offload:
    """Where optimizer state and parameters live between uses."""

    optimizer: OffloadDevice = "none"
    params: OffloadDevice = "none"
    nvme_path: str | None = None
    pin_memory: bool = True

    @property
    def enabled(self) -> bool:
        """True when anything is offloaded (FSDP2 has one switch for all of it)."""
        return self.optimizer != "none" or self.params != "none"


@dataclass(frozen=True, kw_only=True)
class Parallel:
    """Model-parallel degrees; what is left of the world is data parallel."""

    tensor: int = 1
    pipeline: int = 1
    sequence: int = 1
    shard_group: int | Literal["all"] = "all"
    """Ranks one shard is split over; fewer than the DP world means hybrid sharding."""


@dataclass(frozen=True, kw_only=True)
class Batch:
    """`micro × accumulation × DP = global`; any one or two may be `auto`."""

    micro: AutoInt = AUTO
    accumulation: AutoInt = AUTO
    global_: AutoInt = AUTO
    seq_len: int | None = None


@dataclass(frozen=True, kw_only=True)
class Optimizer:
    name: OptimizerName = "adamw"
    lr: float = 1.0e-5
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1.0e-8
    weight_decay: float = 0.0


@dataclass(frozen=True, kw_only=True)
class RL:
    """verl only: a step's global batch counts sequences, data counts prompts."""

    rollout_n: int
    prompts_per_step: int


@dataclass(frozen=True, kw_only=True)
class Launch:
    backend: Backend | Literal["auto"] = AUTO
    script: str | None = None
    args: tuple[str, ...] = ()
    master_addr: str | None = None
    master_port: int = 29500
    hostfile: str | None = None


@dataclass(frozen=True, kw_only=True)
class Recipe:
    """A recipe as declared (format version 1), after schema validation."""

    name: str
    model: Model
    cluster: Cluster
    strategy: Strategy
    stage: int | None
    """ZeRO stage 0..3; `None` means the strategy's natural stage."""
    offload: Offload
    parallel: Parallel
    batch: Batch
    precision: Precision
    optimizer: Optimizer
    grad_clip: float | None
    activation_checkpointing: Recompute
    rl: RL | None
    launch: Launch
    checkpoint_every: int | None = None
    """With `selective`: wrap every k-th block whole (layer level); None is op level."""
    source: str = "<recipe>"
    """The file the recipe came from, for messages."""
    where: dict[str, Position] = field(default_factory=dict, compare=False, repr=False)
    """Dotted key → where its value was written, so resolution errors point at it."""

    def at(self, *keys: str) -> Position:
        """Position of the first of `keys` that was written, else the file's start."""
        for key in keys:
            if key in self.where:
                return self.where[key]
        return Position(self.source, 1, 1)


@dataclass(frozen=True, kw_only=True)
class Buckets:
    """DeepSpeed's size knobs, resolved from the hidden size the way HF's Trainer does.

    `None` means "leave DeepSpeed's own default" (the hidden size was unknown).
    """

    reduce_bucket_size: int | None
    stage3_prefetch_bucket_size: int | None
    stage3_param_persistence_threshold: int | None


@dataclass(frozen=True, kw_only=True)
class Plan:
    """A fully resolved recipe: the one input of every emitter and view.

    Field names follow the seed's vocabulary: Ψ is `model.params`, N is `dp`.
    """

    name: str
    strategy: Strategy
    stage: int
    offload: Offload
    precision: Precision
    model: Model
    device: Device
    nodes: int
    gpus_per_node: int
    gpu_memory: int | None
    cpu_memory: int | None
    tensor: int
    pipeline: int
    sequence: int
    dp: int
    """Data-parallel world N = nodes × gpus_per_node / (tensor × pipeline × sequence)."""
    shard_group: int
    """Ranks one shard spans; equals `dp` unless sharding is hybrid."""
    micro: int
    accumulation: int
    global_batch: int
    seq_len: int | None
    optimizer: Optimizer
    grad_clip: float | None
    activation_checkpointing: Recompute
    rl: RL | None
    launch: Launch
    buckets: Buckets
    checkpoint_every: int | None = None
    """With `selective` checkpointing: every k-th block wrapped whole; None is op level."""
    provenance: dict[str, str] = field(default_factory=dict)
    """Dotted key → how its value was obtained, e.g. "256 / (2 × 32), from global, micro, DP"."""
    source: str = "<recipe>"

    @property
    def world(self) -> int:
        """Total ranks over all nodes."""
        return self.nodes * self.gpus_per_node

    @property
    def hybrid(self) -> bool:
        """True when shards span fewer ranks than the DP world (HSDP / ZeRO++ hpZ)."""
        return self.shard_group < self.dp

    @property
    def replicas(self) -> int:
        """How many copies of each shard exist (the `replicate` degree of HSDP)."""
        return self.dp // self.shard_group

    @property
    def precision_bytes(self) -> int:
        return PRECISION_BYTES[self.precision]

    def explain(self) -> list[tuple[str, object, str]]:
        """Every resolved value with where it came from, in a stable order."""
        values = plan_values(self)
        return [(key, values[key], self.provenance.get(key, "recipe")) for key in values]


def plan_values(plan: Plan) -> dict[str, object]:
    """The Plan flattened to dotted recipe keys, the vocabulary users wrote in."""
    values: dict[str, object] = {
        "name": plan.name,
        "strategy": plan.strategy,
        "stage": plan.stage,
        "precision": plan.precision,
        "model.params": plan.model.params,
        "model.hidden_size": plan.model.hidden_size,
        "cluster.device": plan.device,
        "cluster.nodes": plan.nodes,
        "cluster.gpus_per_node": plan.gpus_per_node,
        "cluster.world": plan.world,
        "cluster.gpu_memory": plan.gpu_memory,
        "parallel.tensor": plan.tensor,
        "parallel.pipeline": plan.pipeline,
        "parallel.sequence": plan.sequence,
        "parallel.dp": plan.dp,
        "parallel.shard_group": plan.shard_group,
        "offload.optimizer": plan.offload.optimizer,
        "offload.params": plan.offload.params,
        "batch.micro": plan.micro,
        "batch.accumulation": plan.accumulation,
        "batch.global": plan.global_batch,
        "batch.seq_len": plan.seq_len,
        "optimizer.name": plan.optimizer.name,
        "optimizer.lr": plan.optimizer.lr,
        "grad_clip": plan.grad_clip,
        "activation_checkpointing": plan.activation_checkpointing,
        "zero.reduce_bucket_size": plan.buckets.reduce_bucket_size,
        "zero.stage3_prefetch_bucket_size": plan.buckets.stage3_prefetch_bucket_size,
        "zero.stage3_param_persistence_threshold": plan.buckets.stage3_param_persistence_threshold,
        "launch.backend": plan.launch.backend,
    }
    if plan.checkpoint_every is not None:
        values["activation_checkpointing.every"] = plan.checkpoint_every
    if plan.rl is not None:
        values["rl.rollout_n"] = plan.rl.rollout_n
        values["rl.prompts_per_step"] = plan.rl.prompts_per_step
    return values
