"""Peak GPU memory of real trainings on one CUDA GPU, beside `plan`'s prediction for the
same recipe; rows in `tests/corpus/gpu/published.csv`'s columns.

    python benchmarks/gpu_memory.py [--out DIR] [--budget 480] [--runs NAME,...] [--tiny]

Each run trains a random Llama-shaped model (a transformers `LlamaConfig`, nothing
downloaded; `SHAPE`: 1.5B parameters, untied head, GQA, sdpa attention) in bf16 for
`WARMUP` steps, resets torch's peak statistics, trains `MEASURED` more steps and records
`torch.cuda.max_memory_allocated` and `max_memory_reserved`, and tokens/s:

* FSDP2 as torchtitan applies it: `fully_shard` on the embedding, on every block, on
  [final norm, output head] as one unit, then on the root; bf16 parameters, fp32
  reduce, fused AdamW, gradient clipping 1.0, the logits dropped before `backward()`;
  checkpointing by torch's `checkpoint_wrapper` per block (`full`), or with torchtitan's
  op-level policy (`selective_op`: every `mm` output saved but every second one, and the
  attention kernel's outputs).
* DeepSpeed ZeRO-2 and ZeRO-3, launched in-process on one rank (`deepspeed.initialize`)
  with the ds_config `distrecipe compile --target deepspeed` writes for the same recipe
  (`api.deepspeed_config`: FusedAdam, JIT-built on first use, buckets, clipping), the
  loop a Hugging Face model is trained in (its output, logits included, alive through
  backward); `full` checkpointing is transformers' `gradient_checkpointing_enable`.

One GPU means a world of one rank: FSDP2 and ZeRO "shard" over one rank, so every rank
holds the whole model state (16 bytes a parameter, as the plan's N = 1 says), while the
engines still run their gather, reduce and flat-buffer machinery. What such a run checks
is the plan's single-rank accounting (model state, activations and loss, the engines'
buffers and step temporaries, the allocator); dividing by N is what the CPU engine probe
checks (`tests/test_plan_engine.py`).

Every run is its own process (`--one`), so each starts with an empty caching allocator
and an OOM or a crash ends only that run; it is recorded, and the script goes on. The
cache the model's construction left is emptied before the first step; what the warm-up
steps cached stays, as in a training whose peak is read after some steps. A run is not
started when the time left under `--budget` is below the longest run so far (a first
guess before any). No CUDA: exit 2 with one line.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # this checkout's distrecipe, whatever is installed
    sys.path.insert(0, str(ROOT))

GiB = 2**30
WARMUP, MEASURED = 2, 3
"""Optimizer steps before the peak statistics are reset (Adam's state is made in the first),
and steps measured after."""

SHAPE = {"hidden_size": 2048, "layers": 16, "heads": 32, "kv_heads": 8, "intermediate_size": 8192,
         "vocab": 128256}
"""Llama 3.2 1B's shape with an untied output head: 1,498,482,688 parameters."""
TINY = {"hidden_size": 256, "layers": 2, "heads": 4, "kv_heads": 2, "intermediate_size": 768,
        "vocab": 4096}
"""`--tiny`: a few million parameters, for the GPU test's end-to-end run."""

COLUMNS = ("source_id", "model", "params", "layers", "hidden", "heads", "kv_heads", "ffn", "vocab",
           "gpus", "nodes", "gpu", "gpu_memory_GiB", "strategy", "zero_stage", "fsdp_reshard", "tp",
           "pp", "cp", "micro", "global_batch", "seq_len", "checkpointing", "precision", "compile",
           "memory_GiB", "memory_kind", "tokens_per_s_per_gpu", "tflops_per_gpu", "mfu", "notes")
"""`tests/corpus/gpu/published.csv`'s header (a test keeps them equal)."""

Engine = Literal["fsdp2", "zero2", "zero3"]
Checkpointing = Literal["none", "full", "selective_op"]
RECIPE_CHECKPOINTING = {"none": "none", "full": "full", "selective_op": "selective"}
ENGINE_MODULE = {"fsdp2": "torch", "zero2": "deepspeed", "zero3": "deepspeed"}
FIRST_GUESS_S = 60.0
"""A run's length before one has been timed (imports, NCCL, a FusedAdam build: tens of s)."""


@dataclass(frozen=True, slots=True)
class Run:
    engine: Engine
    micro: int
    seq_len: int
    checkpointing: Checkpointing

    @property
    def name(self) -> str:
        return f"{self.engine}-m{self.micro}-s{self.seq_len}-{self.checkpointing}"


RUNS = (
    Run("fsdp2", 1, 4096, "none"), Run("zero2", 1, 4096, "none"), Run("zero3", 1, 4096, "none"),
    Run("fsdp2", 2, 4096, "selective_op"), Run("fsdp2", 4, 4096, "full"),
    Run("zero2", 4, 4096, "full"), Run("zero3", 4, 4096, "full"),
    Run("fsdp2", 2, 8192, "none"), Run("zero3", 2, 8192, "full"), Run("fsdp2", 1, 16384, "full"),
)
"""In the order they start: each engine once first, so a short budget still covers all three."""


@dataclass(frozen=True, slots=True)
class Gpu:
    name: str
    """torch's device name, e.g. `NVIDIA H200`."""
    total_gib: float
    capability: str
    versions: dict[str, str]

    @property
    def card(self) -> str:
        """The name as the corpus spells cards (`H200`): `published.py` matches its start."""
        return self.name.removeprefix("NVIDIA ").strip()

    @property
    def slug(self) -> str:
        return re.sub(r"[^a-z0-9]+", "_", self.card.lower()).strip("_")

    @property
    def model(self) -> str | None:
        """The card as a `cluster.gpu` (`NVIDIA H200` → `h200`), where the GPU table has it and
        its memory is one of the card's sizes: then the plan predicts step time too. A MIG
        slice or a capped card states its memory alone (the table would refuse the pair)."""
        from distrecipe.engines.gpus import GPUS

        first = self.card.split()[0].lower() if self.card else ""
        spec = GPUS.get(first)  # type: ignore[call-overload]
        return first if spec is not None and spec.agrees(round(self.total_gib * 2**30)) else None

    @property
    def memory_gib(self) -> str:
        return f"{self.total_gib:.1f}"


@dataclass(frozen=True, slots=True)
class Measurement:
    allocated: float | None = None
    reserved: float | None = None
    device_used: float | None = None
    """`cudaMemGetInfo`'s used bytes at the end: what nvidia-smi shows (the plan's `needed`)."""
    tokens_per_s: float | None = None
    params: int | None = None
    failure: str | None = None
    """`OOM: ...`, `failed: ...`, `timed out ...`: the run gave no memory."""


def recipe(run: Run, gpu: Gpu, shape: dict[str, int]) -> dict[str, Any]:
    """The recipe a user would write for the run (as `tests/published.py` writes one per row)."""
    zero = run.engine != "fsdp2"
    return {
        "recipe": 1, "name": f"gpu-memory-{run.name}", "model": dict(shape),
        "cluster": {"nodes": 1, "gpus_per_node": 1, "gpu_memory": f"{float(gpu.memory_gib)}GiB",
                    **({"gpu": gpu.model} if gpu.model else {})},
        "strategy": "zero" if zero else "fsdp", "stage": int(run.engine[-1]) if zero else 3,
        "batch": {"micro": run.micro, "accumulation": 1, "global": run.micro, "seq_len": run.seq_len},
        "precision": "bf16", "activation_checkpointing": RECIPE_CHECKPOINTING[run.checkpointing],
        "optimizer": {"name": "adamw", "lr": 1.0e-5},  # DeepSpeed builds it: the ds_config must say so
        "launch": {"backend": "deepspeed" if zero else "torchrun"},
    }


def plan_for(run: Run, gpu: Gpu, shape: dict[str, int]) -> Any:
    import yaml

    from distrecipe import api
    from distrecipe.translator.load import recipe_from_text

    doc = recipe(run, gpu, shape)
    return api.plan_of_recipe(recipe_from_text(yaml.safe_dump(doc, sort_keys=False), doc["name"]))


def row_values(run: Run, gpu: Gpu, shape: dict[str, int], m: Measurement, prediction: Any,
               date: str, *, torch_adam: bool = False) -> list[dict[str, str]]:
    """Two rows per measured run (max reserved, max allocated), one without memory for a
    failed run; the plan's figures and the setup in `notes`."""
    plan = prediction.plan
    zero = run.engine != "fsdp2"
    adam = "its optimizer swapped for torch's fused AdamW (--torch-adam)" if torch_adam else "FusedAdam"
    engine = (f"DeepSpeed ZeRO-{run.engine[-1]} in-process on 1 rank, emitted ds_config ({adam}), "
              "HF loop (logits alive through backward)" if zero else
              "FSDP2 torchtitan-style (embedding, blocks, [norm, head], root; bf16 params, fp32 reduce), "
              "fused AdamW, logits dropped before backward")
    mem = prediction.memory
    predicted = (f"plan: allocated {mem.allocated / GiB:.2f} GiB, reserved {mem.reserved / GiB:.2f} GiB, "
                 f"needed {mem.needed / GiB:.2f} GiB, fits {'yes' if prediction.fits else 'no'}")
    if prediction.step is not None:
        predicted += f", {prediction.step.tokens_per_s_per_gpu:.0f} tokens/s"
    used = "" if m.device_used is None else f"; device used at the end {m.device_used / GiB:.2f} GiB"
    base = {
        "source_id": f"measured_here_{gpu.slug}_{date}",
        "model": f"Llama-shaped random ({shape['hidden_size']}h x {shape['layers']}L)",
        "params": str(m.params or int(plan.recipe.model.params)),
        "layers": str(shape["layers"]), "hidden": str(shape["hidden_size"]),
        "heads": str(shape["heads"]), "kv_heads": str(shape["kv_heads"]),
        "ffn": str(shape["intermediate_size"]), "vocab": str(shape["vocab"]),
        "gpus": "1", "nodes": "1",
        "gpu": f"{gpu.card} ({gpu.name}, sm {gpu.capability}; "
               + ", ".join(f"{k} {v}" for k, v in sorted(gpu.versions.items())) + ")",
        "gpu_memory_GiB": gpu.memory_gib,
        "strategy": "zero" if zero else "fsdp2", "zero_stage": run.engine[-1] if zero else "",
        "fsdp_reshard": "" if zero else "true", "tp": "1", "pp": "1", "cp": "1",
        "micro": str(run.micro), "global_batch": str(run.micro), "seq_len": str(run.seq_len),
        "checkpointing": run.checkpointing, "precision": "bf16", "compile": "no",
        "tokens_per_s_per_gpu": "" if m.tokens_per_s is None else f"{m.tokens_per_s:.0f}",
        "tflops_per_gpu": "", "mfu": "",
    }
    setup = f"benchmarks/gpu_memory.py run {run.name}: {engine}; sdpa; world 1 (nothing divided)"
    if m.failure is not None:
        return [_ordered({**base, "memory_GiB": "", "memory_kind": "",
                          "notes": f"{m.failure}. {setup}. {predicted}"})]
    window = f"over {MEASURED} steps after {WARMUP} warm-up steps, peak statistics reset between"
    return [
        _ordered({**base, "memory_GiB": f"{(m.reserved or 0) / GiB:.2f}",
                  "memory_kind": f"max_reserved (torch.cuda.max_memory_reserved {window})",
                  "notes": f"{setup}{used}. {predicted}"}),
        _ordered({**base, "memory_GiB": f"{(m.allocated or 0) / GiB:.2f}",
                  "memory_kind": f"max_allocated (torch.cuda.max_memory_allocated {window})",
                  "notes": f"{setup}{used}. {predicted}"}),
    ]


def _ordered(row: dict[str, str]) -> dict[str, str]:
    return {column: row[column] for column in COLUMNS}


def write_csv(path: Path, rows: Sequence[dict[str, str]]) -> None:
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)


