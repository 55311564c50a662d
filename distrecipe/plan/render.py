"""`plan` output as text (GB = 10⁹ bytes, the seed's unit) or JSON (bytes)."""

from __future__ import annotations

from typing import Any

from distrecipe.engines.verl import ROLLOUT_PROFILE
from distrecipe.job import Plan
from distrecipe.plan import host
from distrecipe.plan.activations import kernel_assumptions
from distrecipe.plan.allocator import CONTEXT, FRAGMENTATION
from distrecipe.plan.engine import POINTS
from distrecipe.plan.memory import shard_ranks
from distrecipe.plan.report import Estimate
from distrecipe.plan.rollout import Rollout
from distrecipe.plan.traffic import DDP_BUCKET
from distrecipe.plan.units import GiB, MiB, gb
from distrecipe.plan.verdict import Verdict, Word, band_text


def _parts(parts: dict[str, float]) -> str:
    return ", ".join(f"{name} {gb(size)}" for name, size in parts.items() if size)


def _listed(head: str, parts: dict[str, float], sep: str = ": ") -> str:
    """`head: a 1 GB, b 2 GB`, or `head` alone when nothing is in the list (one rank sends
    nothing): a list is never printed empty."""
    items = _parts(parts)
    return f"{head}{sep}{items}" if items else head


def _in_parens(parts: dict[str, float]) -> str:
    """` (a 1 GB, b 2 GB)`, or nothing for an empty list."""
    items = _parts(parts)
    return f" ({items})" if items else ""


def _count(psi: float) -> str:
    """8B, 1.05M: parameter counts the way model cards write them."""
    for unit, size in (("B", 1e9), ("M", 1e6), ("k", 1e3)):
        if psi >= size:
            return f"{psi / size:.4g}{unit}"
    return f"{psi:g}"


def _memory(memory: int) -> str:
    gib = memory / GiB
    return f"{gb(memory)}" + (f" = {gib:g} GiB" if gib == round(gib) else "")


def _model_parallel(p: Plan) -> str:
    """What splits the model besides data parallelism, and the shard span sequence adds."""
    parts = [f"{name} {degree}" for name, degree in
             (("tensor", p.dims.tensor), ("pipeline", p.dims.pipeline),
              ("virtual stages", p.dims.virtual_stages), ("sequence", p.dims.sequence)) if degree > 1]
    if p.dims.sequence > 1:
        parts.append(f"model state sharded over shard group × sequence = {shard_ranks(p)} ranks")
    return f"; {', '.join(parts)}" if parts else ""


