"""The batch equation, `micro × accumulation × DP = global`, in recipes and ds_configs."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from distrecipe.engines.deepspeed import BATCH_KEYS
from distrecipe.job import data_parallel, model_parallel
from distrecipe.keys import integer
from distrecipe.lint.rule import Problem
from distrecipe.lint.workspace import Source
from distrecipe.recipe import batch_from_script
from distrecipe.source import KeyPath
from distrecipe.translator.resolve import nearest_multiples


@dataclass(frozen=True, slots=True)
class Batch:
    """The three batch numbers as written (None: absent or `auto`), and the DP world."""

    total: int | None
    micro: int | None
    accumulation: int | None
    dp: int | None
    dp_text: str
    """How DP was obtained, e.g. `DP 16 (world 32 from --world / sequence_parallel_size 2)`."""
    names: tuple[str, str, str]
    paths: tuple[KeyPath, KeyPath, KeyPath]

    def name(self, which: int, value: int | None) -> str:
        return f"{self.names[which]} {value}"


def facts(src: Source) -> Batch | None:
    """Read the batch numbers of a ds_config or a recipe, in one vocabulary."""
    if src.kind == "deepspeed":
        keys = tuple(BATCH_KEYS.values())
        sp = integer(src.get("sequence_parallel_size")) or 1
        dp = data_parallel(src.ranks, sp) if src.ranks else None
        by_sp = f" / sequence_parallel_size {sp})" if sp > 1 else ")"
        text = f"DP {dp} (world {src.world}{by_sp}"
        values = [integer(src.get(k)) for k in keys]
        return Batch(values[0], values[1], values[2], dp, text, keys, tuple((k,) for k in keys))  # type: ignore[arg-type]
    if src.kind == "recipe":
        cluster, parallel = src.section("cluster"), src.section("parallel")
        nodes, gpus = integer(cluster.get("nodes", 1)), integer(cluster.get("gpus_per_node"))
        split = [integer(parallel.get(k, 1)) or 1 for k in ("tensor", "pipeline", "sequence")]
        replica = model_parallel(*split)
        world = nodes * gpus if nodes and gpus else None
        dp = data_parallel(world, replica) if world else None
        text = f"DP {dp} (nodes {nodes} × gpus_per_node {gpus}" + (
            f" / model parallel {replica})" if replica > 1 else ")")
        keys = tuple(BATCH_KEYS)
        values = [integer(src.get("batch", k)) for k in keys]
        return Batch(values[0], values[1], values[2], dp, text,
                     ("batch.global", "batch.micro", "batch.accumulation"),
                     tuple(("batch", k) for k in keys))  # type: ignore[arg-type]
    return None


def batch_mismatch(src: Source) -> Iterator[Problem]:
    """micro × accumulation × DP does not equal the global batch.

    All three batch numbers are written and disagree. DeepSpeed checks this only when
    `deepspeed.initialize` runs on the cluster (`train_batch_size is not equal to
    micro_batch_per_gpu * gradient_acc_step * world_size`); distrecipe refuses such a
    recipe. DP is the data-parallel world: the world size divided by the sequence
    parallel size (DeepSpeed) or by tensor × pipeline × sequence (recipe).

    Fails: deepspeed --world 4
    ```json
    {"train_batch_size": 32, "train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 4}
    ```
    (4 × 4 × 4 = 64.)

    Passes: deepspeed --world 4
    ```json
    {"train_batch_size": 64, "train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 4}
    ```

    Fix: change one number, or write only two and let the third be derived.
    """
    b = facts(src)
    if b is None or None in (b.total, b.micro, b.accumulation, b.dp):
        return
    assert b.total is not None and b.micro is not None and b.accumulation is not None and b.dp is not None
    product = b.micro * b.accumulation * b.dp
    if product != b.total and b.dp <= b.total:  # DP > global is DR103's, more precise
        yield Problem(b.paths[0], (
            f"{b.name(0, b.total)} != {b.name(1, b.micro)} × {b.name(2, b.accumulation)} × {b.dp_text} "
            f"= {product}; set {b.names[0]} to {product}, or change one factor"))


def batch_not_exact(src: Source) -> Iterator[Problem]:
    """The batch number to be derived is not a whole number, so DeepSpeed floors it.

    With two of the three batch numbers written, DeepSpeed derives the third with
    integer division and only then asserts the product, so the error it prints on the
    cluster names the floored value: train_batch_size 30 at DP 4 gives micro 7 and
    "30 != 7 * 1 * 4"; train_batch_size 32 with micro 16 at DP 4 gives
    "Gradient accumulation steps: 0". distrecipe never rounds either.

    Fails: deepspeed --world 4
    ```json
    {"train_batch_size": 30, "gradient_accumulation_steps": 1}
    ```

    Passes: deepspeed --world 4
    ```json
    {"train_batch_size": 32, "gradient_accumulation_steps": 1}
    ```
    (micro 8.)

    Fix: a global batch that DP × the written factor divides; the message names the
    nearest ones.
    """
    b = facts(src)
    if b is None:
        return
    written = [(i, v) for i, v in enumerate((b.total, b.micro, b.accumulation)) if v is not None and v <= 0]
    for i, value in written:
        yield Problem(b.paths[i], f"{b.name(i, value)} must be a positive integer: "
                                  + ("DeepSpeed refuses it at start-up" if src.kind == "deepspeed"
                                     else "a batch of no samples trains nothing"))
    if written or b.total is None or b.dp is None or b.dp > b.total:
        return
    if b.micro is not None and b.accumulation is None:
        divisor, missing, given = b.micro * b.dp, 2, f"{b.name(1, b.micro)} × {b.dp_text}"
    elif b.accumulation is not None and b.micro is None:
        divisor, missing, given = b.accumulation * b.dp, 1, f"{b.name(2, b.accumulation)} × {b.dp_text}"
    elif b.micro is None and b.accumulation is None:
        divisor, missing, given = b.dp, 1, b.dp_text
    else:
        return
    if b.total % divisor == 0:
        return
    floored = b.total // divisor
    nearest = " or ".join(map(str, nearest_multiples(b.total, divisor)))
    consequence = (
        f"DeepSpeed floors {b.names[missing]} to {floored} and then fails"
        + (" (it must be > 0)" if floored == 0 else "") if src.kind == "deepspeed"
        else "distrecipe refuses to round"
    )
    yield Problem(b.paths[0], (
        f"{b.name(0, b.total)} is not a multiple of {given} = {divisor}: {consequence}; "
        f"nearest valid {b.names[0]}: {nearest}"))


def dp_exceeds_global(src: Source) -> Iterator[Problem]:
    """More data-parallel ranks than samples in the global batch.

    Every rank needs at least one sample per step: with DP ranks and a global batch
    below DP, DeepSpeed floors the derived micro-batch (or accumulation) to 0 and then
    asserts it is greater than 0 (`Micro batch size per gpu: 0 has to be greater than 0`).

    Fails: deepspeed --world 32
    ```json
    {"train_batch_size": 16}
    ```

    Passes: deepspeed --world 32
    ```json
    {"train_batch_size": 32}
    ```

    Fix: a global batch ≥ DP, or fewer data-parallel ranks (more tensor or sequence
    parallelism, fewer GPUs).
    """
    b = facts(src)
    if b is not None and b.total is not None and b.dp is not None and b.dp > b.total:
        yield Problem(b.paths[0], (
            f"{b.name(0, b.total)} is smaller than {b.dp_text}: every data-parallel rank needs at "
            f"least one sample; use {b.names[0]} ≥ {b.dp} or fewer ranks"))


def no_batch_size(src: Source) -> Iterator[Problem]:
    """Neither the global batch nor the micro-batch is given.

    DeepSpeed needs `train_batch_size` or `train_micro_batch_size_per_gpu` (it refuses
    "Either train_batch_size or train_micro_batch_size_per_gpu needs to be provided");
    a recipe needs `batch.global` or `batch.micro` (with both left out, nothing fixes the
    batch). `gradient_accumulation_steps` alone is not enough. A recipe that writes both
    `auto` says the training script decides the batch (what `import` writes for an HF
    Trainer template or an Accelerate config): that is not an error here, and `compile`
    asks for `--set batch.micro=N`.

    Fails: deepspeed --world 8
    ```json
    {"gradient_accumulation_steps": 4, "zero_optimization": {"stage": 2}}
    ```

    Passes: deepspeed --world 8
    ```json
    {"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 4, "zero_optimization": {"stage": 2}}
    ```

    Fix: add `"train_micro_batch_size_per_gpu"` (or the global batch).
    """
    b = facts(src)
    if b is None or b.total is not None or b.micro is not None:
        return
    if src.kind == "deepspeed" and "auto" in (src.get(*b.paths[0]), src.get(*b.paths[1])):
        return  # a ds_config's "auto" is reported (or accepted) by DR310, not here
    if src.kind == "recipe" and batch_from_script(src.get("batch")):
        return  # written auto on purpose: the training script decides
    path = b.paths[2] if b.accumulation is not None else (("batch",) if src.kind == "recipe" else ())
    yield Problem(path, f"neither {b.names[0]} nor {b.names[1]} is given; one of them is required")


def world_unknown(src: Source) -> Iterator[Problem]:
    """The world size is unknown, so the batch rules cannot run on this ds_config.

    A ds_config does not say how many ranks it runs on; DeepSpeed takes it from the
    launcher. distrecipe takes it from `--world N`, from `world` in `[tool.distrecipe]`,
    from a launch script that passes the file, or from `num_processes` of an Accelerate
    config that names it (`deepspeed_config_file`); an Accelerate config that names
    another ds_config, or none, runs another job and says nothing of this one's world.

    Fails: deepspeed
    ```json
    {"train_micro_batch_size_per_gpu": 2, "zero_optimization": {"stage": 2}}
    ```

    Passes: deepspeed --world 32
    ```json
    {"train_micro_batch_size_per_gpu": 2, "zero_optimization": {"stage": 2}}
    ```

    Fix: `distrecipe lint ds_config.json --world 32`.
    """
    if src.ranks is None:
        yield Problem((), "world size unknown, batch rules skipped: pass --world N or set "
                          "[tool.distrecipe] world (or lint it with the launch script or Accelerate "
                          "config that names it)")