def _error(measured: float | None, predicted: float) -> str:
    return "" if not measured else f"{predicted / measured - 1:+.1%}"


def table(results: Sequence[tuple[Run, Measurement, Any]]) -> str:
    """Measured beside predicted, GiB and tokens/s, error = predicted / measured − 1."""
    head = ("run", "alloc", "plan", "err", "reserved", "plan", "err", "tok/s", "plan", "err")
    lines = [head]
    for run, m, est in results:
        if m.failure is not None:
            lines.append((run.name, m.failure, "", "", "", "", "", "", "", ""))
            continue
        mem, tps = est.memory, (None if est.step is None else est.step.tokens_per_s_per_gpu)
        lines.append((run.name, f"{(m.allocated or 0) / GiB:.2f}", f"{mem.allocated / GiB:.2f}",
                      _error(m.allocated, mem.allocated), f"{(m.reserved or 0) / GiB:.2f}",
                      f"{mem.reserved / GiB:.2f}", _error(m.reserved, mem.reserved),
                      f"{m.tokens_per_s or 0:.0f}", "" if tps is None else f"{tps:.0f}",
                      "" if tps is None else _error(m.tokens_per_s, tps)))
    widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip()
                     for line in lines)


Runner = Callable[[Run, dict[str, Any], float], Measurement]