def text(est: Estimate, advice: list[str]) -> str:
    p = est.plan
    view, engine = est.formula, est.engine
    gpu_total = gb(view.total + sum(view.cpu.values()))
    formula = (_listed(f"{gpu_total}, {gb(view.total)} on the GPU{_in_parens(view.gpu)}", view.cpu,
                       ", offloaded to the host: ")
               if _parts(view.cpu) else _listed(gpu_total, view.gpu))
    lines = [
        f"{p.recipe.name}: {est.label}, Ψ = {_count(est.psi)} parameters per replica, "
        f"N = {p.dims.dp} data-parallel ranks ({p.dims.nodes} × {p.dims.gpus_per_node}){_model_parallel(p)}, "
        f"{p.precision}",
        f"batch: micro {p.batch.micro} × accumulation {p.batch.accumulation} × {p.dims.dp} = global "
        f"{p.batch.global_}" + (f", seq_len {p.recipe.batch.seq_len}" if p.recipe.batch.seq_len else ""),
        "",
        "model state per GPU (GB = 10⁹ bytes, MB = 10⁶)",
        f"  formula (seed)  {view.formula} = {formula}",
        f"  engine          {engine.engine}: rest {gb(engine.total('rest'))}, after backward "
        f"{gb(engine.total('backward'))}, peak {gb(engine.peak)} ({engine.peak_point})",
    ]
    if _parts(engine.points[engine.peak_point]):
        lines.append(f"                  at the peak: {_parts(engine.points[engine.peak_point])}")
    if view.cpu or engine.cpu:
        cpu = p.recipe.cluster.cpu_memory
        over = "" if host.fits(est) is not False else ": more than the node has"
        checked = (" (cluster.cpu_memory not set: not checked)" if cpu is None
                   else f" of {host.size(cpu)}{over}")
        lines.append(f"  host memory     per rank {gb(sum(engine.cpu.values()))}"
                     f"{_in_parens(engine.cpu)}, per node "
                     f"{host.size(host.per_node(est))}{checked if engine.cpu else ''}")
    lines += [f"  note: {note}" for note in engine.notes]
    seq_len, cp = p.recipe.batch.seq_len, p.dims.sequence
    tokens = (f"{-(-seq_len // cp)} of {seq_len} tokens (sequence {cp})"
              if seq_len and cp > 1 else f"{seq_len or '?'} tokens")
    chunks = ("micro-batch(es)" if p.dims.virtual_stages == 1
              else f"model chunks (of {p.dims.virtual_stages} per rank, interleaved 1F1B)")
    judged = est.stage
    stage = (f", the pipeline's {judged.name} ({judged.layers} layers"
             + (", the embedding" if judged.embedding else "") + (", the head" if judged.head else "")
             + f"), {judged.in_flight} {chunks} in flight"
             if p.dims.pipeline > 1 and judged is not None else "")
    lines.append(f"activations per GPU (micro {p.batch.micro} × {tokens}{stage})")
    lines.append(f"  kernels: {kernel_assumptions(p)}")
    for i, act in enumerate(est.activations):
        used = "  ← used" if i == 0 else ""
        backward = f"; + {gb(act.backward)} in backward = {gb(act.peak)}" if act.backward else ""
        lines.append(f"  {act.formula}: saved: layers {gb(act.layers)} + head {gb(act.head)} = "
                     f"{gb(act.total)}{backward}{used}")
    if not est.activations:
        lines.append("  unknown: the recipe needs model shape and batch.seq_len")
    mem = est.memory
    lines += [
        "memory per GPU (allocated: live tensors; reserved: PyTorch's cache; needed: + CUDA context)",
        _listed(f"  start of backward  allocated {gb(sum(mem.backward.values()))}", mem.backward),
        _listed(f"  optimizer step     allocated {gb(sum(mem.step.values()))}", mem.step),
        f"  reserved           {gb(mem.retained)} = (allocated {gb(mem.allocated)} at the "
        f"{mem.moment} moment" + (f" + stranded gradient blocks {gb(mem.stranded)}"
                                  if mem.stranded and mem.moment == "backward" else "")
        + f") × {1 + FRAGMENTATION:g} fragmentation",
    ]
    if mem.reserved > mem.retained:
        lines.append(f"  with room, reserved reaches {gb(mem.reserved)}: new segments {gb(mem.segments)} "
                     f"on top of backward's (a full GPU frees its cache instead)")
    if est.rollout is not None:
        lines.append(_rollout(est.rollout))
    tf, te = est.traffic_formula, est.traffic_engine
    lines += [
        "traffic per rank per step",
        _listed(f"  formula (seed)  {gb(tf.total)}", tf.sent),
        _listed(f"  engine          {gb(te.total)}", te.sent)
        + f"; {te.reductions} gradient reduction(s) per step",
    ]
    if tf.intra is not None:
        lines.append(f"  within a node {gb(tf.intra)}, between nodes {gb(tf.total - tf.intra)}")
    if p.recipe.strategy == "ddp":  # no_sync and 25 MiB buckets are torch DDP's alone
        grads = est.psi * p.precision_bytes
        lines += [f"  accumulation    {p.batch.accumulation} micro-steps: 1 gradient reduction per step "
                  f"with no_sync, {p.batch.accumulation} without",
                  f"  DDP buckets     ≈{est.ddp_buckets:.3g} of {DDP_BUCKET / MiB:g} MiB for "
                  f"{gb(grads)} of gradients"]
    lines.append(_step(est))
    lines.append(_fits(est))
    lines += ["advice", *[f"  - {line}" for line in advice]]
    return "\n".join(lines) + "\n"


def _step(est: Estimate) -> str:
    st = est.step
    if st is None:
        return ("step time: unknown (needs cluster.gpu or cluster.peak_tflops, batch.seq_len "
                "and model.params)")
    hw = st.hardware
    v = est.plan.dims.virtual_stages
    schedule = "1F1B" if v == 1 else f"interleaved 1F1B, {v} virtual stages"
    bubble = f" + pipeline bubble {st.bubble:.3g} s ({schedule})" if st.bubble else ""
    host = f" + offload {st.offload:.3g} s (PCIe copies, CPU optimizer step)" if st.offload else ""
    kinds = ", ".join(f"{kind} {seconds:.3g} s" for kind, seconds in st.exposed_by.items() if seconds)
    return (f"step time: {st.seconds:.3g} s = compute {st.compute:.3g} s ({st.efficiency.value:g} × "
            f"matmul size {st.matmul:.2f} of {hw.name}'s {hw.peak_tflops:g} TFLOPS, recompute included; "
            f"efficiency {st.efficiency.basis}){bubble} + exposed traffic "
            f"{st.exposed:.3g} s (of {st.communication:.3g} s, engine view"
            f"{': ' + kinds if kinds else ''}){host}; "
            f"{st.tokens_per_s_per_gpu:,.0f} tokens/s/GPU, MFU {st.mfu:.1%}")


