"""Saved-for-backward bytes of small random transformers models, by kernel choice, on CPU.

    python benchmarks/saved_activations.py [--out benchmarks/saved_activations.csv] [--quick]
    python benchmarks/saved_activations.py --chunked-loss   # saved_activations_chunked_loss.csv

What autograd keeps for backward is a property of the graph, not of the device: the same
model, shapes and dtype save the same tensors on CPU and GPU (the attention kernel aside:
CPU's SDPA runs `_scaled_dot_product_flash_attention_for_cpu`, which saves what the CUDA
flash kernel saves, its output and an fp32 logsumexp). Every tensor a forward saves passes
through `torch.autograd.graph.saved_tensors_hooks`; each storage is counted once (by
`data_ptr`), whole, parameters excluded. A model of L = 1 and L = 2 layers (same seed)
gives one layer's bytes as the difference; the head's (final norm output, output
projection, loss) are counted apart, in their own hook context.

Variants, each a row:

* `attention`: `sdpa` or `eager` (transformers' `attn_implementation`).
* `compile`: each decoder block wrapped in `torch.compile` (CPU inductor), as torchtitan
  compiles per block; what the compiled graph's partitioner saves is what the hooks see.
* `loss`: `full` (transformers' `ForCausalLMLoss`: 16-bit logits upcast to fp32, then
  `cross_entropy`), `chunked` (torchtune's `CEWithChunkedOutputLoss`: the output
  projection and the upcast run on 8 chunks of the sequence), `fused` (Liger's
  `LigerFusedLinearCrossEntropyFunction`, re-implemented here from its algorithm: each
  chunk's logits, softmax and gradients computed in forward and freed; only the gradient
  of the head's input, and of its weight, saved).
* `mlp`: `tiled` replaces each block's MLP forward with DeepSpeed's `TiledMLP` as
  ArcticTraining's `tiled_mlp_compute` does (`tiled_mlp_forward_common`: ceil(s / h)
  shards, compute_params the three projections' weights): forward runs the shards under
  `no_grad` and saves only the MLP's input; backward recomputes one shard at a time.
* `recompute`: `full` wraps every block in non-reentrant `torch.utils.checkpoint`
  (transformers' `gradient_checkpointing_enable`); what is held per layer is then the
  checkpoint's inputs (counted from the arguments each block's checkpoint receives); the
  block recomputed in backward saves what the `none` row's block saves.

Output: a CSV (one row per model × variant) with the bytes and the shapes, and the torch
and transformers versions in its first lines (`#` comments). `tests/plan/test_activations.py`
re-measures a tiny shape and checks `distrecipe.plan.activations`' formulas against it.
"""

from __future__ import annotations

import argparse
import csv
import io
import platform
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import transformers
from torch import nn

SHAPE: dict[str, int] = {"hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2,
                         "intermediate_size": 176, "vocab_size": 512}
"""h 64, a 4 (head 16), h_kv 32, i 176, V 512: every term of the formulas a different size."""
SEQ, BATCH = 48, 2
CHUNKS = 8
"""torchtune's `num_output_chunks` default."""
FAMILIES = ("llama", "qwen2", "mixtral")
torch._dynamo.config.cache_size_limit = 64


@dataclass(frozen=True)
class Variant:
    attention: str = "sdpa"
    compile: bool = False
    loss: str = "full"
    recompute: str = "none"
    mlp: str = "full"


VARIANTS = (
    Variant(), Variant(attention="eager"), Variant(compile=True), Variant(attention="eager", compile=True),
    Variant(loss="chunked"), Variant(loss="fused"), Variant(recompute="full"),
    Variant(attention="eager", recompute="full"), Variant(loss="fused", recompute="full"),
    Variant(mlp="tiled"), Variant(mlp="tiled", compile=True), Variant(mlp="tiled", recompute="full"),
)


class Counter:
    """Bytes of the distinct storages saved while it is active (parameters excluded)."""

    def __init__(self, seen: dict[int, int], skip: set[int]) -> None:
        self.seen, self.skip, self.bytes = seen, skip, 0

    def add(self, t: torch.Tensor) -> None:
        if not isinstance(t, torch.Tensor) or t.device.type == "meta":
            return
        storage = t.untyped_storage()
        ptr = storage.data_ptr()
        if ptr in self.skip or ptr in self.seen or storage.nbytes() == 0:
            return
        self.seen[ptr] = storage.nbytes()
        self.bytes += storage.nbytes()

    @contextmanager
    def saving(self) -> Iterator[None]:
        def pack(t: torch.Tensor) -> torch.Tensor:
            self.add(t)
            return t

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            yield


