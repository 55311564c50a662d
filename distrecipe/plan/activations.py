"""Activation memory per GPU: what ZeRO does not shard.

Bytes for one micro-batch (b sequences of s tokens, h hidden, a heads, L layers, V
vocab), 16-bit activations. Two numbers per estimate: what is *saved* at the end of
forward (`total`: what saved-tensor hooks count), and the *peak* during backward
(`peak`), when the loss's gradients or one recomputed layer are alive on top of it.

* Korthikanti et al. 2022 (arXiv 2205.05198), the seed's: per layer
  s·b·h·(34 + 5·a·s/h); FlashAttention (or their selective recompute, which recomputes
  the attention core) drops the s² term, leaving 34·sbh; full recompute keeps only each
  layer's input, 2·sbh. Output layer 4·sbh·(1 + V/h). 8B (h 4096, 36 layers), one 8K
  sample, flash: 41 GB. Shown beside the other; its peak is its total.
* Llama-family models (Hugging Face's, torchtitan's), measured with saved-tensor hooks
  to 0.05 % (`reference/memory.md`): per layer s·b·h·(20 + 4·h_kv/h + 8·i/h) + 4·a·s·b
  (sdpa/flash; eager stores 6·a·s²·b of scores instead, and K, V repeated to all heads:
  4·sbh for the 4·h_kv/h term), head 4·s·b·V (fp32 log-softmax output) + 8·s·b·h
  + 2·s·b·V (the 16-bit logits the caller holds).

Checkpointing modes, as the engines implement them (`activation_checkpointing`):

* `none`: every layer keeps the above.
* `full`: each block wrapped whole (torch `checkpoint_wrapper`, Hugging Face
  `gradient_checkpointing`, verl `enable_gradient_checkpointing`, Accelerate's
  `fsdp_activation_checkpointing`): 2·sbh per layer (its input), and in backward one
  layer recomputed at a time.
* `selective` (op level, torchtitan's `selective_ac_option: op`): the block runs under
  `create_selective_checkpoint_contexts` with a policy that saves every `mm` output
  except every second one, and the attention kernel's output (+ its fp32 logsumexp);
  everything else is recomputed. In a Llama block the mm's are q, k, v, o, w1, w3, w2,
  so q, v, w1, w2 are saved: 2·s·b·(h + h + h_kv + i + h) + attention output 2·sbh
  + logsumexp 4·a·s·b.
* `{mode: selective, every: k}` (layer level, torchtitan's `selective_ac_option: "k"`):
  every k-th block (the k-th, 2k-th, ...) is wrapped whole, the others keep everything.

The loss: the head computes 16-bit logits, upcasts them to fp32 and takes
`cross_entropy` (log-softmax saved, 4·sbV). In backward, `nll_loss`'s gradient (4·sbV)
and log-softmax's (4·sbV) are alive together with the saved output: 12·sbV, + 2·sbV
when the caller still holds the 16-bit logits (Hugging Face's `CausalLMOutput`;
torchtitan's train step deletes them before `backward()`). With Llama 3's 128,256-token
vocabulary this is the largest single term at 8K tokens.

Tensor parallelism (with sequence parallelism) divides activations by its degree.
Context / sequence parallelism (`parallel.sequence`, cp) gives each rank s/cp of every
sample's tokens: every per-token term above, the layers' and the head's (logits are
s/cp × V per rank), is taken at s/cp. What attention keeps on top depends on the engine:

* torch's context parallel (`torch.distributed.tensor.experimental.context_parallel`,
  which torchtitan's `context_parallel_degree` and Accelerate's `cp_size` run): ring
  attention whose default rotater (`_AllGatherRotater`, `rotate_method="allgather"`)
  all-gathers the K/V chunks once per layer: K and V of the *whole* sequence, at all a
  heads (torchtitan and Hugging Face call SDPA after `repeat_kv`), 4·s·b·h bytes, alive
  while that layer's attention runs, forward and backward. Its backward
  (`_templated_ring_attention_backward`) adds fp32 accumulators for dq, dk, dv
  (12·(s/cp)·b·h), the kernel's 16-bit gradients of each step (6·(s/cp)·b·h) and the
  fp32 dK/dV rotation buffers sent and received (16·(s/cp)·b·h). `ring_attention`
  adds both to the layer alive in backward.
* DeepSpeed Ulysses (`sequence_parallel_size`) and verl's Ulysses: all-to-all turns
  s/cp tokens × a heads into s tokens × a/cp heads around the attention core, so what
  is saved is the same bytes as s/cp tokens × a heads; the all-to-all buffers are one
  layer's q, k, v at that size, transient. Nothing is added.
* Megatron's context parallel (Transformer Engine's `AttnFuncWithCPAndKVP2P`, the default
  `cp_comm_type: p2p`): a ring of point-to-point sends of each rank's K/V chunk (kv heads,
  no `repeat_kv`), so attention holds the chunk being computed on and the one arriving,
  2 × 4·(s/cp)·b·h_kv, and in backward the dK/dV chunk travelling the other way as well
  (`megatron_ring`).

Megatron-Core keeps less than Hugging Face's Llama (`megatron_layer`, the engine family
`strategy: megatron` runs): Korthikanti et al. 2022's terms, generalised to grouped-query
attention and a gated MLP as Transformer Engine's layers save them: each `LayerNormLinear`
its input and its normalised output (2·sbh each, twice a layer), the attention core q
(2·sbh), k and v (4·sb·h_kv), the projection's input (2·sbh), the MLP's fc1 output
(gate and up, 4·sbi) and its activation's output (2·sbi): sbh·(12 + 4·h_kv/h + 6·i/h),
plus the core's 5·a·s²·b without flash (its fp32 softmax statistics, 4·a·s·b, with),
and Korthikanti's dropout masks (2·sbh) only for GPT blocks (Llama-family models train
without dropout: verl's `hidden_dropout` 0). With sequence parallelism
(`parallel.tensor_sequence`, on by default with tensor > 1) all of it is split over
the tensor group; without, the norms' inputs and outputs (8·sbh, 10·sbh for GPT with
its masks) stay whole on every tensor rank (Korthikanti's sbh·(10 + 24/t)). Megatron's
selective recompute (`recompute_granularity: selective`, `recompute_modules: [core_attn]`,
`activation_checkpointing: selective` under megatron) drops the attention core's terms;
full recompute (`recompute_method: uniform`, one layer per checkpoint) keeps each layer's
input, 2·sbh (÷ t with sequence parallelism), and rebuilds one layer at a time. Its head
keeps Korthikanti's 4·sbh·(1 + V/h)/t (vocab-parallel logits and their softmax; the cross
entropy's backward runs in place on the saved softmax). A GPT-shaped recipe (no
`intermediate_size`) takes Korthikanti's GPT terms exactly.

Pipeline parallelism does not divide them: under 1F1B the first stage holds min(p, m)
micro-batches (m = micro-batches per step) of L/p layers (Korthikanti §4.2;
`pipeline_in_flight`). Under Megatron's interleaved 1F1B (`parallel.virtual_stages` v)
each rank holds v chunks of L/(p·v) layers, and pipeline rank r runs
2·(p − r − 1) + (v − 1)·p chunk forwards before its first backward
(`forward_backward_pipelining_with_interleaving`, megatron/core/pipeline_parallel/
schedules.py), all v·m if a step has no more: the first rank holds one more than that,
(p·v + p − 1) chunks = p·(1 + (p − 1)/(p·v)) micro-batches of L/p layers, Korthikanti
§4.2.3's factor; the last rank holds (v − 1)·p + 1 chunks with the head. `plan` uses
the Llama formula when the model's shape has kv heads and intermediate size,
Korthikanti's otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass

from distrecipe.engines.runner import uses_deepspeed
from distrecipe.job import Plan
from distrecipe.model_shapes import kv_width, mlp_width
from distrecipe.plan.stages import Stage, binding, in_flight
from distrecipe.recipe import Recompute


@dataclass(frozen=True, slots=True)
class Activations:
    """One formula's activation bytes per GPU: saved by all layers and the head, and the
    most alive at once during backward."""

    formula: str
    layers: float
    head: float
    backward: float = 0.0
    """Bytes alive at the backward peak beyond `layers + head`: the loss's gradients, or
    one recomputed layer, whichever is more."""

    @property
    def total(self) -> float:
        """Saved at the end of forward."""
        return self.layers + self.head

    @property
    def peak(self) -> float:
        return self.total + self.backward


def korthikanti(*, s: int, b: int, h: int, a: int, layers: int, vocab: int, flash: bool,
                recompute: Recompute, tensor: int = 1, every: int | None = None,
                with_head: bool = True) -> Activations:
    """Korthikanti et al. 2022, eq. (2) with the variants of §4 and §5; `with_head`
    False for a pipeline stage without the output layer."""
    sbh = s * b * h
    kept = 34.0 * sbh / tensor if flash else sbh * (34 + 5 * a * s / h) / tensor
    if recompute == "full":
        per_layers = layers * 2.0 * sbh
    elif recompute == "selective" and every is not None:
        wrapped = layers // every
        per_layers = wrapped * 2.0 * sbh + (layers - wrapped) * kept
    elif recompute == "selective":
        per_layers = layers * 34.0 * sbh / tensor
    else:
        per_layers = layers * kept
    head = 4.0 * sbh * (1 + vocab / h) / tensor if with_head else 0.0
    name = "Korthikanti 2022" + (", flash" if flash else "") + _recompute(recompute, every)
    return Activations(name, per_layers, head)


def megatron_layer(*, s: int, b: int, h: int, a: int, kv: int, inter: int | None, t: int,
                   sequence_parallel: bool, flash: bool, core: bool = True) -> float:
    """One Megatron-Core block's saved bytes without recompute (module docstring); `inter`
    None for a GPT block (4h MLP, dropout masks: Korthikanti's 34·sbh); `core` False drops
    the attention core's terms (selective recompute)."""
    sbh = s * b * h
    if inter is None:
        split, whole = 24.0, 10.0  # Korthikanti eq. (2)/(4): 34 = 10 replicated + 24 split
    else:
        split, whole = 4 + 4 * kv / h + 6 * inter / h, 8.0
    attention = (4.0 * a * s * b if flash else 5.0 * a * s * s * b) if core else 0.0
    if inter is None and flash:
        attention = 0.0  # Korthikanti's flash / selective form: 34·sbh exactly
    per_rank = whole if not sequence_parallel or t == 1 else whole / t
    return sbh * (per_rank + split / t) + attention / t


def megatron_ring(*, s: int, b: int, kv: int, cp: int) -> float:
    """Bytes Transformer Engine's p2p context parallel holds in one layer's attention
    backward beyond the layer: the K/V chunk computed on and the one in flight (kv heads),
    and the dK/dV chunks sent the other way, 16-bit, (s/cp) tokens each."""
    if cp == 1:
        return 0.0
    return 4 * (4.0 * s / cp * b * kv)


def megatron(*, s: int, b: int, h: int, a: int, kv: int, inter: int | None, layers: int, vocab: int,
             flash: bool, recompute: Recompute, tensor: int, sequence_parallel: bool,
             every: int | None = None, with_head: bool = True, attention_extra: float = 0.0) -> Activations:
    """Megatron-Core's activations for `layers` layers' worth of micro-batches (module docstring)."""
    t, sbh = tensor, s * b * h
    whole = megatron_layer(s=s, b=b, h=h, a=a, kv=kv, inter=inter, t=t, sequence_parallel=sequence_parallel,
                           flash=flash)
    checkpoint = 2.0 * sbh / (t if sequence_parallel else 1)
    if recompute == "full":
        saved = layers * checkpoint
    elif recompute == "selective" and every is not None:
        wrapped = layers // every
        saved = wrapped * checkpoint + (layers - wrapped) * whole
    elif recompute == "selective":
        saved = layers * megatron_layer(s=s, b=b, h=h, a=a, kv=kv, inter=inter, t=t,
                                        sequence_parallel=sequence_parallel, flash=flash, core=False)
    else:
        saved = layers * whole
    head = 4.0 * sbh * (1 + vocab / h) / t if with_head else 0.0
    recomputed = (whole if recompute == "full" or every is not None else 0.0) + attention_extra / t
    block = ", GPT block" if inter is None else ", gated MLP, GQA"
    mode = _recompute(recompute, every).replace("selective (op)", "selective (core attention)")
    name = (f"Megatron-Core (Korthikanti et al. 2022{block}"
            + (", sequence parallel" if sequence_parallel and t > 1 else "") + ")"
            + (", flash" if flash else "") + mode)
    return Activations(name, saved, head, recomputed)


def llama_layer(*, s: int, b: int, h: int, a: int, kv: int, inter: int, flash: bool,
                compiled: bool = False, tiled: bool = False) -> float:
    """One Llama block without checkpointing (the saved-tensor measurement), eager or under
    `torch.compile` (`compiled`: inductor's partitioner saves the block's input, the
    matmuls' inputs, q, k, v, the attention output and the MLP's gate and up, and
    recomputes the norms' fp32 copies and SiLU: sbh·(12 + 4·h_kv/h + 6·i/h)). `tiled`:
    DeepSpeed's `TiledMLP` saves only the MLP's input (the norm's output, counted already),
    so the MLP's own terms, 8·sbi eager and 6·sbi compiled, drop. The two norms'
    fp32 reciprocal RMS, 8·s·b, are left out (under 0.05 % at h ≥ 4096)."""
    sbh = s * b * h
    # Eager attention multiplies by K and V after `repeat_kv`: saved at all a heads.
    keys_values = 4 * kv / h if flash else 4.0
    if compiled:
        attention = 4.0 * a * s * b if flash else 4.0 * a * s * s * b + 8.0 * a * s * b
        return sbh * (12 + keys_values + (0 if tiled else 6 * inter / h)) + attention
    attention = 4.0 * a * s * b if flash else 6.0 * a * s * s * b
    return sbh * (20 + keys_values + (0 if tiled else 8 * inter / h)) + attention


TILED_SHARD = 21.2
"""Bytes per token and unit of intermediate width one `TiledMLP` shard allocates at most
in backward: its recomputed gate, up, SiLU and product, their gradients, and the three
projections' weight gradients accumulated shard by shard (h·i each, h tokens a shard):
238,592 bytes at 64 tokens, i 176 in the profiler's CPU allocation events
(`benchmarks/saved_activations_tiled.csv`), 21.18 × 64 × 176."""


def tiled_mlp_backward(*, s: int, b: int, h: int, inter: int) -> float:
    """Bytes DeepSpeed's `TiledMLP` allocates in its backward beyond its saved input: the
    input's gradient for the whole sequence, 2·sbh, filled shard by shard, and one shard's
    recomputed MLP and its gradients; ceil(s / h) shards (ArcticTraining's and DeepSpeed's
    example's `num_shards`) of at most h tokens each."""
    shards = -(-s // h)
    return 2.0 * s * b * h + TILED_SHARD * -(-s // shards) * b * inter


def eager_attention_backward(*, s: int, b: int, a: int) -> float:
    """Bytes eager attention's backward holds at its peak beyond the layer's saved tensors:
    8·a·s²·b, the limit of what the profiler measures for eager's peak beyond SDPA's
    (`benchmarks/saved_activations_backward.csv`: 5.6 … 7.0 × a·s²·b at s = 128 … 512,
    8 in the difference of the last two): the scores' gradients in 16-bit and in the fp32 of
    softmax's saved output, and softmax's fp32 gradient, alive together. It holds on CUDA
    too for bf16: ATen's `softmax(x, dtype=float32)` fuses the upcast only for fp16 on CUDA,
    so bf16 runs the same `to(float32)` and fp32 softmax graph there as here. SDPA and
    flash kernels keep their score tiles on chip: nothing."""
    return 8.0 * a * s * s * b


def op_sac_layer(*, s: int, b: int, h: int, a: int, kv: int, inter: int) -> float:
    """One Llama block under torchtitan's op-level selective checkpointing."""
    return 2.0 * s * b * (4 * h + kv + inter) + 4.0 * a * s * b


def ring_attention(*, s: int, b: int, h: int, cp: int) -> float:
    """Bytes torch's context-parallel ring attention holds in one layer's attention
    backward beyond the unsplit layer, for the whole sequence s over cp ranks (see the
    module's docstring): the all-gathered K/V at all heads, 4·s·b·h, and the backward's
    fp32 accumulators, per-step gradients and dK/dV rotation buffers, 34·(s/cp)·b·h."""
    if cp == 1:
        return 0.0
    return 4.0 * s * b * h + 34.0 * s / cp * b * h


def loss_backward(*, s: int, b: int, vocab: int) -> float:
    """Bytes the loss adds in its backward beyond what it saved: `nll_loss`'s and
    log-softmax's fp32 gradients, alive together."""
    return 8.0 * s * b * vocab


def loss_head(*, s: int, b: int, h: int, vocab: int, loss: str, holds_logits: bool,
              compiled: bool = False) -> tuple[float, float]:
    """The head's saved bytes and the loss's backward buffers, by loss kernel (measured in
    `benchmarks/saved_activations.csv`): the final norm and the head's input, 8·sbh, and

    * `full`: the fp32 log-softmax, 4·sbV (+ the 16-bit logits 2·sbV the caller holds);
      backward `loss_backward`'s 8·sbV;
    * `chunked` (torchtune): the same log-softmax, chunk by chunk, and no whole logits held;
      backward one chunk's gradients at a time, 8·sbV / 8 (`num_output_chunks` 8);
      `compiled` (torchtune's `compile` also compiles each chunk's upcast and cross-entropy,
      `training.compile_loss`): inductor saves the chunk's 16-bit logits and a per-row
      statistic, 2·sbV, and its backward makes the 16-bit gradient alone, 2·sbV / 8
      (`benchmarks/saved_activations_chunked_loss.csv`);
    * `fused` (Liger's fused linear cross-entropy): the gradient of the head's input, 2·sbh,
      in place of that input, and of its weight, 2·V·h (a parameter's size; in the weight's
      dtype); no backward buffers.

    The int64 labels `cross_entropy` saves, 8·s·b, are left out.
    """
    sbh = s * b * h
    if loss == "fused":
        return 8.0 * sbh + 2.0 * vocab * h, 0.0
    if loss == "chunked" and compiled:
        return 2.0 * s * b * vocab + 8.0 * sbh, 2.0 * s * b * vocab / LOSS_CHUNKS
    logits = 2.0 * s * b * vocab if holds_logits and loss != "chunked" else 0.0
    backward = loss_backward(s=s, b=b, vocab=vocab) / (LOSS_CHUNKS if loss == "chunked" else 1)
    return 4.0 * s * b * vocab + 8.0 * sbh + logits, backward


LOSS_CHUNKS = 8
"""torchtune's `CEWithChunkedOutputLoss.num_output_chunks` default."""


def hf_llama(*, s: int, b: int, h: int, a: int, kv: int, inter: int, layers: int, vocab: int,
             flash: bool, recompute: Recompute, tensor: int = 1, every: int | None = None,
             holds_logits: bool = True, with_head: bool = True, attention_extra: float = 0.0,
             compiled: bool = False, loss: str = "full", tiled: bool = False,
             compiled_loss: bool = False) -> Activations:
    """The Llama formula measured in `reference/memory.md` and `benchmarks/saved_activations.py`,
    with each checkpointing mode, compiled blocks and the loss kernels (`loss_head`).

    `with_head` False for a pipeline stage without the output layer (and the loss);
    `attention_extra`: bytes a layer's attention holds in backward beyond the formula
    (`ring_attention`); `tiled`: the MLP through DeepSpeed's `TiledMLP` (`tiled_mlp_backward`);
    `compiled_loss`: the loss under `torch.compile` too (`loss_head`)."""
    sbh = s * b * h
    fused = flash or recompute == "selective"
    full_layer = llama_layer(s=s, b=b, h=h, a=a, kv=kv, inter=inter, flash=fused, compiled=compiled,
                             tiled=tiled) / tensor
    if recompute == "full":
        saved = layers * 2.0 * sbh / tensor
    elif recompute == "selective" and every is not None:
        wrapped = layers // every
        saved = wrapped * 2.0 * sbh / tensor + (layers - wrapped) * full_layer
    elif recompute == "selective":
        saved = layers * op_sac_layer(s=s, b=b, h=h, a=a, kv=kv, inter=inter) / tensor
    else:
        saved = layers * full_layer
    head, loss_buffers = loss_head(s=s, b=b, h=h, vocab=vocab, loss=loss, holds_logits=holds_logits,
                                   compiled=compiled_loss)
    held = 2.0 * s * b * vocab if holds_logits and loss == "full" else 0.0
    head, loss_buffers, held = ((head / tensor, loss_buffers / tensor, held / tensor) if with_head
                                else (0.0, 0.0, 0.0))
    # A layer's backward runs after the loss's buffers and the head's saved tensors are
    # gone, but beside the logits the caller still holds: one recomputed layer, or eager
    # attention's score gradients (the last layer's, without recompute).
    scores = 0.0 if fused else eager_attention_backward(s=s, b=b, a=a) / tensor
    recomputed = (full_layer if recompute != "none" else 0.0) + scores + attention_extra / tensor
    recomputed += tiled_mlp_backward(s=s, b=b, h=h, inter=inter) / tensor if tiled else 0.0
    backward = max(loss_buffers, recomputed + held - head)
    loss_name = ("compiled " if compiled_loss and loss == "chunked" else "") + loss
    name = ("Llama, measured" + (", sdpa/flash" if flash else ", eager") + (", compiled" if compiled else "")
            + (", tiled MLP" if tiled else "") + ("" if loss == "full" else f", {loss_name} loss")
            + _recompute(recompute, every))
    return Activations(name, saved, head, backward)


def _recompute(recompute: Recompute, every: int | None) -> str:
    if recompute == "none":
        return ""
    if recompute == "selective":
        return f", selective recompute (every {every} layers)" if every else ", selective (op) recompute"
    return ", full recompute"


def plan_activations(plan: Plan, stage: Stage | None = None) -> tuple[Activations, ...]:
    """The estimates a Plan's shape allows for one pipeline stage (the worst of
    `stages.binding` when not given); the first is the one `fits?` uses: Megatron-Core's
    under `strategy: megatron`, the measured Llama formula when the shape has kv heads and
    an intermediate size, Korthikanti's otherwise. Empty if the shape or `seq_len` is unknown."""
    m = plan.recipe.model
    s, h, layers, a, vocab = plan.recipe.batch.seq_len, m.hidden_size, m.layers, m.heads, m.vocab
    if s is None or h is None or layers is None or a is None or vocab is None:
        return ()
    if stage is None:
        options = [plan_activations(plan, st) for st in binding(plan)]
        return max(options, key=lambda acts: acts[0].peak)
    cp = plan.dims.sequence
    local = -(-s // cp)  # each context-parallel rank's share of a sample's tokens
    flash, recompute = m.attention != "eager", plan.recipe.activation_checkpointing
    compiled, loss = compiled_blocks(plan), loss_kernel(plan)
    b, t = plan.batch.micro, plan.dims.tensor
    every = plan.recipe.recompute_every
    count = -(-stage.layers // plan.dims.virtual_stages) * stage.in_flight
    kv = kv_width(h, a, m.kv_heads, m.head_dim)
    inter = mlp_width(m)  # per token: a mixture of experts' k routed and its shared experts
    seed = korthikanti(s=local, b=b, h=h, a=a, layers=count, vocab=vocab, flash=flash,
                       recompute=recompute, tensor=t, every=every, with_head=stage.head)
    if plan.recipe.strategy == "megatron":
        ring = megatron_ring(s=s, b=b, kv=kv, cp=cp)
        own = megatron(s=local, b=b, h=h, a=a, kv=kv, inter=inter, layers=count, vocab=vocab,
                       flash=flash, recompute=recompute, tensor=t, sequence_parallel=sequence_parallel(plan),
                       every=every, with_head=stage.head, attention_extra=ring)
        return (offloaded(plan, own), seed)
    if inter is None:
        return (offloaded(plan, seed),)
    extra = ring_attention(s=s, b=b, h=h, cp=cp) if ring_context_parallel(plan) else 0.0
    measured = hf_llama(s=local, b=b, h=h, a=a, kv=kv, inter=inter, layers=count,
                        vocab=vocab, flash=flash, recompute=recompute, tensor=t, every=every,
                        holds_logits=holds_logits(plan), with_head=stage.head, attention_extra=extra,
                        compiled=compiled, loss=loss, tiled=plan.recipe.kernels.mlp == "tiled",
                        compiled_loss=plan.recipe.kernels.compile is True)
    return (offloaded(plan, measured), seed)


def offloaded(plan: Plan, act: Activations) -> Activations:
    """With `offload.activations: cpu` (full recompute) the checkpointed inputs wait in host
    memory: DeepSpeed's `cpu_checkpointing` copies each block's input to the CPU in forward
    and back before that block's recompute, so the GPU holds the one being rebuilt (and
    the next one coming back): two layers' inputs instead of all of them."""
    if plan.recipe.offload.activations == "none" or act.layers == 0:
        return act
    kept = min(act.layers, 2 * act.layers / max(1, plan.recipe.model.layers or 1))
    return Activations(act.formula + ", checkpoints held in CPU memory", kept, act.head, act.backward)


def sequence_parallel(plan: Plan) -> bool:
    """Megatron's sequence parallelism: as stated, else on with tensor > 1 (verl's default)."""
    stated = plan.recipe.parallel.tensor_sequence
    return plan.dims.tensor > 1 if stated is None else stated and plan.dims.tensor > 1


def pipeline_in_flight(plan: Plan, *, last: bool = False) -> int:
    """Model chunks (of L/(p·v) layers) whose activations the first pipeline rank holds at
    once (the last with `last`). 1F1B: the first runs p forwards before its first backward,
    or all m if a step has fewer; the last one at a time. Interleaved (v > 1): Megatron's
    warm-up forwards plus the steady state's one (module docstring), at most v·m."""
    return in_flight(plan, plan.dims.pipeline - 1 if last else 0)


def ring_context_parallel(plan: Plan) -> bool:
    """Whether `parallel.sequence` runs as torch's ring attention (torchtitan, Accelerate)
    rather than Ulysses (DeepSpeed, verl) or Megatron's: see the module's docstring."""
    return (plan.dims.sequence > 1 and plan.recipe.strategy != "megatron" and plan.backend != "verl"
            and not uses_deepspeed(plan))


def holds_logits(plan: Plan) -> bool:
    """Whether the 16-bit logits outlive the loss: Hugging Face models return them to the
    Trainer / Accelerate / verl loop; a torchrun script is taken to be torchtitan's,
    whose train step deletes them before `backward()`."""
    return plan.backend != "torchrun"


def compiled_blocks(plan: Plan) -> bool:
    """Whether the blocks save what a compiled block saves: `kernels.compile: true`, or
    Liger's fused ops (`fused_ops: liger`; not measured here: its RMSNorm and SwiGLU
    kernels save their inputs and recompute the rest, as inductor's partitioner does).
    `unknown` is planned as today's assumption, eager."""
    kernels = plan.recipe.kernels
    return kernels.compile is True or kernels.fused_ops == "liger"


def loss_kernel(plan: Plan) -> str:
    """The loss kernel `plan` prices: as stated; Liger's fused ops bring its fused linear
    cross-entropy (the Trainer's `use_liger_kernel` patches both); `unknown` as `full`."""
    kernels = plan.recipe.kernels
    if kernels.loss == "unknown":
        return "fused" if kernels.fused_ops == "liger" else "full"
    if kernels.fused_ops == "liger" and "kernels.loss" not in plan.recipe.where:
        return "fused"
    return kernels.loss


KERNEL_FIELDS = ("model.attention", "kernels.compile", "kernels.loss", "kernels.fused_ops", "kernels.mlp")


def kernel_choice(plan: Plan) -> str:
    """The kernel choice a plan's activations rest on, as a key for an error band:
    `unknown` when any of `KERNEL_FIELDS` is `unknown`; else the choices that differ from
    eager Hugging Face's, joined by `+` (`compile`, `liger`, `chunked-loss`, `fused-loss`,
    `tiled-mlp`, `eager-attention`), or `eager-hf` when none does."""
    m, kernels = plan.recipe.model, plan.recipe.kernels
    if "unknown" in (m.attention, kernels.compile, kernels.loss, kernels.fused_ops, kernels.mlp):
        return "unknown"
    parts = (["compile"] if kernels.compile else []) + (["liger"] if kernels.fused_ops == "liger" else [])
    loss = loss_kernel(plan)
    parts += [f"{loss}-loss"] if loss != "full" else []
    parts += ["tiled-mlp"] if kernels.mlp == "tiled" else []
    parts += ["eager-attention"] if m.attention == "eager" else []
    return "+".join(parts) or "eager-hf"


def kernel_assumptions(plan: Plan) -> str:
    """What `plan` prints about the kernels: each choice, and which were not stated."""
    m, kernels = plan.recipe.model, plan.recipe.kernels
    said = [f"attention {m.attention}", "compiled" if kernels.compile is True else (
        "compile unknown" if kernels.compile == "unknown" else "not compiled"),
            f"{loss_kernel(plan)} loss" + (" (stated unknown)" if kernels.loss == "unknown" else ""),
            f"fused ops {kernels.fused_ops}", f"MLP {kernels.mlp}"]
    assumed = [key for key in KERNEL_FIELDS if key not in plan.recipe.where]
    note = f" (assumed, not stated: {', '.join(assumed)})" if assumed else " (as stated)"
    return ", ".join(said) + note