def _rollout(phase: Rollout) -> str:
    """The rollout phase: the engine's share of the GPU (its weights, start-up profile and
    KV cache) beside the actor's resident state and any other model kept there; what the
    job holds that `plan` cannot price is named."""
    source = "" if phase.stated else f" ({phase.trainer}'s default)"
    share = "of an unknown GPU" if phase.engine is None else f"= {gb(phase.engine)}"
    tp = (f", {phase.said['tensor']}" if "tensor" in phase.said
          else "" if phase.tensor_stated else f", {phase.trainer}'s default")
    inside = phase.floor_text(f" (Ψ × {phase.width} bytes ÷ rollout tensor parallelism {phase.tensor}{tp})")
    kv = phase.kv_cache
    if kv is None:
        inside += ", the rest KV cache"
    elif not phase.starved:
        inside += f" + KV cache {gb(kv)}"
    else:
        inside += f": below this floor of {gb(phase.floor)} vLLM refuses to start"
    actor = sum(phase.actor.values())
    parts = _in_parens(phase.actor)
    others = "".join(f" + {name} {gb(size)}" + (f" ({phase.said[name]})" if name in phase.said else "")
                     for name, size in phase.beside.items())
    total = "" if phase.need is None else f" = {gb(phase.need)}"
    after = ("freed while the actor trains" if phase.freed
             else phase.said.get("freed", "kept while the actor trains (rl.free_rollout_memory: false)"))
    refused = f"; {phase.refused}" if phase.refused else ""
    unpriced = (f"; not priced, the recipe states only the actor's shape: {', '.join(phase.unpriced)}"
                if phase.unpriced else "")
    label = f"rollout ({phase.trainer})"
    return (f"  {label:<19}rl.rollout_memory {phase.fraction:g}{source} {share} [{inside}] + "
            f"actor state {gb(actor)}{parts}{others} + CUDA context {gb(CONTEXT)}{total}; {after}"
            f"{refused}{unpriced}")


def _fits(est: Estimate) -> str:
    breakdown = f"reserved {gb(est.memory.retained)} + CUDA context and NCCL {gb(CONTEXT)}"
    kept = est.rollout.kept if est.rollout else 0.0
    if kept:
        breakdown += f" + rollout engine kept {gb(kept)}"
    if est.rollout is not None:
        breakdown += "".join(f" + {name} {gb(size)}" for name, size in est.rollout.beside.items())
    if est.rollout_need is not None and est.rollout_binds:
        breakdown = f"the rollout phase (above); training {gb(est.training_need)} = {breakdown}"
    elif est.rollout_need is not None:
        breakdown = f"the training phase: {breakdown}; rollout {gb(est.rollout_need)}"
    missing = [] if est.rollout is None else [_model(item) for item in est.rollout.unpriced]
    unpriced = f"; at least: {' and '.join(missing)} not priced (above)" if missing else ""
    said = est.verdict
    if said is None or est.plan.gpu_memory is None:
        return f"fits? unknown (no cluster.gpu_memory): needs {gb(est.need)} = {breakdown}{unpriced}"
    answer = ANSWER[said.word] if host.allowed(est) else "no"
    starved = "; the rollout engine's share is below its floor (above)" if est.starved else ""
    held = f"; offload needs {host.note(est)}" if host.fits(est) is False else ""
    room = (f" less cluster.headroom {gb(said.headroom)} = {gb(said.usable)}" if said.headroom else "")
    return (f"fits? {answer}: needs {gb(est.need)} ({band_text(said)}) = {breakdown}, of "
            f"{_memory(est.plan.gpu_memory)}{room}{starved}{held}{unpriced}")


def _model(item: str) -> str:
    """`the critic (a trained ...)` → `the critic`: the name an unpriced model goes by."""
    return item.split(" (")[0]


ANSWER: dict[Word, str] = {"fits": "yes", "tight": "tight", "does not fit": "no"}
"""`fits?` answered: yes, tight (within the error band), no."""


def compare_text(rows: list[Estimate]) -> str:
    header = ("strategy", "formula", "state", "engine peak", "activations", "needs",
              "sent (seed)", "sent (engine)", "step", "tokens/s/GPU", "MFU", "fits")
    table = [header]
    for row in rows:
        said = row.verdict
        fits = "?" if said is None else ANSWER[said.word]
        table.append((row.label, row.formula.formula, gb(row.formula.total), gb(row.engine.peak),
                      gb(row.activation), gb(row.need),
                      gb(row.traffic_formula.total), gb(row.traffic_engine.total),
                      *_step_cells(row), fits))
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]
    out = ["  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip()
           for r in table]
    return "\n".join(out) + "\n"


def _step_cells(est: Estimate) -> tuple[str, str, str]:
    st = est.step
    if st is None:
        return ("?", "?", "?")
    return (f"{st.seconds:.4g} s", f"{st.tokens_per_s_per_gpu:,.0f}", f"{st.mfu:.1%}")


