"""The reference trainer: a tiny model trained for real through DeepSpeed, FSDP2 or DDP.

"The DeepSpeed config and the FSDP2 config distrecipe emits are equivalent" is only
true if training with them gives the same numbers. This trainer makes that checkable
on two CPU processes in seconds: an MLP of 86,544 parameters, a fixed synthetic data
set, and a global sample order that depends only on the step, so every engine sees the
same samples in every optimizer step whatever the rank count or accumulation.

Contract with `distrecipe launch` (the run directory is the interface):

* the resolved plan is `plan.json` in the run directory (`$DISTRECIPE_RUN_DIR`, or
  `--plan PATH`); it gives strategy, stage, precision, offload, batch and optimizer;
* DeepSpeed runs take their settings from the emitted ds_config
  (`--deepspeed_config PATH`, DeepSpeed's own flag, else `ds_config.json` in the run
  directory) and the trainer checks that DeepSpeed derived the plan's batch from it;
* FSDP2 (`strategy: fsdp`) applies `fully_shard` with `reshard_after_forward` = stage 3,
  the precision as a `MixedPrecisionPolicy` and CPU offload when the plan offloads;
  DDP (`strategy: ddp`) wraps `DistributedDataParallel`.

Accumulation is applied the same way everywhere: each micro-batch loss is divided by
the accumulation count (DeepSpeed does that itself inside `engine.backward`), and only
the last micro-step synchronises gradients. Rank 0 prints one JSON line per optimizer
step, `{"step", "loss", "grad_norm", "samples", "samples_total"}`, where `samples` is
all-reduced over ranks and `grad_norm` is the global norm before clipping (Adam is
blind to a constant gradient scale, so the norm is what exposes an accumulation
mistake), and appends it to `metrics.jsonl` in the run directory.

With `--model recipe` it trains the recipe's own model shape instead (`model.hidden_size`,
`layers`, `heads`, `intermediate_size`, `vocab`: a Llama-style block of RMSNorm, causal
attention and a SwiGLU MLP, random weights, synthetic tokens of `batch.seq_len`), which is
what `plan --search --measure` times; a recipe asking for what this trainer does not do
(tensor, pipeline or sequence parallelism, selective recomputation) is refused, never run
as something else. `checkpointing: full` recomputes every block (`torch.utils.checkpoint`).

Every step's wall-clock seconds go into the records (`step_seconds`, rank 0's, measured
up to the all-reduce that ends the step) and, on GPUs, each rank appends its allocator's
peaks at the end (`launch.metrics`), so `launch` can write `measured.json`.

Run it as a module (`-m distrecipe.launch.tiny_train`) under any launcher; it imports
torch at the top because only rank processes ever import it.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import dataclasses
import json
import logging
import os
import signal
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, NoReturn

import torch
import torch.distributed as dist
from torch import nn

from distrecipe.checkpoints.layout import prune
from distrecipe.launch import metrics
from distrecipe.launch.launchers.deepspeed import DS_CONFIG
from distrecipe.launch.resume import CHECKPOINT_DIR_ENV, KEEP_ENV, RESUME_ENV, SAVE_EVERY_ENV
from distrecipe.launch.rundir import PLAN_FILE

Engine = Literal["deepspeed", "fsdp2", "ddp"]
ModelKind = Literal["mlp", "recipe"]

FEATURES, HIDDEN, OUTPUTS = 64, 256, 16
DATASET_SIZE = 4096
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


@dataclass(frozen=True, kw_only=True, slots=True)
class TrainSettings:
    """What one training run needs, read from the resolved plan."""

    engine: Engine
    device: Literal["cpu", "gpu"]
    micro: int
    accumulation: int
    global_batch: int
    precision: Literal["fp32", "bf16", "fp16"]
    reshard_after_forward: bool
    """FSDP2 only: stage 3 re-shards parameters after forward (ZeRO-3), stage 2 keeps them."""
    offload: bool
    """FSDP2 only: its CPU offload moves parameters, gradients and the optimizer step."""
    optimizer: Mapping[str, Any] | None
    grad_clip: float | None
    steps: int
    seed: int = 0
    model: ModelKind = "mlp"
    """`mlp`: the fixed 86k-parameter regression model; `recipe`: the recipe's model shape."""
    shape: Mapping[str, Any] | None = None
    """The recipe's `model` (plan.json), for `model: recipe`."""
    seq_len: int = 0
    checkpointing: str = "none"
    pace: float = 0.0
    """Seconds to wait after each step: time for the fault tests to interrupt a run."""

    @classmethod
    def from_plan(cls, plan: Mapping[str, Any], *, steps: int, deepspeed: bool,
                  model: ModelKind = "mlp") -> TrainSettings:
        """Pick the engine the plan describes (`plan.json`, `job.plan_dict`); DeepSpeed whenever
        its config is in play."""
        recipe, batch = plan["recipe"], plan["resolved_batch"]
        strategy = recipe["strategy"]
        engine: Engine
        if deepspeed or strategy == "zero":
            engine = "deepspeed"
        elif strategy == "fsdp":
            engine = "fsdp2"
        elif strategy == "ddp":
            engine = "ddp"
        else:
            raise SystemExit(f"tiny_train: strategy {strategy!r} is not supported by the reference trainer")
        offload = recipe["offload"]
        return cls(
            engine=engine,
            device=recipe["cluster"]["device"],
            micro=batch["micro"],
            accumulation=batch["accumulation"],
            global_batch=batch["global_"],
            precision=plan["precision"],
            reshard_after_forward=plan["stage"] >= 3,
            offload=offload["params"] != "none" or offload["optimizer"] != "none",
            optimizer=recipe["optimizer"],
            grad_clip=recipe["grad_clip"],
            steps=steps,
            model=model,
            shape=recipe["model"],
            seq_len=recipe["batch"]["seq_len"] or 0,
            checkpointing=recipe["activation_checkpointing"],
        )

    def refusal(self, plan: Mapping[str, Any]) -> str | None:
        """What `model: recipe` cannot reproduce of the plan (None: nothing)."""
        if self.model != "recipe":
            return None
        shape = self.shape or {}
        missing = [key for key in ("hidden_size", "layers", "heads", "vocab") if not shape.get(key)]
        if missing or not self.seq_len:
            return f"the recipe's model needs {', '.join(missing) or 'batch.seq_len'} for --model recipe"
        width = shape["hidden_size"] // shape["heads"]
        if (shape.get("kv_heads") not in (None, shape["heads"]) or shape.get("tied_embeddings")
                or shape.get("experts") or shape.get("head_dim") not in (None, width)):
            return ("grouped-query heads, tied embeddings, experts or a head width of its own are "
                    "not reproduced")
        dims = plan["dims"]
        for name in ("tensor", "pipeline", "sequence"):
            if dims[name] != 1:
                return f"parallel.{name} {dims[name]} is not reproduced by the reference trainer"
        if self.checkpointing not in ("none", "full"):
            return f"activation_checkpointing {self.checkpointing} is not reproduced by the reference trainer"
        return None