def measure_all(runs: Sequence[Run], jobs: dict[str, dict[str, Any]], runner: Runner, *, budget: float,
                clock: Callable[[], float] = time.monotonic,
                say: Callable[[str], None] = print) -> dict[str, Measurement]:
    """Run each job in order while the budget lasts: a run starts only if the time left is
    at least the longest run so far (`FIRST_GUESS_S` before any), and gets what is left.
    After a run of an engine fails (not an OOM: a crash, a failed FusedAdam build), that
    engine's other runs are not started: they would spend the budget failing the same way."""
    start, longest = clock(), FIRST_GUESS_S
    out: dict[str, Measurement] = {}
    broken: dict[str, str] = {}
    for i, run in enumerate(runs):
        if run.engine in broken:
            say(f"{run.name}: not started, {broken[run.engine]} failed")
            continue
        left = budget - (clock() - start)
        if left < longest:
            say(f"not started (budget: {left:.0f} s left, a run takes up to {longest:.0f} s): "
                + ", ".join(r.name for r in runs[i:] if r.engine not in broken))
            break
        say(f"{run.name} ...")
        began = clock()
        result = out[run.name] = runner(run, jobs[run.name], left)
        took = clock() - began
        if result.failure is None:
            longest = max(longest, took)
        elif result.failure.startswith("failed"):
            broken[run.engine] = run.name
        say(f"{run.name}: {result.failure or 'done'} ({took:.0f} s)")
    return out