def build(family: str, layers: int, attention: str, dtype: torch.dtype) -> nn.Module:
    torch.manual_seed(0)
    common: dict[str, Any] = dict(SHAPE, num_hidden_layers=layers, max_position_embeddings=4 * SEQ,
                                  tie_word_embeddings=False, attn_implementation=attention)
    if family == "llama":
        model: nn.Module = transformers.LlamaForCausalLM(transformers.LlamaConfig(**common))
    elif family == "qwen2":
        model = transformers.Qwen2ForCausalLM(transformers.Qwen2Config(**common))
    else:
        model = transformers.MixtralForCausalLM(transformers.MixtralConfig(
            **common, num_local_experts=4, num_experts_per_tok=2))
    return model.to(dtype).train()


class FusedLinearCrossEntropy(torch.autograd.Function):
    """Liger's fused linear cross-entropy (`liger_kernel.ops.fused_linear_cross_entropy`):
    forward walks the tokens in chunks, computes each chunk's logits, its fp32 softmax and
    the loss's gradient with respect to the head's input and weight, and frees the chunk;
    it saves only those two gradients (the input's in the input's dtype)."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, weight: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        n = x.shape[0]
        grad_x = torch.zeros_like(x)
        grad_w = torch.zeros_like(weight)
        loss = torch.zeros((), dtype=torch.float32)
        step = -(-n // CHUNKS)
        for start in range(0, n, step):
            chunk, labels = x[start:start + step], target[start:start + step]
            logits = (chunk @ weight.t()).float()
            loss += nn.functional.cross_entropy(logits, labels, reduction="sum")
            grad = torch.softmax(logits, dim=-1)
            grad[torch.arange(len(labels)), labels] -= 1
            grad = (grad / n).to(x.dtype)
            grad_x[start:start + step] = grad @ weight
            grad_w += grad.t() @ chunk
        ctx.save_for_backward(grad_x, grad_w)
        return loss / n

    @staticmethod
    def backward(ctx: Any, grad_out: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, None]:
        grad_x, grad_w = ctx.saved_tensors
        return grad_x * grad_out.to(grad_x.dtype), grad_w * grad_out.to(grad_w.dtype), None


def tile_mlp(model: nn.Module) -> None:
    """Each block's MLP through DeepSpeed's `TiledMLP`, as ArcticTraining's
    `tiled_mlp_forward_common` patches it (one process: no all-reduce of the shard count)."""
    import math

    from deepspeed.runtime.sequence_parallel.ulysses_sp import TiledMLP

    def mlp_forward(self: Any, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))

    def tiled(self: Any, x: torch.Tensor) -> torch.Tensor:
        shards = math.ceil(x.shape[-2] / x.shape[-1])
        params = [self.down_proj.weight, self.gate_proj.weight, self.up_proj.weight]
        out: torch.Tensor = TiledMLP.apply(mlp_forward, self, x, shards, params)
        return out

    for block in model.model.layers:
        block.mlp.forward = tiled.__get__(block.mlp)


def head_loss(model: nn.Module, hidden: torch.Tensor, labels: torch.Tensor,
              loss: str) -> tuple[torch.Tensor, int]:
    """The loss by `loss`'s method, and the bytes of the 16-bit logits a caller would hold."""
    head: nn.Linear = model.lm_head
    if loss == "full":
        logits = head(hidden)
        flat = logits.float().reshape(-1, logits.shape[-1])
        return nn.functional.cross_entropy(flat, labels.reshape(-1)), logits.numel() * logits.element_size()
    if loss == "chunked":
        total = torch.zeros((), dtype=torch.float32)
        for h_chunk, l_chunk in zip(hidden.chunk(CHUNKS, dim=1), labels.chunk(CHUNKS, dim=1), strict=True):
            logits = head(h_chunk).float()
            flat = logits.reshape(-1, logits.shape[-1])
            total = total + nn.functional.cross_entropy(flat, l_chunk.reshape(-1), reduction="sum")
        return total / labels.numel(), 0
    flat = hidden.reshape(-1, hidden.shape[-1])
    return FusedLinearCrossEntropy.apply(flat, head.weight, labels.reshape(-1)), 0