def build_model(seed: int) -> nn.Sequential:
    """Same initial weights on every rank and for every engine: seeded construction."""
    torch.manual_seed(seed)
    return nn.Sequential(
        nn.Linear(FEATURES, HIDDEN), nn.Tanh(),
        nn.Linear(HIDDEN, HIDDEN), nn.Tanh(),
        nn.Linear(HIDDEN, OUTPUTS),
    )


class RMSNorm(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.weight


class Block(nn.Module):
    """One Llama-style block: pre-norm causal attention, pre-norm SwiGLU MLP."""

    def __init__(self, hidden: int, heads: int, intermediate: int, *, recompute: bool) -> None:
        super().__init__()
        self.heads, self.recompute = heads, recompute
        self.attention_norm, self.mlp_norm = RMSNorm(hidden), RMSNorm(hidden)
        self.qkv = nn.Linear(hidden, 3 * hidden, bias=False)
        self.out = nn.Linear(hidden, hidden, bias=False)
        self.gate_up = nn.Linear(hidden, 2 * intermediate, bias=False)
        self.down = nn.Linear(intermediate, hidden, bias=False)

    def _forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, h = x.shape
        q, k, v = self.qkv(self.attention_norm(x)).view(b, s, 3, self.heads, h // self.heads).unbind(2)
        attended = nn.functional.scaled_dot_product_attention(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True)
        x = x + self.out(attended.transpose(1, 2).reshape(b, s, h))
        gate, up = self.gate_up(self.mlp_norm(x)).chunk(2, dim=-1)
        out: torch.Tensor = x + self.down(nn.functional.silu(gate) * up)
        return out

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.recompute and torch.is_grad_enabled():
            out: torch.Tensor = torch.utils.checkpoint.checkpoint(self._forward, x, use_reentrant=False)
            return out
        return self._forward(x)


def build_recipe_model(settings: TrainSettings) -> nn.Sequential:
    """The recipe's shape with random (seeded) weights: embedding, blocks, norm, output head."""
    torch.manual_seed(settings.seed)
    shape = settings.shape or {}
    hidden, vocab = int(shape["hidden_size"]), int(shape["vocab"])
    intermediate = int(shape.get("intermediate_size") or 4 * hidden)
    blocks = [Block(hidden, int(shape["heads"]), intermediate, recompute=settings.checkpointing == "full")
              for _ in range(int(shape["layers"]))]
    return nn.Sequential(nn.Embedding(vocab, hidden), *blocks, RMSNorm(hidden),
                         nn.Linear(hidden, vocab, bias=False))


def synthetic_tokens(settings: TrainSettings, index: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Random tokens for the samples `index` names (each sample's seeded by its number), and
    the next-token targets."""
    vocab = int((settings.shape or {})["vocab"])
    rows = [torch.randint(vocab, (settings.seq_len + 1,),
                          generator=torch.Generator().manual_seed(settings.seed + int(i))) for i in index]
    tokens = torch.stack(rows)
    return tokens[:, :-1], tokens[:, 1:]


def cross_entropy(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return nn.functional.cross_entropy(output.float().flatten(0, 1), target.flatten())


def build_dataset(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A fixed regression task (a random non-linear teacher), identical on every rank.

    Easy enough that ten steps at lr 1e-3 visibly learn (the demo's loss falls by about
    a third), so a run that agrees with another is agreeing about training.
    """
    generator = torch.Generator().manual_seed(seed + 1)
    inputs = torch.randn(DATASET_SIZE, FEATURES, generator=generator)
    teacher = torch.randn(FEATURES, OUTPUTS, generator=generator) / FEATURES**0.5
    return inputs, torch.sin(inputs @ teacher)


def sample_indices(settings: TrainSettings, *, step: int, micro_step: int, rank: int) -> torch.Tensor:
    """The global order: step s consumes samples [s·global, (s+1)·global) of the data set.

    Inside a step, micro-step a on rank r takes the `micro` samples at offset
    (a·dp + r)·micro, so the union over ranks and micro-steps is exactly that window.
    """
    dp = settings.global_batch // (settings.micro * settings.accumulation)
    start = step * settings.global_batch + (micro_step * dp + rank) * settings.micro
    return torch.arange(start, start + settings.micro) % DATASET_SIZE


def max_norm(grad_clip: float | None) -> float:
    """The clipping norm: the recipe's, 0 for none, and where it states none the engines'
    common default, 1.0 (DeepSpeed, the Trainer and verl all clip there)."""
    return 1.0 if grad_clip is None else grad_clip or float("inf")


REFERENCE_LR = 1e-3
"""The reference trainer's own learning rate, where the recipe states none: it is the script."""


def build_optimizer(params: Iterator[nn.Parameter], spec: Mapping[str, Any] | None) -> torch.optim.Optimizer:
    """The recipe's optimizer with what it states; torch's defaults for the rest (AdamW at
    `REFERENCE_LR` where the recipe states no optimizer)."""
    spec = spec or {"name": "adamw"}
    stated = {key: spec.get(key) for key in ("betas", "eps", "weight_decay")}
    kwargs: dict[str, Any] = {"lr": spec.get("lr") or REFERENCE_LR}
    kwargs |= {key: tuple(value) if key == "betas" else value for key, value in stated.items()
               if value is not None and not (spec["name"] == "sgd" and key in ("betas", "eps"))}
    kind = {"sgd": torch.optim.SGD, "adamw": torch.optim.AdamW, "adam": torch.optim.Adam}[spec["name"]]
    optimizer: torch.optim.Optimizer = kind(params, **kwargs)
    return optimizer


@dataclass(frozen=True, slots=True)
class Stepper:
    """One engine behind one interface: forward+backward a micro-batch, then step."""

    forward_backward: Callable[[torch.Tensor, torch.Tensor, bool], torch.Tensor]
    """(inputs, targets, last micro-step?) → the micro-batch's unscaled loss."""
    step: Callable[[], float | None]
    """Finish the optimizer step; returns the global gradient norm before clipping."""
    input_dtype: torch.dtype
    save: Callable[[Path, int], Path]
    """Save the whole training state after `step` optimizer steps into the save dir, the
    engine's own way (DeepSpeed's `save_checkpoint`, a DCP folder for FSDP2/DDP); returns
    the checkpoint written."""
    load: Callable[[Path], int]
    """Load a checkpoint saved by `save`; returns the optimizer steps it holds."""


def mse(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return nn.functional.mse_loss(output.float(), target)


def loss_of(settings: TrainSettings) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    return cross_entropy if settings.model == "recipe" else mse


def deepspeed_stepper(settings: TrainSettings, model: nn.Module, ds_config: dict[str, Any]) -> Stepper:
    """DeepSpeed scales each micro loss by 1/accumulation and steps at the boundary itself."""
    import deepspeed

    quiet_deepspeed(settings)
    config = copy.deepcopy(ds_config)
    if "optimizer" in config:
        engine, *_ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=config)
    else:
        optimizer = build_optimizer(model.parameters(), settings.optimizer)
        engine, *_ = deepspeed.initialize(model=model, optimizer=optimizer, config=config)
    derived = (engine.train_micro_batch_size_per_gpu(), engine.gradient_accumulation_steps(),
               engine.train_batch_size())
    wanted = (settings.micro, settings.accumulation, settings.global_batch)
    if derived != wanted:
        raise SystemExit(f"tiny_train: DeepSpeed derived micro/accumulation/global {derived} "
                         f"from the config, the plan says {wanted}")
    dtype = torch.bfloat16 if config.get("bf16", {}).get("enabled") else (
        torch.float16 if config.get("fp16", {}).get("enabled") else torch.float32)

    def forward_backward(inputs: torch.Tensor, target: torch.Tensor, last: bool) -> torch.Tensor:
        loss = loss_of(settings)(engine(inputs), target)
        engine.backward(loss)
        engine.step()  # a no-op except at the accumulation boundary
        return loss.detach()

    def step() -> float | None:
        norm = engine.get_global_grad_norm()  # computed by DeepSpeed at the boundary
        return None if norm is None else float(norm)

    def save(directory: Path, done: int) -> Path:
        if killed_in_save(done):
            # Die inside DeepSpeed's save, after the tag check and rank 0's model states,
            # before this rank's optimizer shard: a rank lost mid-save, for the fault tests.
            engine._save_zero_checkpoint = lambda *_: os.kill(os.getpid(), signal.SIGKILL)
        engine.save_checkpoint(str(directory), tag=f"global_step{done}", client_state={"step": done})
        return directory / f"global_step{done}"  # returns after DeepSpeed's closing barrier

    def load(path: Path) -> int:
        loaded, client = engine.load_checkpoint(str(path.parent), tag=path.name)
        if loaded is None:
            raise SystemExit(f"tiny_train: DeepSpeed loaded no checkpoint from {path}")
        return int(client["step"])

    return Stepper(forward_backward, step, dtype, save, load)


def torch_stepper(settings: TrainSettings, model: nn.Sequential, device: torch.device) -> Stepper:
    """DDP or FSDP2: divide by accumulation, sync only on the last micro-step, clip, step."""
    dtype = DTYPES[settings.precision]
    autocast_dtype = dtype if settings.engine == "ddp" and dtype != torch.float32 else None
    if settings.engine == "fsdp2":
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import CPUOffloadPolicy, MixedPrecisionPolicy, fully_shard

        mesh = init_device_mesh(device.type, (dist.get_world_size(),))
        options: dict[str, Any] = {
            "mesh": mesh,
            "reshard_after_forward": settings.reshard_after_forward,
            "mp_policy": MixedPrecisionPolicy(param_dtype=dtype, reduce_dtype=torch.float32),
        }
        if settings.offload and device.type == "cuda":  # on CPU ranks there is nothing to offload
            options["offload_policy"] = CPUOffloadPolicy()
        for layer in model.children():
            if isinstance(layer, (nn.Linear, Block)):
                fully_shard(layer, **options)
        sharded = fully_shard(model, **options)  # the same module object, now sharded
        wrapped: nn.Module = model

        def sync(last: bool) -> contextlib.AbstractContextManager[None]:
            sharded.set_requires_gradient_sync(last)
            return contextlib.nullcontext()
    else:
        ddp = nn.parallel.DistributedDataParallel(model.to(device))
        wrapped = ddp

        def sync(last: bool) -> contextlib.AbstractContextManager[None]:
            return contextlib.nullcontext() if last else ddp.no_sync()

    optimizer = build_optimizer(wrapped.parameters(), settings.optimizer)
    scaler = torch.amp.GradScaler(device.type, enabled=autocast_dtype == torch.float16)

    def forward_backward(inputs: torch.Tensor, target: torch.Tensor, last: bool) -> torch.Tensor:
        with sync(last):
            with torch.autocast(device.type, dtype=autocast_dtype or torch.float32,
                                enabled=autocast_dtype is not None):
                loss = loss_of(settings)(wrapped(inputs), target)
            scaled: torch.Tensor = scaler.scale(loss / settings.accumulation)
            torch.autograd.backward(scaled)
        return loss.detach()

    def save(directory: Path, done: int) -> Path:
        from torch.distributed.checkpoint.state_dict import get_state_dict
        from torch.distributed.checkpoint.state_dict_saver import save as dcp_save

        model_state, optim_state = get_state_dict(wrapped, optimizer)
        dcp_save({"model": model_state, "optim": optim_state}, checkpoint_id=directory / f"step-{done}")
        return directory / f"step-{done}"  # `.metadata` written after every rank's shards

    def load(path: Path) -> int:
        from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
        from torch.distributed.checkpoint.state_dict_loader import load as dcp_load

        model_state, optim_state = get_state_dict(wrapped, optimizer)
        dcp_load({"model": model_state, "optim": optim_state}, checkpoint_id=path)  # in place
        set_state_dict(wrapped, optimizer, model_state_dict=model_state, optim_state_dict=optim_state)
        return int(path.name.rsplit("-", 1)[1])

    def step() -> float | None:
        scaler.unscale_(optimizer)
        norm = nn.utils.clip_grad_norm_(wrapped.parameters(), max_norm(settings.grad_clip))
        if hasattr(norm, "full_tensor"):  # FSDP2: a DTensor norm over the shards
            norm = norm.full_tensor()
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad(set_to_none=True)
        return float(norm)

    return Stepper(forward_backward, step, torch.float32, save, load)


def train(settings: TrainSettings, *, ds_config: dict[str, Any] | None,
          emit: Callable[[dict[str, Any]], None], saving: Saving | None = None) -> list[dict[str, Any]]:
    """Train up to `settings.steps` optimizer steps in an initialised process group,
    resuming from and saving checkpoints as `saving` says.

    Returns the per-step records (on every rank; they are all-reduced) and hands each
    to `emit` on rank 0. A resumed run continues the global sample order at the step the
    checkpoint holds, so its records are the uninterrupted run's from there on.
    """
    rank, world = dist.get_rank(), dist.get_world_size()
    if settings.micro * settings.accumulation * world != settings.global_batch:
        raise SystemExit(f"tiny_train: micro {settings.micro} × accumulation {settings.accumulation} "
                         f"× ranks {world} != global {settings.global_batch}")
    device = (torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
              if settings.device == "gpu" else torch.device("cpu"))
    built = build_recipe_model(settings) if settings.model == "recipe" else build_model(settings.seed)
    model = built.to(device)
    if settings.engine == "deepspeed":
        if ds_config is None:
            raise SystemExit("tiny_train: a ZeRO plan needs the emitted ds_config (--deepspeed_config)")
        stepper = deepspeed_stepper(settings, model, ds_config)
    else:
        stepper = torch_stepper(settings, model, device)
    inputs, targets = build_dataset(settings.seed)

    def samples(index: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if settings.model == "recipe":
            return synthetic_tokens(settings, index)
        return inputs[index].to(stepper.input_dtype), targets[index]

    records: list[dict[str, Any]] = []
    start = stepper.load(saving.resume) if saving is not None and saving.resume is not None else 0
    samples_total = start * settings.global_batch
    asked = save_requests()
    for step in range(start, settings.steps):
        started = time.perf_counter()
        loss_sum = torch.zeros((), dtype=torch.float64)
        seen = 0
        for micro_step in range(settings.accumulation):
            index = sample_indices(settings, step=step, micro_step=micro_step, rank=rank)
            batch, target = samples(index)
            loss = stepper.forward_backward(batch.to(device), target.to(device),
                                            micro_step == settings.accumulation - 1)
            loss_sum += loss.double().cpu()
            seen += len(index)
        grad_norm = stepper.step()
        seen_total = torch.tensor(float(seen), dtype=torch.float64)
        totals = torch.stack([loss_sum / settings.accumulation, seen_total]).to(device)  # NCCL: on GPU
        dist.all_reduce(totals)
        totals = totals.cpu()
        samples_total += int(totals[1])
        record = {"step": step + 1, "loss": float(totals[0]) / world, "grad_norm": grad_norm,
                  "samples": int(totals[1]), "samples_total": samples_total,
                  "step_seconds": round(time.perf_counter() - started, 6)}
        records.append(record)
        if rank == 0:
            emit(record)
        saved = False
        if saving is not None and saving.directory is not None and saving.every \
                and (step + 1) % saving.every == 0:
            saving.pruned(stepper.save(saving.directory, step + 1), rank)
            saved = True
        if agreed(asked, device):
            if saving is not None and saving.directory is not None and not saved:
                saving.pruned(stepper.save(saving.directory, step + 1), rank)
            if rank == 0:
                print(f"tiny_train: SIGUSR1: saved after step {step + 1}, stopping", file=sys.stderr,
                      flush=True)
            break
        if settings.pace:
            time.sleep(settings.pace)
    return records


def save_requests() -> list[int]:
    """SIGUSR1 (SLURM's warning before the time limit, passed on by `launch`) is noted
    here and acted on at the end of the step, when every rank agrees (`agreed`)."""
    asked: list[int] = []
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGUSR1, lambda signum, frame: asked.append(signum))
    return asked


def agreed(asked: list[int], device: torch.device) -> bool:
    """Whether any rank was asked to save: one all-reduce per step, so every rank stops
    after the same step (a save is collective)."""
    flag = torch.tensor([1.0 if asked else 0.0], device=device)
    dist.all_reduce(flag, op=dist.ReduceOp.MAX)
    return bool(flag.item())


@dataclass(frozen=True, slots=True)
class Saving:
    """Where checkpoints go (`DISTRECIPE_CHECKPOINT_DIR`), how often, and the one to resume
    from (`DISTRECIPE_RESUME`, a checkpoint folder): what `launch` passes a raw script."""

    directory: Path | None
    every: int | None
    resume: Path | None
    keep: int | None = None
    """`checkpoint.keep` (`DISTRECIPE_CHECKPOINT_KEEP`): the complete checkpoints kept."""

    def pruned(self, saved: Path, rank: int) -> None:
        """After a save every rank has finished, rank 0 deletes the oldest complete
        checkpoints beyond `keep` (`layout.prune`: never `saved`, never a partial one)."""
        if rank != 0 or self.keep is None or self.directory is None:
            return
        for gone in prune(self.directory, self.keep, saved):
            print(f"tiny_train: checkpoint.keep {self.keep}: deleted {gone}", file=sys.stderr, flush=True)


def universal(ds_config: dict[str, Any], resume: Path | None) -> dict[str, Any]:
    """The ds_config with `checkpoint.load_universal` on when `resume` is a universal
    checkpoint (`ds_to_universal`'s `zero/` folder): DeepSpeed reads it only so."""
    if resume is None or not (resume / "zero").is_dir():
        return ds_config
    return {**ds_config, "checkpoint": {**ds_config.get("checkpoint", {}), "load_universal": True}}


def skip_shm_build() -> None:
    """Keep DeepSpeed on CPU from JIT-building its shared-memory all-reduce.

    It is a speed-up for large CPU tensors and costs a build of minutes on a fresh
    machine (at process-group creation, which `deepspeed.initialize` may do itself);
    gloo alone carries the same bytes exactly.
    """
    import deepspeed.ops

    deepspeed.ops.__compatible_ops__["deepspeed_shm_comm"] = False


def quiet_deepspeed(settings: TrainSettings) -> None:
    """Keep DeepSpeed from compiling and from drowning the per-step loss lines."""
    import deepspeed

    if settings.device == "cpu":
        skip_shm_build()
    deepspeed.utils.logger.setLevel(logging.WARNING)


def init_process_group(settings: TrainSettings) -> None:
    backend = "gloo" if settings.device == "cpu" else "nccl"
    if settings.device == "gpu":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    if settings.engine == "deepspeed":
        import deepspeed

        quiet_deepspeed(settings)
        deepspeed.init_distributed(dist_backend=backend)
    else:
        dist.init_process_group(backend)


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m distrecipe.launch.tiny_train")
    parser.add_argument("--plan", type=Path,
                        help="resolved plan JSON (default: $DISTRECIPE_RUN_DIR/plan.json)")
    parser.add_argument("--deepspeed_config", type=Path, help="emitted ds_config (DeepSpeed's flag)")
    parser.add_argument("--steps", type=int, default=10, help="optimizer steps (default 10)")
    parser.add_argument("--model", choices=["mlp", "recipe"], default="mlp",
                        help="mlp: the fixed regression model (default); recipe: the recipe's model "
                             "shape, random weights, synthetic tokens")
    parser.add_argument("--pace", type=float, default=0.0, help="seconds to wait after each step (default 0)")
    parser.add_argument("--local_rank", type=int, help="appended by the deepspeed launcher; unused")
    parser.add_argument("--save-dir", type=Path,
                        help=f"checkpoint directory (default: ${CHECKPOINT_DIR_ENV})")
    parser.add_argument("--save-every", type=int, help=f"save every N steps (default: ${SAVE_EVERY_ENV})")
    parser.add_argument("--resume", type=Path, help=f"checkpoint to resume from (default: ${RESUME_ENV})")
    parser.add_argument("--keep", type=int, help=f"complete checkpoints to keep (default: ${KEEP_ENV}; all)")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    # FSDP2 and DeepSpeed call collectives torch 2.13 renamed; the warning says nothing
    # to a user and would bury the per-step lines.
    warnings.filterwarnings("ignore", message=r"`torch\.distributed\.\w+` is deprecated",
                            category=FutureWarning)
    run_dir = Path(os.environ["DISTRECIPE_RUN_DIR"]) if "DISTRECIPE_RUN_DIR" in os.environ else None
    plan_path = args.plan or (run_dir / PLAN_FILE if run_dir else None)
    if plan_path is None:
        raise SystemExit("tiny_train: no plan: pass --plan or run under `distrecipe launch`")
    plan = json.loads(plan_path.read_text())
    ds_path = args.deepspeed_config
    if ds_path is None and run_dir is not None and plan["recipe"]["strategy"] == "zero":
        ds_path = run_dir / DS_CONFIG
    planned = TrainSettings.from_plan(plan, steps=args.steps, deepspeed=args.deepspeed_config is not None,
                                      model=args.model)
    settings = dataclasses.replace(planned, pace=args.pace)
    refused = settings.refusal(plan)
    if refused is not None:
        raise SystemExit(f"tiny_train: {refused}")
    saving = Saving(directory=args.save_dir or _env_path(CHECKPOINT_DIR_ENV),
                    every=args.save_every or int(os.environ.get(SAVE_EVERY_ENV, "0") or 0) or None,
                    resume=args.resume or _env_path(RESUME_ENV),
                    keep=args.keep or int(os.environ.get(KEEP_ENV, "0") or 0) or None)
    ds_config = universal(json.loads(ds_path.read_text()), saving.resume) if ds_path is not None else None
    if metrics.METRICS not in os.environ and run_dir is not None:  # started by hand with a run directory
        os.environ[metrics.METRICS] = str(run_dir / metrics.METRICS_FILE)

    def emit(record: dict[str, Any]) -> None:
        print(json.dumps(record), flush=True)
        metrics.record(**record)

    init_process_group(settings)
    try:
        train(settings, ds_config=ds_config, emit=emit, saving=saving)
    except torch.OutOfMemoryError:
        metrics.record(rank=dist.get_rank(), out_of_memory=True)
        raise
    finally:
        if settings.device == "gpu":
            metrics.record(rank=dist.get_rank(), reserved_bytes=torch.cuda.max_memory_reserved(),
                           allocated_bytes=torch.cuda.max_memory_allocated())
        dist.destroy_process_group()
    return 0


KILL_IN_SAVE = "DISTRECIPE_TINY_KILL_IN_SAVE"
"""`STEP:RANK`: that rank dies (SIGKILL) in the middle of the save after STEP — the fault
tests' lost rank. Read by the reference trainer only."""


def killed_in_save(step: int) -> bool:
    spec = os.environ.get(KILL_IN_SAVE, "")
    return spec == f"{step}:{dist.get_rank()}"


def _env_path(name: str) -> Path | None:
    value = os.environ.get(name)
    return Path(value) if value else None


def exit_without_teardown(code: int) -> NoReturn:
    """End the rank once its output is flushed, skipping the interpreter's teardown.

    gloo's worker threads release each finished collective (and the tensors it holds)
    after the caller's `wait()` has returned, and releasing a tensor that Python also
    wraps takes the GIL. If the main thread is already tearing the interpreter down, a
    thread that asks for the GIL is ended by `pthread_exit`, which C++ turns into
    `std::terminate`: the rank dies with SIGABRT after a run that succeeded (seen about
    once in ten two-node runs on two busy cores). `destroy_process_group` cannot join
    those threads first, because a live `DeviceMesh` (kept by DTensor's caches) still
    owns the process group. Nothing the trainer needs runs at teardown, so skip it.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    exit_without_teardown(main())