def child_runner(run: Run, job: dict[str, Any], timeout: float) -> Measurement:
    """`--one` in a fresh process; its JSON result, or why there is none."""
    with tempfile.TemporaryDirectory() as tmp:
        job_path, result_path = Path(tmp) / "job.json", Path(tmp) / "result.json"
        job_path.write_text(json.dumps(job), encoding="utf-8")
        argv = [sys.executable, __file__, "--one", str(job_path), "--result", str(result_path)]
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
        except subprocess.TimeoutExpired:
            return Measurement(failure=f"timed out after {timeout:.0f} s (budget)")
        if not result_path.exists():
            last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
            return Measurement(failure=f"failed: exit {proc.returncode}: {last[:200]}")
        return Measurement(**json.loads(result_path.read_text(encoding="utf-8")))


PROBE = """
import json, sys
try:
    import torch
except ImportError:
    print(json.dumps({"why": "torch is not installed"})); sys.exit()
if not torch.cuda.is_available():
    print(json.dumps({"why": f"torch {torch.__version__} sees no CUDA GPU"})); sys.exit()
import importlib.metadata as md
versions = {}
for name in ("torch", "transformers", "deepspeed"):
    try:
        versions[name] = md.version(name)
    except md.PackageNotFoundError:
        pass
p = torch.cuda.get_device_properties(0)
print(json.dumps({"name": p.name, "total_gib": p.total_memory / 2**30,
                  "capability": f"{p.major}.{p.minor}", "versions": versions}))
"""


