"""Seconds per optimizer step, tokens per second per GPU and MFU, from FLOPs and bytes.

* **Model FLOPs** per token, as torchtitan, llm-foundry and the PaLM paper count them
  for MFU: 6 × (Ψ − embedding) for the matrix multiplies forward and backward (Ψ the
  active parameters: a mixture of experts' k routed experts, `model_shapes.active_params`), plus
  12 · layers · hidden · seq_len for attention's scores and values over the full square
  (torchtitan's `get_num_flop_per_token`: "we follow the convention and do not account
  for sparsity in causal attention"; llm-foundry's `flops_per_batch` likewise). Time is
  charged on the same count: a causal kernel runs half the square, but FlashAttention
  reaches a lower share of the peak than the matmuls, and on the published runs
  charging the half at the matmuls' efficiency made long sequences 50–86 % too fast
  (docs/plan.md, "Step time").
* **Hardware FLOPs** add what checkpointing recomputes: full, one more forward
  (2Ψ' + 4·L·h·s); torchtitan's op-level selective policy, every second matmul's
  forward (Ψ'); every k-th block wrapped, a k-th of a forward.
* **Compute** is the hardware FLOPs one GPU runs per step over the GPU's dense bf16
  peak times an achieved efficiency (`hardware.Hardware.efficiency`), calibrated on the published runs
  (`tests/plan/test_steptime.py` reports the error on each one).
* **Communication** is the engine view's bytes (`traffic.engine`, the same numbers
  `plan` prints) over the bandwidth they cross: NVLink inside a node, the network
  once the data-parallel group spans nodes, at one NIC's rate for each of the group's
  ranks on a node (`ring_bandwidth`; under hybrid sharding only the replicas'
  all-reduce leaves the node); plus tensor parallelism's activation all-reduces,
  inside the node. Each data-parallel collective also pays NCCL's latency, call by call
  (`network`: ring or tree, per hop, as NCCL's tuning model prices them; `calls`,
  `collective_group`), which is what makes a weak-scaling run slow down with its world
  (docs/plan.md, "Scale and the network"). The engine hides part of it behind compute
  (`overlap`); the rest adds to the step.
* **Context parallelism** (`parallel.sequence`) under torch's ring attention
  (torchtitan, Accelerate; `activations.ring_context_parallel`): per layer, forward
  all-gathers K and V (all heads, 4·s·b·h bytes for the whole sequence, each rank
  sending (cp−1)/cp of it); backward gathers them again and passes the fp32 dK/dV
  around the ring once per step, cp sends of 8·(s/cp)·b·h; a full recompute repeats the
  forward's. `_templated_ring_attention` issues the gather before the local block's
  attention and waits for it at the next one, so it hides behind attention's compute
  (the 12·L·h·s share of the FLOPs) and only the rest is exposed. Ulysses (DeepSpeed,
  verl) all-to-alls q, k, v and the output, 4 × 2·(s/cp)·b·h per layer forward and as
  much backward, not overlapped.
* **Expert parallelism** (`parallel.expert`): the token dispatcher's all-to-alls, each
  token's h elements to its k experts' ranks and back, forward and backward
  (`expert_parallel_bytes`), over NVLink for the peers on the node and the NIC for the
  rest, not overlapped (Megatron overlaps them only with its opt-in 1F1B A2A overlap).
* **Pipeline parallelism**: 1F1B (torchtitan's `Schedule1F1B`, Megatron's
  `forward_backward_pipelining_without_interleaving`), whose bubble makes each stage
  idle (p−1) micro-batch slots out of m + p − 1 (Narayanan et al. 2021, §2.2.1):
  compute × (m + p − 1) / m with m = accumulation. With `parallel.virtual_stages` v,
  Megatron's interleaved 1F1B gives each rank v chunks of L/(p·v) layers, so a slot
  is a v-th as long and the bubble (p−1)/(v·m) of the ideal step (§2.2.2). Each
  micro-batch sends its activations to the next stage and its gradients back,
  s/cp · b · h / t 16-bit elements each way, once per chunk boundary: v times under
  interleaving ("the amount of communication also increases by v", §2.2.2); on the
  network once stages span nodes (the pipeline dimension is outermost in torchtitan's
  and Megatron's meshes); not overlapped (verl turns on Megatron's `overlap_p2p_comm`
  with virtual stages, which this leaves out: a cautious reading).
* **Eager attention** (`model.attention: eager`) writes the s² scores to memory and
  reads them back (`attention_kernel_seconds`): its share of the compute (the
  12·L·h·s of the FLOPs) runs `EAGER_ATTENTION_SLOWDOWN` times slower than the fused
  kernels the calibration ran (docs/plan.md, "Kernels").
* **Offload** adds, unhidden, the PCIe copies (16-bit gradients down and parameters up
  once per step; at stage 3 with parameters offloaded, every micro-step's gathers come
  up too) and the CPU optimizer step (`CPU_ADAM_PARAMS_PER_S` per rank). Read from the
  engines' sources, not measured: an estimate of its order only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from distrecipe.engines.runner import runs_fsdp2, uses_deepspeed
from distrecipe.job import Plan
from distrecipe.model_shapes import active_params, kv_width
from distrecipe.plan import network, traffic
from distrecipe.plan.activations import ring_context_parallel, sequence_parallel
from distrecipe.plan.efficiency import Efficiency, efficiency, matmul_factor
from distrecipe.plan.engine import DeepSpeedZero, fsdp2_shard_ranks
from distrecipe.plan.hardware import Hardware, hardware
from distrecipe.plan.memory import local_params, reduce_ranks, shard_ranks

EAGER_ATTENTION_SLOWDOWN = 3.0
"""How much slower the attention core runs eager than fused: FlashAttention-2 (Dao 2023,
arXiv 2307.08691, §4.1) measures it 3–10× faster than a standard PyTorch attention on
A100, forward and backward, sequences 512–16K; the low end, so the term is a floor."""
PCIE = 25e9
"""Bytes per second one GPU copies to or from host memory (PCIe 4 ×16, achieved)."""
CPU_ADAM_PARAMS_PER_S = 1e9
"""Parameters per second one rank's CPU Adam updates (DeepSpeed's vectorised CPUAdam:
about a second per billion parameters on a server core group)."""


def attention_kernel_seconds(plan: Plan, compute: float) -> float:
    """Seconds eager attention adds to `compute` (the step's matmul seconds, recompute
    included): attention's share of them run `EAGER_ATTENTION_SLOWDOWN` times as long.
    Megatron's unfused core attention (`FusedScaleMaskSoftmax`) is what its efficiency was
    calibrated on (BLOOM's runs): no term there."""
    if plan.recipe.model.attention != "eager" or plan.recipe.strategy == "megatron":
        return 0.0
    return compute * attention_share(plan) * (EAGER_ATTENTION_SLOWDOWN - 1)


def offload_seconds(plan: Plan) -> float:
    """Seconds an offloaded step spends on PCIe and in the CPU optimizer (not hidden), and
    with `offload.activations: cpu` each micro-step's checkpointed inputs going down in
    forward and coming back before their recompute (DeepSpeed copies them synchronously)."""
    seconds = 0.0
    m = plan.recipe.model
    if plan.recipe.offload.activations != "none" and m.layers and m.hidden_size and plan.recipe.batch.seq_len:
        tokens = plan.batch.micro * -(-plan.recipe.batch.seq_len // plan.dims.sequence)
        per_layer = 2.0 * tokens * m.hidden_size / plan.dims.tensor
        seconds += 2 * per_layer * m.layers / plan.dims.pipeline * plan.batch.accumulation / PCIE
    if not plan.recipe.offload.enabled or m.params is None:
        return seconds
    shard = m.params / plan.dims.model_shards / shard_ranks(plan)
    lp = plan.precision_bytes
    if plan.recipe.offload.optimizer != "none" or runs_fsdp2(plan):
        seconds += 2 * lp * shard / PCIE + shard / CPU_ADAM_PARAMS_PER_S
    if plan.recipe.offload.params != "none":
        seconds += 2 * plan.batch.accumulation * lp * shard / PCIE
    return seconds


Window = str
"""What a collective can hide behind: `step` (every micro-step's forward and backward),
`backward` (every micro-step's backward), `last backward` (the last micro-step's
backward only: reductions deferred with `no_sync`), `first forward` (the next step's
first forward: Megatron's `overlap_param_gather`), `attention` (attention's share of the
compute: ring context parallelism), `none`."""


def windows(plan: Plan, zero: DeepSpeedZero | None) -> dict[str, Window]:
    """Each data-parallel collective's window, by engine (what each engine overlaps):

    * FSDP2: every gather is prefetched (`step`); reduce-scatters and HSDP's all-reduce
      run in each micro-step's backward.
    * DeepSpeed ZeRO-3: gathers prefetched; reduce-scatter in backward with
      `overlap_comm`, else after it (`none`).
    * DeepSpeed ZeRO-1/2: ZeRO-2 reduces in every micro-step's backward, ZeRO-1 at the
      accumulation boundary only (the last backward), both only with `overlap_comm`; the
      parameter all-gather runs after `step()`, before the next forward (`none`).
      ZeRO-0 all-reduces after backward (`none`).
    * torch DDP: buckets all-reduced during the last micro-step's backward (`no_sync`).
    * Megatron-Core: the gradient reduce-scatter during the last micro-step's backward
      (`overlap_grad_reduce`), the parameter all-gather during the next step's first
      forward (`overlap_param_gather`), as the published runs set them.
    """
    if plan.recipe.strategy == "megatron":
        if plan.backend in ("deepspeed", "accelerate-deepspeed"):  # DeepSpeed's optimizer
            return {"all-reduce gradients": "none", "reduce-scatter gradients": "none",
                    "all-gather parameters": "none"}
        return {"all-reduce gradients": "last backward", "reduce-scatter gradients": "last backward",
                "all-gather parameters": "first forward"}
    if runs_fsdp2(plan):
        return {"all-gather parameters": "step", "all-gather parameters (backward)": "step",
                "reduce-scatter gradients": "backward", "all-reduce shard across replicas": "backward"}
    if not uses_deepspeed(plan):
        return {"all-reduce gradients": "last backward"}
    zero = zero or DeepSpeedZero.at_defaults(plan.stage)
    overlapped = zero.overlap_comm
    if zero.stage == 3:
        return {"all-gather parameters": "step", "all-gather parameters (backward)": "step",
                "all-gather parameters (later micro-steps)": "step",
                "reduce-scatter gradients": "backward" if overlapped else "none"}
    if zero.stage == 0:
        return {"all-reduce gradients": "none"}
    reduce = ("backward" if zero.stage == 2 else "last backward") if overlapped else "none"
    return {"all-reduce gradients": reduce, "reduce-scatter gradients": reduce,
            "all-gather parameters": "none"}


def overlap(plan: Plan, zero: DeepSpeedZero | None) -> float:
    """Fraction of the step's compute the gradient reduction hides behind (`windows`): the
    summary `plan` quotes; `step_time` prices each collective in its own window."""
    forward = 1 / 3
    sizes = {"step": 1.0, "backward": 1 - forward, "last backward": (1 - forward) / plan.batch.accumulation,
             "first forward": forward / plan.batch.accumulation, "none": 0.0}
    found = windows(plan, zero)
    name = next((n for n in ("reduce-scatter gradients", "all-reduce gradients") if n in found), None)
    return sizes[found[name]] if name else 0.0


@dataclass(frozen=True, slots=True)
class StepTime:
    seconds: float
    compute: float
    """Seconds of matrix multiplies (recompute included) at the calibrated efficiency."""
    communication: float
    """Seconds the data-, tensor-, context- and pipeline-parallel traffic takes on its links."""
    exposed: float
    """Of `communication`, seconds not hidden behind compute."""
    bubble: float
    """Seconds pipeline stages idle in the (interleaved) 1F1B schedule's fill and drain."""
    offload: float
    """Seconds of host copies and the CPU optimizer step (`offload_seconds`), not hidden."""
    tokens_per_s_per_gpu: float
    mfu: float
    """Model FLOPs (no recompute) per second over the peak."""
    hardware: Hardware
    efficiency: Efficiency
    """The engine family × GPU generation figure (`efficiency.efficiency`)."""
    matmul: float
    """The matmuls' size factor (`efficiency.matmul_factor`): compute runs at
    efficiency × matmul of the peak."""
    exposed_by: dict[str, float]
    """Of `exposed`, seconds by kind: data parallel, tensor, context, pipeline."""
    attention: float = 0.0
    """Seconds eager attention's score traffic adds (`attention_kernel_seconds`)."""
    latency: float = 0.0
    """Of `communication`, seconds the data-parallel collectives spend in NCCL's per-call and
    per-hop latency (`network`), hidden or not as the rest of their collective is."""


def model_flops_per_token(plan: Plan) -> float:
    """6Ψ' + 12·L·h·s with Ψ' = the active parameters (`model_shapes.active_params`: a mixture
    of experts counts the k routed experts a token visits) less the input embedding
    (None-safe: 6Ψ without a shape)."""
    m = plan.recipe.model
    psi = float(active_params(m) or 0)
    if m.vocab and m.hidden_size:
        psi -= m.vocab * m.hidden_size
    seq_len = plan.recipe.batch.seq_len or 0
    attention = 12 * m.layers * m.hidden_size * seq_len if m.layers and m.hidden_size else 0
    return 6 * psi + attention


def recompute_flops_per_token(plan: Plan) -> float:
    """FLOPs per token the backward spends recomputing the forward, by checkpointing mode."""
    forward = model_flops_per_token(plan) / 3
    if plan.recipe.activation_checkpointing == "full":
        return forward
    if plan.recipe.activation_checkpointing == "selective":
        if plan.recipe.recompute_every:
            return forward / plan.recipe.recompute_every
        m = plan.recipe.model
        psi = float(active_params(m) or 0) - (m.vocab or 0) * (m.hidden_size or 0)
        return psi  # half of the matmuls' forward, 2Ψ' / 2
    return 0.0


def tensor_parallel_bytes(plan: Plan) -> float:
    """Activation all-reduces one rank sends per step under tensor parallelism.

    Megatron-style TP all-reduces a block's output twice in forward and twice in
    backward (attention and MLP), each s·b·h 16-bit elements; a recomputed forward
    repeats the forward's two.
    """
    m = plan.recipe.model
    if plan.dims.tensor == 1 or not (m.layers and m.hidden_size and plan.recipe.batch.seq_len):
        return 0.0
    per_layer = 4 + (2 if plan.recipe.activation_checkpointing == "full" else 0)
    elements = plan.recipe.batch.seq_len * plan.batch.micro * m.hidden_size / plan.dims.sequence
    return (plan.batch.accumulation * m.layers / plan.dims.pipeline * per_layer
            * 2 * traffic.ring(plan.dims.tensor) * plan.precision_bytes * elements)


def context_parallel_bytes(plan: Plan) -> float:
    """Bytes one rank sends per step for context / sequence parallelism (module docstring)."""
    m = plan.recipe.model
    cp = plan.dims.sequence
    if cp == 1 or not (m.layers and m.hidden_size and plan.recipe.batch.seq_len):
        return 0.0
    sbh = plan.recipe.batch.seq_len * plan.batch.micro * m.hidden_size / plan.dims.tensor
    layers = plan.batch.accumulation * m.layers / plan.dims.pipeline
    if plan.recipe.strategy == "megatron" and m.heads:  # Transformer Engine's p2p ring: K/V at kv heads
        width = kv_width(m.hidden_size, m.heads, m.kv_heads, m.head_dim)
        kv = plan.recipe.batch.seq_len * plan.batch.micro * width / plan.dims.tensor
        forwards = 2 if plan.recipe.activation_checkpointing == "full" else 1
        return layers * (forwards * 4 * kv + 8 * kv) * traffic.ring(cp)
    if not ring_context_parallel(plan):  # Ulysses: q, k, v and output, forward and backward
        passes = 3 if plan.recipe.activation_checkpointing == "full" else 2
        return layers * passes * 4 * 2 * sbh / cp * traffic.ring(cp)
    gather = 4 * sbh * traffic.ring(cp)
    forwards = 2 if plan.recipe.activation_checkpointing == "full" else 1
    return layers * ((forwards + 1) * gather + 8 * sbh)


def expert_parallel_bytes(plan: Plan) -> float:
    """Token dispatch and combine one rank sends per step under expert parallelism.

    The all-to-all token dispatcher (Megatron-Core's `MoEAlltoAllTokenDispatcher`,
    DeepSpeed MoE's `_AllToAll`) sends each token a rank holds to the ranks of its k routed
    experts and back (dispatch, combine), h 16-bit elements a token-expert pair, in forward
    and again in backward for their gradients; a full recompute repeats the forward's two.
    With the experts spread evenly and routing balanced, (ep − 1)/ep of the pairs leave the
    rank. A rank holds s·b/cp tokens, s·b/(cp·t) under Megatron's sequence parallelism."""
    m = plan.recipe.model
    ep, seq_len = plan.recipe.parallel.expert, plan.recipe.batch.seq_len
    if ep == 1 or not (m.experts and m.experts_per_token and m.layers and m.hidden_size and seq_len):
        return 0.0
    tokens = seq_len * plan.batch.micro / plan.dims.sequence
    if sequence_parallel(plan):
        tokens /= plan.dims.tensor
    passes = 4 + (2 if plan.recipe.activation_checkpointing == "full" else 0)
    moe_layers = (m.layers - m.dense_layers) / plan.dims.pipeline
    return (plan.batch.accumulation * moe_layers * passes * tokens * m.experts_per_token * m.hidden_size
            * plan.precision_bytes * (ep - 1) / ep)


def expert_parallel_seconds(plan: Plan, hw: Hardware) -> float:
    """`expert_parallel_bytes` over the links they cross: Megatron orders ranks tensor,
    context, expert, so an expert group spans ep × t × cp consecutive ranks; the share of a
    rank's peers on its node goes over NVLink, the rest over its own NIC (`hw.inter`)."""
    sent = expert_parallel_bytes(plan)
    if not sent:
        return 0.0
    ep, d = plan.recipe.parallel.expert, plan.dims
    on_node = max(1, min(ep, d.gpus_per_node // (d.tensor * d.sequence)))
    away = (ep - on_node) / (ep - 1)
    return sent * (1 - away) / hw.intra + sent * away / hw.inter


def attention_share(plan: Plan) -> float:
    """Of the model FLOPs, attention's scores and values (what ring attention's
    all-gather hides behind)."""
    m = plan.recipe.model
    total = model_flops_per_token(plan)
    if not (m.layers and m.hidden_size and plan.recipe.batch.seq_len and total):
        return 0.0
    return 12 * m.layers * m.hidden_size * plan.recipe.batch.seq_len / total


def bubble(plan: Plan) -> float:
    """Fraction of a 1F1B step a pipeline stage idles: (p − 1) / (v·m + p − 1), the
    idle (p − 1)/(v·m) of the ideal step over the whole (Narayanan §2.2.2; v = 1 is
    plain 1F1B)."""
    p, m, v = plan.dims.pipeline, plan.batch.accumulation, plan.dims.virtual_stages
    return (p - 1) / (v * m + p - 1)


def pipeline_bytes(plan: Plan) -> float:
    """Activations and their gradients one stage sends to its neighbours per step: once
    per micro-batch and model chunk (v chunks under interleaving)."""
    m = plan.recipe.model
    if plan.dims.pipeline == 1 or not (m.hidden_size and plan.recipe.batch.seq_len):
        return 0.0
    tokens = plan.recipe.batch.seq_len * plan.batch.micro
    elements = tokens * m.hidden_size / (plan.dims.sequence * plan.dims.tensor)
    return plan.dims.virtual_stages * plan.batch.accumulation * 2 * plan.precision_bytes * elements


def ring_bandwidth(hw: Hardware, members_per_node: int) -> float:
    """Bytes per second per rank of a ring collective whose group spans nodes with
    `members_per_node` of its ranks on each.

    NCCL splits the buffer over several rings (channels) that leave each node through
    different NICs, so a ring's per-rank bytes cross the network k times in parallel,
    on each of the group's k GPUs' own NIC (`hw.inter` is one GPU's share): the
    per-rank rate is k × inter, up to what NVLink carries inside the node. This is
    why nccl-tests' bus bandwidth between 8-GPU nodes reaches the sum of the node's
    NICs (NVIDIA/nccl-tests#290: 46–48 GB/s per 400 Gb/s NIC; NVIDIA/nccl#495:
    600 Gb/s over 8 × 100 Gb/s), not one NIC's rate. A group with one rank per node
    (tensor parallelism filling the node, a hybrid shard group's replicas) gets one NIC.
    """
    return min(hw.intra, max(1, members_per_node) * hw.inter)


MEGATRON_BUCKET = 40_000_000
"""Megatron-Core's gradient bucket: max(40M, 1M × data-parallel size) parameters
(`DistributedDataParallel.__init__`, `bucket_size` left None by `--ddp-bucket-size`)."""


def kind_of(name: str) -> str:
    """`all-reduce`, `reduce-scatter` or `all-gather` from a `traffic.Traffic.sent` name."""
    return next(k for k in ("all-reduce", "reduce-scatter", "all-gather") if name.startswith(k))


def calls(plan: Plan, engine_traffic: traffic.Traffic, zero: DeepSpeedZero | None, name: str) -> int:
    """How many NCCL calls one step's collective `name` is made of: what the latency is paid
    per. FSDP2 and ZeRO-3 issue one per wrapped block (the layers and the root) and
    micro-step it runs in; Megatron-Core, DeepSpeed ZeRO-0/1/2 and torch DDP one per bucket
    (Megatron's `MEGATRON_BUCKET`, DeepSpeed's `reduce_bucket_size` and
    `allgather_bucket_size`, DDP's 25 MiB of fp32 gradients), per reduction."""
    psi = local_params(plan)
    m = plan.batch.accumulation
    gathers_once = name == "all-gather parameters"
    if runs_fsdp2(plan) or (uses_deepspeed(plan) and plan.recipe.strategy != "megatron"
                            and (zero or DeepSpeedZero.at_defaults(plan.stage)).stage == 3):
        units = math.ceil((plan.recipe.model.layers or 1) / plan.dims.pipeline) + 1
        hpz = zero is not None and zero.stage == 3 and min(zero.hpz_partition_size, plan.dims.world) > 1
        if hpz and gathers_once:
            return units
        if name == "all-gather parameters (later micro-steps)":
            return units * (m - 1)
        return units * m
    bucket: float
    if plan.recipe.strategy == "megatron" and plan.backend not in ("deepspeed", "accelerate-deepspeed"):
        bucket = max(MEGATRON_BUCKET, 1_000_000 * reduce_ranks(plan))
    elif uses_deepspeed(plan):  # DeepSpeed's optimizer (Megatron-DeepSpeed's too)
        ds = zero or DeepSpeedZero.at_defaults(plan.stage)
        bucket = ds.allgather_bucket_size if gathers_once else ds.reduce_bucket_size
    else:
        bucket = traffic.DDP_BUCKET / 4
    buckets = max(1, math.ceil(psi / bucket))
    return buckets if gathers_once else buckets * engine_traffic.reductions


def collective_group(plan: Plan, hw: Hardware, engine_traffic: traffic.Traffic, zero: DeepSpeedZero | None,
                     name: str) -> network.Group:
    """The ranks collective `name` runs over, the nodes they span and the bus bandwidth.

    Ranks are laid out tensor innermost, then sequence and data, so the data-parallel (×
    sequence) group has gpus_per_node / tensor ranks on each node. Under hybrid sharding the
    shard group's collectives stay inside the node when it fits there, and the replicas'
    all-reduce has one rank per gpus_per_node / (tensor × shard); a shard group spanning
    nodes is priced at one NIC per rank (the cautious reading). DeepSpeed's hpZ keeps its
    later gathers in the group of h; the rest span the whole group.
    """
    dims = plan.dims
    n = reduce_ranks(plan)
    per_node = max(1, dims.gpus_per_node // dims.tensor)
    hybrid = engine_traffic.intra is not None
    intra_hop = hw.intra_hop

    def spanning(ranks: int, members: int) -> network.Group:
        members = max(1, min(ranks, members))
        nodes = 1 if dims.nodes == 1 else -(-ranks // members)
        bus = hw.intra if nodes == 1 else ring_bandwidth(hw, members)
        return network.Group(ranks, nodes, bus, intra_hop, hw.network_hop)

    if hybrid and not uses_deepspeed(plan):
        shards = fsdp2_shard_ranks(plan) if runs_fsdp2(plan) else shard_ranks(plan)
        replica_members = dims.gpus_per_node // (dims.tensor * shards)
        if name == "all-reduce shard across replicas":
            return spanning(max(1, n // shards), replica_members)
        if traffic.in_node(plan, shards):
            return network.Group(shards, 1, hw.intra, intra_hop, hw.network_hop)
        return spanning(shards, replica_members)
    if hybrid and zero is not None and name in ("all-gather parameters (backward)",
                                                "all-gather parameters (later micro-steps)"):
        h = min(zero.hpz_partition_size, dims.world)
        if traffic.in_node(plan, h):
            return network.Group(h, 1, hw.intra, intra_hop, hw.network_hop)
        return spanning(h, per_node)
    if dims.nodes == 1 or n <= 1:
        return network.Group(n, 1, hw.intra, intra_hop, hw.network_hop)
    return spanning(n, per_node)


def collective_cost(plan: Plan, hw: Hardware, engine_traffic: traffic.Traffic, zero: DeepSpeedZero | None,
                    name: str, sent: float) -> tuple[float, float]:
    """Seconds collective `name` takes per step for the `sent` bytes a rank sends in it, and
    of those the latency: each of its `calls` priced by NCCL's model (`network`) on its
    group (`collective_group`)."""
    group = collective_group(plan, hw, engine_traffic, zero, name)
    if group.ranks <= 1 or sent <= 0:
        return 0.0, 0.0
    kind = kind_of(name)
    count = calls(plan, engine_traffic, zero, name)
    passes = 2 if kind == "all-reduce" else 1
    buffer = sent / count / (passes * traffic.ring(group.ranks))
    one = network.cost(kind, buffer, group)
    return count * one.seconds, count * one.latency


def step_time(plan: Plan, engine_traffic: traffic.Traffic, zero: DeepSpeedZero | None) -> StepTime | None:
    """The estimate for `plan`, or None when the GPU's peak is unknown or there is no sequence."""
    hw = hardware(plan)
    recipe, seq_len = plan.recipe, plan.recipe.batch.seq_len
    if hw is None or recipe.cluster.device == "cpu" or not seq_len or not active_params(recipe.model):
        return None  # no peak, no sequence, or the FLOPs unknown (a mixture of experts without its shape)
    achieved = efficiency(plan) if recipe.cluster.peak_tflops is None or recipe.cluster.gpu else Efficiency(
        hw.achieved.value, hw.achieved.basis, hw.achieved.borrowed)
    peak = hw.peak_tflops * 1e12
    size = matmul_factor(plan, peak)
    tokens = plan.batch.global_ * seq_len / plan.dims.world
    model = model_flops_per_token(plan)
    extra = recompute_flops_per_token(plan)
    compute = tokens * (model + extra) / (peak * achieved.value * size)
    eager = attention_kernel_seconds(plan, compute)
    m = plan.batch.accumulation
    forward = compute * (model / 3) / (model + extra) if model + extra else 0.0
    sizes = {"step": compute, "backward": compute - forward, "last backward": (compute - forward) / m,
             "first forward": forward / m, "none": 0.0}
    found = windows(plan, zero)
    by_window: dict[str, float] = {}
    latency = 0.0
    for name, sent in engine_traffic.sent.items():
        window = found.get(name, "none")
        seconds, waited = collective_cost(plan, hw, engine_traffic, zero, name, sent)
        latency += waited
        by_window[window] = by_window.get(window, 0.0) + seconds
    dp_seconds = sum(by_window.values())
    dp_exposed = sum(max(0.0, seconds - sizes[window]) for window, seconds in by_window.items())
    # A prefetched collective still waits for its first gather and its last reduction in
    # each micro-step: one block's worth (FSDP2, ZeRO-3).
    layers = (recipe.model.layers or 1) / plan.dims.pipeline
    prefetched = by_window.get("step", 0.0)
    dp_exposed += min(prefetched, 2 * prefetched / layers) if prefetched else 0.0
    tp_seconds = tensor_parallel_bytes(plan) / hw.intra
    tp_exposed = max(0.0, tp_seconds - compute) if recipe.parallel.tensor_overlap else tp_seconds
    # Ranks are laid out tensor innermost, then sequence: cp spans nodes past the node's size.
    cp_link = (hw.intra if plan.dims.tensor * plan.dims.sequence <= plan.dims.gpus_per_node
               else ring_bandwidth(hw, plan.dims.gpus_per_node // plan.dims.tensor))
    cp_seconds = context_parallel_bytes(plan) / cp_link
    ring = ring_context_parallel(plan) or recipe.strategy == "megatron"
    cp_hidden = attention_share(plan) * compute if ring else 0.0
    dims = plan.dims
    pp_link = hw.inter if dims.world // dims.pipeline >= dims.gpus_per_node and dims.nodes > 1 else hw.intra
    pp_seconds = pipeline_bytes(plan) / pp_link
    idle = compute * bubble(plan) / (1 - bubble(plan))
    ep_seconds = expert_parallel_seconds(plan, hw)  # the dispatcher's all-to-alls wait on their tokens
    exposed_by = {"data parallel": dp_exposed, "tensor parallel": tp_exposed,
                  "context parallel": max(0.0, cp_seconds - cp_hidden), "pipeline": pp_seconds}
    if ep_seconds:
        exposed_by["expert parallel"] = ep_seconds
    exposed = sum(exposed_by.values())
    host = offload_seconds(plan)
    seconds = compute + idle + exposed + host + eager
    return StepTime(
        seconds=seconds,
        compute=compute,
        communication=dp_seconds + tp_seconds + cp_seconds + pp_seconds + ep_seconds,
        exposed=exposed,
        bubble=idle,
        offload=host,
        tokens_per_s_per_gpu=tokens / seconds,
        mfu=model * tokens / seconds / peak,
        hardware=hw,
        efficiency=achieved,
        matmul=size,
        exposed_by=exposed_by,
        attention=eager,
        latency=latency,
    )