def measure(family: str, variant: Variant, layers: int, dtype: torch.dtype,
            s: int = SEQ, b: int = BATCH) -> dict[str, int]:
    """Bytes saved by the body (embedding, `layers` blocks, final norm), the head and loss,
    the checkpoints' held inputs, and the 16-bit logits held by the caller."""
    torch._dynamo.reset()  # a fresh compile for each model: no recompile limit, no stale graphs
    model = build(family, layers, variant.attention, dtype)
    body = model.model
    if variant.mlp == "tiled":
        tile_mlp(model)
    if variant.recompute == "full":
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    seen: dict[int, int] = {}
    skip = {p.untyped_storage().data_ptr() for p in model.parameters()}
    held, saved_body, saved_head = Counter(seen, skip), Counter(seen, skip), Counter(seen, skip)
    if variant.recompute == "full":
        for block in body.layers:
            inner: Callable[..., Any] = block._gradient_checkpointing_func

            def holding(function: Any, *args: Any, _inner: Callable[..., Any] = inner, **kwargs: Any) -> Any:
                for t in list(args) + list(getattr(function, "keywords", {}).values()):
                    for x in (t if isinstance(t, tuple) else (t,)):
                        held.add(x)
                return _inner(function, *args, **kwargs)

            block._gradient_checkpointing_func = holding
    if variant.compile:
        for i, block in enumerate(body.layers):
            body.layers[i] = torch.compile(block)
    torch.manual_seed(1)
    ids = torch.randint(0, SHAPE["vocab_size"], (b, s))
    labels = torch.randint(0, SHAPE["vocab_size"], (b, s))
    with saved_body.saving():
        hidden = body(input_ids=ids).last_hidden_state
    with saved_head.saving():
        loss, logits = head_loss(model, hidden, labels, variant.loss)
    loss.backward()
    return {"body": saved_body.bytes, "head": saved_head.bytes, "held": held.bytes, "logits": logits}


def allocation_peak(run: Callable[[], None]) -> int:
    """The most bytes `run` has allocated and not yet freed at once, from the profiler's CPU
    allocation events (`profile_memory`), beyond what was alive when it began."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        run()
    assert prof.profiler is not None
    events = sorted((e for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"),
                    key=lambda e: e.start_ns())
    alive = peak = 0
    for event in events:
        alive += event.nbytes()
        peak = max(peak, alive)
    return peak


def loss_rows() -> Iterator[dict[str, Any]]:
    """transformers' `ForCausalLMLoss` forward and backward beyond the 16-bit logits the
    caller holds: the fp32 log-softmax it saves and the backward's gradients, per s·b·V."""
    model = build("llama", 1, "sdpa", torch.bfloat16)
    for s, vocab in ((256, 512), (512, 1024)):
        b = 2
        hidden = torch.randn(b, s, SHAPE["hidden_size"], dtype=torch.bfloat16, requires_grad=True)
        weight = torch.randn(vocab, SHAPE["hidden_size"], dtype=torch.bfloat16, requires_grad=True)
        labels = torch.randint(0, vocab, (b, s))
        logits = hidden @ weight.t()

        def step(logits: torch.Tensor = logits, labels: torch.Tensor = labels, vocab: int = vocab) -> None:
            model.loss_function(logits=logits, labels=labels, vocab_size=vocab).backward()

        peak = allocation_peak(step)
        yield {"s": s, "b": b, "V": vocab, "peak": peak, "peak_per_s_b_V": round(peak / (s * b * vocab), 3)}


