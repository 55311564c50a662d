"""What a Megatron-DeepSpeed pipeline stage holds beyond its layers' checkpoints.

`activations.py` counts what each transformer layer saves; `engine.py` the optimizer's
state. Megatron-DeepSpeed (`strategy: megatron` launched by DeepSpeed: `GPTModelPipe` run
by DeepSpeed's `PipelineEngine`) holds four more things on a stage, each read from the
code BigScience ran (Megatron-DeepSpeed 2022, DeepSpeed's `runtime/pipe/engine.py` and
`bf16_optimizer.py`, the same lines in the installed 0.19.8):

* **The embedding's saved mask.** `PipelineModule.forward` checkpoints only what
  `_is_checkpointable` accepts, and for `GPTModelPipe` that is `ParallelTransformerLayerPipe`
  alone: the embedding runs outside any checkpoint, so its dropout (`Embedding.
  embedding_dropout`, `hidden_dropout`, Megatron's default 0.1) keeps its 1-byte mask of
  s·b·h for every micro-batch in flight on the first stage (Korthikanti et al. 2022 §4.3
  counts the same mask). GPT blocks only, as `activations.megatron_layer` keeps dropout
  masks: Llama-family models train without dropout.
* **The embedding norm's input.** With an embedding LayerNorm (BLOOM's, `--embed-layernorm`:
  `VocabParallelEmbedding.norm`, first stage only) the same holds for the norm: it keeps its
  16-bit input and its fp32 statistics for every micro-batch in flight on the first stage.
* **The pipeline's buffers.** `_exec_forward_pass` keeps each in-flight micro-batch's
  stage output in `pipe_buffers['outputs']` until its backward: the tensor-parallel
  rank's slice (`PartitionedTensor`, 2·s·b·h/t) when t > 1, the whole output when t = 1
  (nothing else holds it: the last checkpoint saves its input, not its output). A stage
  that sends also keeps one gradient receive buffer of that size (`grad_layer`), one that
  receives one activation buffer (`pipe_recv_buf`); and with t > 1 `_exec_backward_pass`
  rebuilds the whole output and the whole gradient (`PartitionedTensor.full()`) before
  calling backward: 2 × 2·s·b·h alive in backward.
* **The fp32 copy of a gradient.** With the `BF16_Optimizer` (bf16, fp32 accumulation),
  `_exec_backward_pass` calls `update_hp_grads` after every micro-batch's backward on every
  stage but the last (and `engine.backward` does on the last), which adds each 16-bit
  gradient to the fp32 buffer as `lp.grad.to(fp32)`: a new fp32 tensor of the stage's
  largest parameter (the vocabulary-parallel embedding V·h/t where the stage holds it) while
  the other micro-batches in flight are still held. It raises the stage's peak above the
  start of backward by that copy less one micro-batch's saved bytes and the recomputed
  layer, when it is larger (`fp32_gradient_copy`).

`tests/pipeline_probe.py` measures each on DeepSpeed's own `PipelineEngine` (CPU, gloo, a
tiny `GPTModelPipe` on 2 stages): the micro-batches in flight, the mask's elements, the
buffers' bytes and the size of the fp32 copy equal these terms (`tests/plan/test_pipeline.py`).
"""

from __future__ import annotations

from distrecipe.engines.runner import DEEPSPEED_BACKENDS
from distrecipe.job import Plan
from distrecipe.model_shapes import kv_width, layout
from distrecipe.plan.activations import Activations, sequence_parallel
from distrecipe.plan.engine import megatron_gradient_bytes
from distrecipe.plan.stages import Stage


def runs_pipeline_engine(plan: Plan) -> bool:
    """Megatron-DeepSpeed: Megatron's model in DeepSpeed's `PipelineModule` / `PipelineEngine`."""
    return plan.recipe.strategy == "megatron" and plan.backend in DEEPSPEED_BACKENDS


def _tokens_width(plan: Plan) -> float | None:
    """s·b·h of one micro-batch, None when the shape does not say."""
    s, h = plan.recipe.batch.seq_len, plan.recipe.model.hidden_size
    return None if s is None or h is None else float(s * plan.batch.micro * h)


def embedding_mask(plan: Plan, stage: Stage) -> float:
    """The embedding's dropout mask (1 byte per element) for each micro-batch in flight on the
    stage that holds the embedding, GPT blocks only (module docstring); ÷ t under sequence
    parallelism, which splits the embedding's output over the tensor group."""
    sbh = _tokens_width(plan)
    if plan.recipe.strategy != "megatron" or not stage.embedding or sbh is None \
            or plan.recipe.model.intermediate_size is not None:
        return 0.0
    split = plan.dims.tensor if sequence_parallel(plan) else 1
    return stage.in_flight * sbh / split


