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
Pipeline parallelism does not: under 1F1B the first stage holds p micro-batches of
L/p layers, L layers' worth (Korthikanti §4.2). `plan` uses the Llama formula when
the model's shape has kv heads and intermediate size, Korthikanti's otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass

from distrecipe.model_shapes import kv_width
from distrecipe.recipe import Plan, Recompute


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
                recompute: Recompute, tensor: int = 1, every: int | None = None) -> Activations:
    """Korthikanti et al. 2022, eq. (2) with the variants of §4 and §5."""
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
    head = 4.0 * sbh * (1 + vocab / h) / tensor
    name = "Korthikanti 2022" + (", flash" if flash else "") + _recompute(recompute, every)
    return Activations(name, per_layers, head)


def llama_layer(*, s: int, b: int, h: int, a: int, kv: int, inter: int, flash: bool) -> float:
    """One Llama block without checkpointing (the saved-tensor measurement)."""
    sbh = s * b * h
    attention = 4.0 * a * s * b if flash else 6.0 * a * s * s * b
    # Eager attention multiplies by K and V after `repeat_kv`: saved at all a heads.
    keys_values = 4 * kv / h if flash else 4.0
    return sbh * (20 + keys_values + 8 * inter / h) + attention


def op_sac_layer(*, s: int, b: int, h: int, a: int, kv: int, inter: int) -> float:
    """One Llama block under torchtitan's op-level selective checkpointing."""
    return 2.0 * s * b * (4 * h + kv + inter) + 4.0 * a * s * b


def loss_backward(*, s: int, b: int, vocab: int) -> float:
    """Bytes the loss adds in its backward beyond what it saved: `nll_loss`'s and
    log-softmax's fp32 gradients, alive together."""
    return 8.0 * s * b * vocab


def hf_llama(*, s: int, b: int, h: int, a: int, kv: int, inter: int, layers: int, vocab: int,
             flash: bool, recompute: Recompute, tensor: int = 1, every: int | None = None,
             holds_logits: bool = True) -> Activations:
    """The Llama formula measured in `reference/memory.md`, with each checkpointing mode."""
    sbh = s * b * h
    fused = flash or recompute == "selective"
    full_layer = llama_layer(s=s, b=b, h=h, a=a, kv=kv, inter=inter, flash=fused) / tensor
    if recompute == "full":
        saved = layers * 2.0 * sbh / tensor
    elif recompute == "selective" and every is not None:
        wrapped = layers // every
        saved = wrapped * 2.0 * sbh / tensor + (layers - wrapped) * full_layer
    elif recompute == "selective":
        saved = layers * op_sac_layer(s=s, b=b, h=h, a=a, kv=kv, inter=inter) / tensor
    else:
        saved = layers * full_layer
    logits = 2.0 * s * b * vocab if holds_logits else 0.0
    head = (4.0 * s * b * vocab + 8.0 * sbh + logits) / tensor
    loss = loss_backward(s=s, b=b, vocab=vocab) / tensor
    # A recomputed layer is rebuilt whole while the loss's buffers are already gone.
    recomputed = full_layer if recompute != "none" else 0.0
    backward = max(loss, recomputed - head)
    name = ("Llama, measured" + (", sdpa/flash" if flash else ", eager")
            + _recompute(recompute, every))
    return Activations(name, saved, head, backward)


def _recompute(recompute: Recompute, every: int | None) -> str:
    if recompute == "none":
        return ""
    if recompute == "selective":
        return f", selective recompute (every {every} layers)" if every else ", selective (op) recompute"
    return ", full recompute"


def plan_activations(plan: Plan) -> tuple[Activations, ...]:
    """The estimates a Plan's shape allows; the first is the one `fits?` uses. Empty if
    the shape or `seq_len` is unknown."""
    m = plan.model
    s, h, layers, a, vocab = plan.seq_len, m.hidden_size, m.layers, m.heads, m.vocab
    if s is None or h is None or layers is None or a is None or vocab is None:
        return ()
    flash, recompute, b, t = m.attention != "eager", plan.activation_checkpointing, plan.micro, plan.tensor
    every = plan.checkpoint_every
    seed = korthikanti(s=s, b=b, h=h, a=a, layers=layers, vocab=vocab, flash=flash,
                       recompute=recompute, tensor=t, every=every)
    if m.intermediate_size is None:
        return (seed,)
    kv = kv_width(h, a, m.kv_heads)
    measured = hf_llama(s=s, b=b, h=h, a=a, kv=kv, inter=m.intermediate_size, layers=layers,
                        vocab=vocab, flash=flash, recompute=recompute, tensor=t, every=every,
                        holds_logits=holds_logits(plan))
    return (measured, seed)


def holds_logits(plan: Plan) -> bool:
    """Whether the 16-bit logits outlive the loss: Hugging Face models return them to the
    Trainer / Accelerate / verl loop; a torchrun script is taken to be torchtitan's,
    whose train step deletes them before `backward()`."""
    return plan.launch.backend != "torchrun"