def chunk_cross_entropy(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """torchtune's `CEWithChunkedOutputLoss.compute_cross_entropy`: one chunk's upcast and
    cross-entropy, what `training.compile_loss` compiles (the chunking stays eager)."""
    return nn.functional.cross_entropy(logits.float(), labels, ignore_index=-100, reduction="sum")


def chunked_loss_rows() -> Iterator[dict[str, Any]]:
    """One chunk of torchtune's chunked loss, eager and compiled (CPU inductor): the bytes it
    saves for backward beyond its 16-bit logits input, the input's own bytes when saved, and
    the most its backward allocates, per logit (n tokens × V)."""
    compiled = torch.compile(chunk_cross_entropy)
    for name, function in (("eager", chunk_cross_entropy), ("compiled", compiled)):
        for n, vocab in ((96, 512), (192, 1024)):
            torch._dynamo.reset()
            torch.manual_seed(0)
            x = torch.randn(n, vocab, dtype=torch.bfloat16, requires_grad=True)
            labels = torch.randint(0, vocab, (n,))
            function(x, labels).backward()  # compiles outside the measurement
            x.grad = None
            counter = Counter({}, set())
            with counter.saving():
                loss = function(x, labels)
            own = x.untyped_storage().data_ptr()
            input_saved = counter.seen.get(own, 0)
            peak = allocation_peak(lambda loss=loss: loss.backward())
            yield {"loss": name, "n": n, "V": vocab, "saved_beyond_input": counter.bytes - input_saved,
                   "input_saved": input_saved, "backward_peak": peak,
                   "saved_per_n_V": round(counter.bytes / (n * vocab), 3),
                   "backward_peak_per_n_V": round(peak / (n * vocab), 3)}


def backward_peak(attention: str, s: int, b: int) -> int:
    """Bytes one Llama block's backward allocates at its peak beyond what was alive when it
    began (its saved tensors among them, freed as backward goes)."""
    model = build("llama", 1, attention, torch.bfloat16)
    body = model.model
    ids, positions = torch.randint(0, SHAPE["vocab_size"], (b, s)), torch.arange(s)[None]
    start = body.embed_tokens(ids).detach().requires_grad_()
    out = body.layers[0](start, position_embeddings=body.rotary_emb(start, positions), position_ids=positions)
    grad = torch.ones_like(out)
    return allocation_peak(lambda: out.backward(grad))


def backward_rows() -> Iterator[dict[str, Any]]:
    """Eager attention's backward beyond SDPA's, at sequences where the s² terms dominate."""
    for s in (128, 256, 384, 512):
        eager, sdpa = backward_peak("eager", s, 1), backward_peak("sdpa", s, 1)
        a = SHAPE["num_attention_heads"]
        yield {"s": s, "b": 1, "a": a, "eager_peak": eager, "sdpa_peak": sdpa,
               "difference_per_a_s2_b": round((eager - sdpa) / (a * s * s), 3)}


def mlp_peaks(s: int, b: int, mlp: str) -> tuple[int, int, int]:
    """One Llama MLP's saved bytes (its input excluded: the block's norm output, counted in
    the layer), and the most its forward and its backward each allocate beyond what was
    alive when they began, whole (`full`) or through DeepSpeed's `TiledMLP` (`tiled`)."""
    model = build("llama", 1, "sdpa", torch.bfloat16)
    if mlp == "tiled":
        tile_mlp(model)
    block = model.model.layers[0].mlp
    x = torch.randn(b, s, SHAPE["hidden_size"], dtype=torch.bfloat16, requires_grad=True)
    skip = {p.untyped_storage().data_ptr() for p in model.parameters()} | {x.untyped_storage().data_ptr()}
    saved = Counter({}, skip)
    box: list[torch.Tensor] = []

    def forward() -> None:
        with saved.saving():
            box.append(block(x))

    forward_peak = allocation_peak(forward)
    out = box.pop()
    grad = torch.ones_like(out)
    return saved.bytes, forward_peak, allocation_peak(lambda: out.backward(grad))


def tiled_rows() -> Iterator[dict[str, Any]]:
    """A Llama MLP's saved bytes and forward / backward peaks, whole and through DeepSpeed's
    `TiledMLP`, at 2 … 16 shards (ceil(s / h), h = 64), b = 1."""
    for s in (128, 256, 512, 1024):
        row: dict[str, Any] = {"s": s, "b": 1, "h": SHAPE["hidden_size"], "i": SHAPE["intermediate_size"],
                               "shards": -(-s // SHAPE["hidden_size"])}
        for mlp in ("full", "tiled"):
            saved, forward, backward = mlp_peaks(s, 1, mlp)
            row |= {f"{mlp}_saved": saved, f"{mlp}_forward_peak": forward, f"{mlp}_backward_peak": backward}
        yield row


def rows(families: tuple[str, ...], variants: tuple[Variant, ...],
         dtype: torch.dtype) -> Iterator[dict[str, Any]]:
    for family in families:
        for variant in variants:
            if variant.mlp == "tiled" and family == "mixtral":
                continue  # a routed MLP: TiledMLP wraps one gate/up/down MLP
            one, two = measure(family, variant, 1, dtype), measure(family, variant, 2, dtype)
            yield {"family": family, "attention": variant.attention, "compile": variant.compile,
                   "loss": variant.loss, "recompute": variant.recompute, "mlp": variant.mlp,
                   "s": SEQ, "b": BATCH, "h": SHAPE["hidden_size"], "a": SHAPE["num_attention_heads"],
                   "h_kv": SHAPE["num_key_value_heads"] * SHAPE["hidden_size"]
                   // SHAPE["num_attention_heads"],
                   "i": SHAPE["intermediate_size"], "V": SHAPE["vocab_size"],
                   "dtype": str(dtype).split(".")[-1],
                   "layer_saved": two["body"] - one["body"], "layer_held": two["held"] - one["held"],
                   "body_rest": one["body"] - (two["body"] - one["body"]), "head_saved": one["head"],
                   "logits_held": one["logits"]}


def deepspeed_version() -> str:
    import deepspeed

    return str(deepspeed.__version__)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).with_suffix(".csv"))
    parser.add_argument("--quick", action="store_true", help="llama only, no compile")
    parser.add_argument("--backward", action="store_true",
                        help="backward peaks instead: eager attention's, the loss's (profiler)")
    parser.add_argument("--chunked-loss", action="store_true",
                        help="torchtune's chunked loss, eager and compiled, one chunk")
    args = parser.parse_args(argv)
    if args.chunked_loss:
        found = list(chunked_loss_rows())
        chunked = io.StringIO()
        chunked.write(f"# benchmarks/saved_activations.py --chunked-loss; torch {torch.__version__}, "
                      "CPU inductor and allocator; bytes\n")
        chunked_writer = csv.DictWriter(chunked, fieldnames=list(found[0]), lineterminator="\n")
        chunked_writer.writeheader()
        chunked_writer.writerows(found)
        path = args.out.with_name(args.out.stem + "_chunked_loss.csv")
        path.write_text(chunked.getvalue(), encoding="utf-8")
        return 0
    if args.backward:
        table = io.StringIO()
        table.write(f"# benchmarks/saved_activations.py --backward; torch {torch.__version__}, transformers "
                    f"{transformers.__version__}, CPU allocator; bytes\n")
        found = list(backward_rows())
        loss = list(loss_rows())
        loss_table = io.StringIO()
        loss_table.write(f"# benchmarks/saved_activations.py --backward; torch {torch.__version__}, "
                         f"transformers {transformers.__version__}, CPU allocator; "
                         "bytes beyond the held 16-bit logits\n")
        loss_writer = csv.DictWriter(loss_table, fieldnames=list(loss[0]), lineterminator="\n")
        loss_writer.writeheader()
        loss_writer.writerows(loss)
        args.out.with_name(args.out.stem + "_loss.csv").write_text(loss_table.getvalue(), encoding="utf-8")
        out_writer = csv.DictWriter(table, fieldnames=list(found[0]), lineterminator="\n")
        out_writer.writeheader()
        out_writer.writerows(found)
        args.out.with_name(args.out.stem + "_backward.csv").write_text(table.getvalue(), encoding="utf-8")
        tiled = list(tiled_rows())  # after the others: they run in the order they were first measured in
        tiled_table = io.StringIO()
        tiled_table.write(f"# benchmarks/saved_activations.py --backward; torch {torch.__version__}, "
                          f"transformers {transformers.__version__}, deepspeed {deepspeed_version()} "
                          "TiledMLP, CPU allocator; bytes\n")
        tiled_writer = csv.DictWriter(tiled_table, fieldnames=list(tiled[0]), lineterminator="\n")
        tiled_writer.writeheader()
        tiled_writer.writerows(tiled)
        args.out.with_name(args.out.stem + "_tiled.csv").write_text(tiled_table.getvalue(), encoding="utf-8")
        return 0
    families = ("llama",) if args.quick else FAMILIES
    variants = tuple(v for v in VARIANTS if not (args.quick and v.compile))
    out = io.StringIO()
    out.write(f"# benchmarks/saved_activations.py; torch {torch.__version__}, transformers "
              f"{transformers.__version__}, deepspeed {deepspeed_version()}, "
              f"python {platform.python_version()}, CPU; bytes\n")
    writer: csv.DictWriter[str] | None = None
    for row in rows(families, variants, torch.bfloat16):
        if writer is None:
            writer = csv.DictWriter(out, fieldnames=list(row), lineterminator="\n")
            writer.writeheader()
        writer.writerow(row)
        print(row, file=sys.stderr, flush=True)
    args.out.write_text(out.getvalue(), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