def probe_gpu() -> Gpu | str:
    """The GPU in a separate process (the parent never holds a CUDA context), or why none."""
    proc = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=False)
    try:
        found = json.loads(proc.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        return f"the CUDA probe failed (exit {proc.returncode})"
    return found["why"] if "why" in found else Gpu(**found)


def main(argv: Sequence[str] | None = None, *, probe: Callable[[], Gpu | str] = probe_gpu,
         runner: Runner = child_runner) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", ".")),
                        help="folder for the CSV (default: $OUT, else here)")
    parser.add_argument("--budget", type=float, default=480.0,
                        help="seconds; no run starts once too little is left (default 480)")
    parser.add_argument("--runs", default="", help="comma-separated run names (default: all)")
    parser.add_argument("--tiny", action="store_true", help="a model of a few million parameters")
    parser.add_argument("--torch-adam", action="store_true",
                        help="DeepSpeed steps with torch's fused AdamW (`torch_adam`), not its JIT-built "
                             "FusedAdam; both update in place, as the plan assumes")
    parser.add_argument("--date", default=datetime.date.today().strftime("%Y%m%d"))
    parser.add_argument("--one", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--result", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one is not None:
        return one(args.one, args.result)
    wanted = [n for n in args.runs.split(",") if n]
    unknown = sorted(set(wanted) - {r.name for r in RUNS})
    if unknown:
        print(f"gpu_memory: error: unknown run {', '.join(unknown)}; runs: "
              + ", ".join(r.name for r in RUNS), file=sys.stderr)
        return 2
    gpu = probe()
    if isinstance(gpu, str):
        print(f"gpu_memory: no CUDA GPU here: {gpu}; nothing measured", file=sys.stderr)
        return 2
    shape = TINY if args.tiny else SHAPE
    runs = [r for r in RUNS if not wanted or r.name in wanted]
    missing = {r.engine for r in runs if ENGINE_MODULE[r.engine] not in gpu.versions}
    if missing:
        print("not run, deepspeed is not installed (docs/plan.md, 'Measuring on a GPU'): "
              + ", ".join(r.name for r in runs if r.engine in missing))
        runs = [r for r in runs if r.engine not in missing]
    estimates, jobs = {}, {}
    from distrecipe.plan.report import estimate

    for run in runs:
        plan = plan_for(run, gpu, shape)
        estimates[run.name] = estimate(plan)
        jobs[run.name] = {"run": [run.engine, run.micro, run.seq_len, run.checkpointing],
                          "shape": shape, "capability": gpu.capability,
                          "ds_config": ds_config(plan, args.torch_adam) if run.engine != "fsdp2" else None}
    measured = measure_all(runs, jobs, runner, budget=args.budget)
    done = [r for r in runs if r.name in measured]
    rows = [row for r in done
            for row in row_values(r, gpu, shape, measured[r.name], estimates[r.name], args.date,
                                  torch_adam=args.torch_adam)]
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"gpu_memory_{gpu.slug}_{args.date}.csv"
    write_csv(path, rows)
    print(table([(r, measured[r.name], estimates[r.name]) for r in done]))
    print(f"{len(rows)} rows in {path} (error = plan / measured - 1)")
    return 0


def ds_config(plan: Any, torch_adam: bool) -> dict[str, Any]:
    """What `compile --target deepspeed` writes; with `torch_adam`, DeepSpeed's switch to
    `torch.optim.AdamW`, told `fused` (DeepSpeed passes the other params on to it)."""
    from distrecipe import api

    config = api.deepspeed_config(plan)
    if torch_adam:
        config["optimizer"]["params"].update({"torch_adam": True, "fused": True})
    return config


# --- the child: one training, in its own process ------------------------------------------


def one(job_path: Path, result_path: Path) -> int:
    """Train one job and write its Measurement as JSON; an OOM is a result, not a crash."""
    import torch

    job = json.loads(job_path.read_text(encoding="utf-8"))
    engine, micro, seq_len, checkpointing = job["run"]
    os.environ.update({"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1",
                       "MASTER_PORT": str(29500 + os.getpid() % 1000), "DS_ACCELERATOR": "cuda",
                       "TORCH_CUDA_ARCH_LIST": job["capability"]})
    torch.cuda.set_device(0)
    try:
        result = train(engine, micro, seq_len, checkpointing, job["shape"], job["ds_config"])
    except torch.OutOfMemoryError as exc:
        result = {"failure": "OOM: " + str(exc).splitlines()[0][:160]}
    result_path.write_text(json.dumps(result), encoding="utf-8")
    os._exit(0)  # skip NCCL's and DeepSpeed's teardown: the result is written


def train(engine: str, micro: int, seq_len: int, checkpointing: str, shape: dict[str, int],
          ds_config: dict[str, Any] | None) -> dict[str, Any]:
    import torch
    import torch.distributed as dist
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        hidden_size=shape["hidden_size"], num_hidden_layers=shape["layers"],
        num_attention_heads=shape["heads"], num_key_value_heads=shape["kv_heads"],
        intermediate_size=shape["intermediate_size"], vocab_size=shape["vocab"],
        max_position_embeddings=seq_len, tie_word_embeddings=False, attn_implementation="sdpa",
        use_cache=False)
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = LlamaForCausalLM(config)
    model.train()  # transformers' checkpointing acts in training mode only
    params = sum(p.numel() for p in model.parameters())
    ids = torch.randint(0, shape["vocab"], (micro, seq_len), device="cuda")
    if engine == "fsdp2":
        dist.init_process_group("nccl")
        step = fsdp2_step(model, checkpointing, ids)
    else:
        import deepspeed

        assert ds_config is not None
        deepspeed.init_distributed(dist_backend="nccl")
        if checkpointing == "full":
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        ds_engine, *_ = deepspeed.initialize(model=model, model_parameters=model.parameters(),
                                             config=ds_config)

        def step() -> None:
            out = ds_engine(input_ids=ids, labels=ids)
            ds_engine.backward(out.loss)
            ds_engine.step()
            del out

    del model
    torch.cuda.synchronize()
    torch.cuda.empty_cache()  # what building and wrapping the model cached is not training's
    for _ in range(WARMUP):
        step()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    began = time.perf_counter()
    for _ in range(MEASURED):
        step()
    torch.cuda.synchronize()
    seconds = time.perf_counter() - began
    free, total = torch.cuda.mem_get_info()
    return {"allocated": torch.cuda.max_memory_allocated(), "reserved": torch.cuda.max_memory_reserved(),
            "device_used": total - free, "tokens_per_s": MEASURED * micro * seq_len / seconds,
            "params": params}