def embedding_norm_input(plan: Plan, stage: Stage) -> float:
    """The embedding norm's saved input and statistics (BLOOM's `word_embeddings_layernorm`,
    Megatron-DeepSpeed's `--embed-layernorm`: `VocabParallelEmbedding.norm` on the first stage)
    for each micro-batch in flight, outside the checkpoints as the dropout mask is: the fused
    LayerNorm keeps its 16-bit input (lp·s·b·h) and fp32 mean and inverse deviation (8·s·b);
    ÷ t under sequence parallelism."""
    sbh = _tokens_width(plan)
    h = plan.recipe.model.hidden_size
    if plan.recipe.strategy != "megatron" or not stage.embedding or sbh is None or h is None \
            or not layout(plan.recipe.model).embedding_norm:
        return 0.0
    split = plan.dims.tensor if sequence_parallel(plan) else 1
    return stage.in_flight * (plan.precision_bytes * sbh + 8 * sbh / h) / split


def pipe_buffers(plan: Plan, stage: Stage) -> tuple[float, float]:
    """(held, in backward): DeepSpeed's pipeline buffers on `stage` (module docstring), in the
    activations' 16-bit dtype; (0, 0) without a pipeline or outside Megatron-DeepSpeed."""
    sbh = _tokens_width(plan)
    t = plan.dims.tensor
    if not runs_pipeline_engine(plan) or plan.dims.pipeline == 1 or sbh is None:
        return 0.0, 0.0
    output = 2.0 * sbh  # the 16-bit activations (bf16 or fp16) a stage sends
    part = output / t
    held = 0.0 if stage.embedding else part  # pipe_recv_buf: the previous stage's slice
    if stage.head:
        return held, 0.0
    held += stage.in_flight * part + part  # outputs in flight, and the grad_layer buffer
    return held, (2 * output if t > 1 else 0.0)


def largest_parameter(plan: Plan, stage: Stage) -> float:
    """Elements of the stage's largest parameter per tensor-parallel rank: the vocabulary-
    parallel embedding (or output layer) V·h/t on an end stage that holds it, else a block's
    fused QKV or first MLP matrix (Megatron fuses gate and up: 2·i·h/t; GPT's 4h·h/t)."""
    m, t = plan.recipe.model, plan.dims.tensor
    h, a = m.hidden_size or 0, m.heads or 1
    inter = m.intermediate_size
    fc1 = 4 * h if inter is None else inter * (1 if layout(m).mlp == "plain" else 2)
    qkv = h + 2 * kv_width(h, a, m.kv_heads, m.head_dim)
    block = max(fc1, qkv) * h / t
    if (stage.embedding or stage.head) and m.vocab is not None:
        return max(block, m.vocab * h / t)
    return float(block)


def bf16_optimizer(plan: Plan) -> bool:
    """Megatron-DeepSpeed's bf16 with fp32 gradient accumulation: DeepSpeed's `BF16_Optimizer`
    (the view `engine.megatron_deepspeed` gives)."""
    return runs_pipeline_engine(plan) and plan.precision_bytes == 2 and megatron_gradient_bytes(plan) == 4


def fp32_gradient_copy(plan: Plan, stage: Stage, act: Activations | None, held: float,
                       rebuilt: float = 0.0) -> float:
    """What `update_hp_grads`' fp32 copy of the largest gradient adds above the start of
    backward (module docstring): the copy, less one micro-batch's share of what the stage
    holds per micro-batch in flight (`act.total` and `held`), and what is alive at the start
    of backward and gone by then: the recomputed layer (`act.backward`) and the rebuilt
    pipeline buffers (`rebuilt`)."""
    if not bf16_optimizer(plan):
        return 0.0
    copy = 4.0 * largest_parameter(plan, stage)
    one = ((act.total if act is not None else 0.0) + held) / max(1, stage.in_flight)
    gone = (act.backward if act is not None else 0.0) + rebuilt
    return max(0.0, copy - one - gone)


def fp32_copy_segment(plan: Plan, stage: Stage) -> float:
    """The segment `update_hp_grads`' fp32 copy of the largest gradient takes with room: the
    micro-batch just backwarded freed its saved layer inputs and one recomputed layer, blocks
    far smaller than the copy, so the caching allocator takes a new one of the copy's size
    (`allocator.Memory.segments`); `fp32_gradient_copy` is what it adds to allocated."""
    return 4.0 * largest_parameter(plan, stage) if bf16_optimizer(plan) else 0.0


COPY = "fp32 gradient copy (after backward)"
"""The backward part `fp32_gradient_copy` names."""


def stage_parts(plan: Plan, stage: Stage | None, act: Activations | None) -> dict[str, float]:
    """The parts above, named as `allocator.memory` lists them at the start of backward."""
    if stage is None or plan.recipe.strategy != "megatron":
        return {}
    mask = embedding_mask(plan, stage)
    norm = embedding_norm_input(plan, stage)
    held, rebuilt = pipe_buffers(plan, stage)
    out = {"embedding dropout mask (saved)": mask, "embedding norm input (saved)": norm,
           "pipeline buffers": held, "pipeline buffers (backward)": rebuilt}
    out[COPY] = fp32_gradient_copy(plan, stage, act, mask + norm + held, rebuilt)
    return {k: v for k, v in out.items() if v}