def as_json(est: Estimate, advice: list[str] | None = None) -> dict[str, Any]:
    """Every number in bytes; labels and formulas as the text shows them."""
    p = est.plan
    out: dict[str, Any] = {
        "name": p.recipe.name,
        "strategy": est.label,
        "units": "bytes",
        "psi": est.psi,
        "dp": p.dims.dp,
        "shard_group": p.dims.shard_group,
        "formula": {"expression": est.formula.formula, "total": est.formula.total,
                    "gpu": est.formula.gpu, "cpu": est.formula.cpu},
        "engine": {"name": est.engine.engine, "peak": est.engine.peak,
                   "peak_point": est.engine.peak_point,
                   "points": {point: {"total": est.engine.total(point),
                                      "parts": est.engine.points[point]} for point in POINTS},
                   "cpu": est.engine.cpu, "notes": list(est.engine.notes)},
        "activations": [{"formula": a.formula, "layers": a.layers, "head": a.head,
                         "saved": a.total, "backward": a.backward, "peak": a.peak}
                        for a in est.activations],
        "memory": {"backward": est.memory.backward, "step": est.memory.step,
                   "moment": est.memory.moment, "allocated": est.memory.allocated,
                   "stranded": est.memory.stranded, "fragmentation": FRAGMENTATION,
                   "retained": est.memory.retained, "segments": est.memory.segments,
                   "reserved": est.memory.reserved, "context": CONTEXT, "shown": est.memory.shown,
                   "needed": est.memory.needed},
        "traffic": {
            "formula": {"total": est.traffic_formula.total, "sent": est.traffic_formula.sent,
                        "reductions": est.traffic_formula.reductions,
                        "intra_node": est.traffic_formula.intra},
            "engine": {"total": est.traffic_engine.total, "sent": est.traffic_engine.sent,
                       "reductions": est.traffic_engine.reductions},
            "ddp_buckets": est.ddp_buckets,
            "ddp_bucket_bytes": DDP_BUCKET,
        },
        "step_time": None if est.step is None else {
            "seconds": est.step.seconds, "compute_seconds": est.step.compute,
            "communication_seconds": est.step.communication,
            "exposed_seconds": est.step.exposed, "bubble_seconds": est.step.bubble,
            "offload_seconds": est.step.offload, "exposed_by": est.step.exposed_by,
            "tokens_per_s_per_gpu": est.step.tokens_per_s_per_gpu, "mfu": est.step.mfu,
            "gpu": est.step.hardware.name, "peak_tflops": est.step.hardware.peak_tflops,
            "efficiency": est.step.efficiency.value, "matmul_factor": est.step.matmul,
            "efficiency_basis": est.step.efficiency.basis,
            "efficiency_borrowed": est.step.efficiency.borrowed,
        },
        "rollout": None if est.rollout is None else {
            "fraction": est.rollout.fraction, "stated": est.rollout.stated,
            "freed_in_training": est.rollout.freed, "engine": est.rollout.engine,
            "actor": est.rollout.actor, "context": CONTEXT, "needed": est.rollout.need,
            "in_training": est.rollout.in_training, "weights": est.rollout.weights,
            "tensor_parallel": est.rollout.tensor, "tensor_parallel_stated": est.rollout.tensor_stated,
            "profile": ROLLOUT_PROFILE, "floor": est.rollout.floor, "kv_cache": est.rollout.kv_cache,
            "starved": est.rollout.starved, "max_model_len": est.rollout.max_len,
            "sequence_kv": est.rollout.sequence_kv, "refused": est.rollout.refused,
            "trainer": est.rollout.trainer, "kept_in_training": est.rollout.kept,
            "beside": est.rollout.beside, "unpriced": list(est.rollout.unpriced),
        },
        "training_need": est.training_need,
        "need": est.need,
        "gpu_memory": p.gpu_memory,
        "fits": est.fits,
        "host_bytes_per_node": host.per_node(est),
        "cpu_memory": p.recipe.cluster.cpu_memory,
        "host_fits": host.fits(est),
        **verdict_json(est.verdict),
    }
    if advice is not None:
        out["advice"] = advice
    return out


def verdict_json(said: Verdict | None) -> dict[str, Any]:
    """`verdict` (fits, tight, does not fit), the headroom kept and the band, in bytes and
    relative, with whose band it is; every key null without a GPU memory."""
    if said is None:
        return {"verdict": None, "headroom": None, "usable": None, "band": None}
    b = said.band
    return {"verdict": said.word, "headroom": said.headroom, "usable": said.usable,
            "band": {"family": b.family, "kernels": b.kernels, "wide": b.wide, "low": b.low,
                     "high": b.high, "low_bytes": said.low, "high_bytes": said.high, "rows": b.rows,
                     "sources": list(b.sources)}}