def fsdp2_step(model: Any, checkpointing: str, ids: Any) -> Callable[[], None]:
    """torchtitan's wrapping and train step for a Hugging Face Llama."""
    import torch
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    from torch.utils.checkpoint import CheckpointPolicy, create_selective_checkpoint_contexts

    layers = model.model.layers
    for i, layer in enumerate(layers):
        if checkpointing == "full":
            layers[i] = checkpoint_wrapper(layer, preserve_rng_state=False)
        elif checkpointing == "selective_op":
            layers[i] = checkpoint_wrapper(layer, preserve_rng_state=False, context_fn=lambda: (
                create_selective_checkpoint_contexts(_op_sac_policy(torch, CheckpointPolicy))))
    mesh = init_device_mesh("cuda", (1,))
    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    fully_shard(model.model.embed_tokens, mesh=mesh, mp_policy=policy)
    for i, layer in enumerate(layers):
        fully_shard(layer, mesh=mesh, mp_policy=policy, reshard_after_forward=i < len(layers) - 1)
    fully_shard([model.model.norm, model.lm_head], mesh=mesh, mp_policy=policy, reshard_after_forward=False)
    fully_shard(model, mesh=mesh, mp_policy=policy)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5, fused=True)

    def step() -> None:
        loss = model(input_ids=ids, labels=ids).loss  # the output (logits) is dropped here
        loss.backward()
        del loss
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    return step


def _op_sac_policy(torch: Any, policy: Any) -> Callable[..., Any]:
    """torchtitan's op-level selective checkpointing (`selective_ac_option: op`): save the
    outputs of the ops in its list, except every second `mm`, counted afresh for each block's
    forward and recompute (a new policy per `context_fn` call). In a Llama block the `mm`s
    are q, k, v, o, gate, up, down: q, v, gate and down are saved."""
    aten = torch.ops.aten
    save = {aten.mm.default, aten._scaled_dot_product_efficient_attention.default,
            aten._scaled_dot_product_flash_attention.default,
            aten._scaled_dot_product_cudnn_attention.default, aten.max.default}
    counts = {"forward": 0, "recompute": 0}

    def decide(ctx: Any, func: Any, *args: Any, **kwargs: Any) -> Any:
        mode = "recompute" if ctx.is_recompute else "forward"
        if func == aten.mm.default:
            counts[mode] += 1
        keep = func in save and not (func == aten.mm.default and counts[mode] % 2 == 0)
        return policy.MUST_SAVE if keep else policy.PREFER_RECOMPUTE

    return decide


if __name__ == "__main__":
    raise SystemExit(main())
