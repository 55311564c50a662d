"""Accelerate config YAML (1.15): what `accelerate launch` refuses, ignores, or rewrites.

Unknown keys are judged in `unknown_keys.py`, from the key tables generated from the
installed Accelerate (`engines/tables`).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from distrecipe.engines.accelerate import DS_FILE_CONFLICTS, FSDP1_ONLY, FSDP2_DROPPED, RESHARD_OF
from distrecipe.engines.native import ds_reference
from distrecipe.engines.tables import label, release, release_key, releases, table, table_of
from distrecipe.keys import did_you_mean, integer
from distrecipe.lint.rule import Problem
from distrecipe.lint.workspace import Source


def fsdp1_key_under_fsdp2(src: Source) -> Iterator[Problem]:
    """An FSDP1-only key under `fsdp_version: 2` that Accelerate drops with a warning.

    FSDP2 (`fully_shard`) has no prefetch flags; Accelerate accepts the file and drops
    `fsdp_backward_prefetch` under version 2, with a warning in every worker's log
    ("backward_prefetch is not supported in FSDP2"). A warning here too, since the log
    says it; the keys Accelerate drops without a word are DR332's errors, and a value
    Accelerate refuses under version 2 (`fsdp_reshard_after_forward: SHARD_GRAD_OP`) is
    DR330's.

    Fails: accelerate
    ```yaml
    distributed_type: FSDP
    num_processes: 8
    fsdp_config:
      fsdp_version: 2
      fsdp_backward_prefetch: BACKWARD_PRE
    ```

    Passes: accelerate
    ```yaml
    distributed_type: FSDP
    num_processes: 8
    fsdp_config:
      fsdp_version: 2
      fsdp_reshard_after_forward: true
    ```

    Fix: delete the key: FSDP2 prefetches as `fully_shard` decides.
    """
    yield from (problem for problem, warned in _fsdp1_dropped(src) if warned)


def fsdp1_key_dropped_silently(src: Source) -> Iterator[Problem]:
    """An FSDP1-only key under `fsdp_version: 2` that Accelerate drops without a word.

    FSDP2 (`fully_shard`) has no sharding strategy and no forward prefetch; Accelerate
    accepts the file and, under version 2, never reads `fsdp_sharding_strategy` or
    `fsdp_forward_prefetch`, with nothing in the log: the setting never applies.
    `fsdp_sharding_strategy: SHARD_GRAD_OP` (ZeRO-2) becomes FSDP2's default
    `reshard_after_forward: true` (ZeRO-3, 1.5× the traffic); `HYBRID_SHARD` shards over
    every rank instead of within a node, so all traffic crosses nodes. A strategy that
    agrees with a written `fsdp_reshard_after_forward` loses nothing and is not reported,
    nor are `fsdp_use_orig_params` and `fsdp_sync_module_states`, which FSDP2 no longer
    needs. Which keys Accelerate warns about is read from the installed plugin by the
    oracle test (`engines.accelerate.FSDP2_DROPPED`).

    Fails: accelerate
    ```yaml
    distributed_type: FSDP
    num_processes: 8
    fsdp_config:
      fsdp_version: 2
      fsdp_sharding_strategy: HYBRID_SHARD
    ```

    Passes: accelerate
    ```yaml
    distributed_type: FSDP
    num_processes: 8
    fsdp_config:
      fsdp_version: 2
      fsdp_reshard_after_forward: true
    parallelism_config:
      parallelism_config_dp_replicate_size: 2
      parallelism_config_dp_shard_size: 4
    ```

    Fix: `fsdp_reshard_after_forward: true|false`; for hybrid sharding,
    `parallelism_config_dp_replicate_size` × `parallelism_config_dp_shard_size`.
    """
    yield from (problem for problem, warned in _fsdp1_dropped(src) if not warned)


def _fsdp1_dropped(src: Source) -> Iterator[tuple[Problem, bool]]:
    """Each FSDP1-only key under `fsdp_version: 2` whose request is lost, and whether
    Accelerate warns that it drops it."""
    fsdp = src.get("fsdp_config")
    if not isinstance(fsdp, dict) or str(fsdp.get("fsdp_version")) != "2":
        return
    for key in FSDP1_ONLY:
        written = key if key in fsdp else key.removeprefix("fsdp_")
        value = fsdp.get(written)
        if value is None or value is False or str(value).upper() in ("NO_PREFETCH", "NONE"):
            continue
        if key == "fsdp_sharding_strategy":
            strategy = str(value).upper()
            reshard = fsdp.get("fsdp_reshard_after_forward", fsdp.get("reshard_after_forward"))
            if "HYBRID" not in strategy and reshard is RESHARD_OF.get(strategy, not reshard):
                continue
            if "HYBRID" in strategy:
                lost = ("HYBRID_SHARD is lost: FSDP2 shards over all ranks; "
                        "use parallelism_config dp_replicate × dp_shard")
            elif reshard is None:
                lost = "FSDP2's default fsdp_reshard_after_forward: true applies, which is ZeRO-3"
            else:
                lost = f"fsdp_reshard_after_forward: {str(reshard).lower()} decides instead"
        else:
            lost = "prefetching is not configured this way in FSDP2"
        warned = FSDP2_DROPPED[key]
        does = (f"Accelerate warns \"{warned}\" and runs without it" if warned
                else "Accelerate drops it without a warning, so the setting never applies")
        yield Problem(("fsdp_config", written), f"fsdp_config.{written}: {value} is FSDP1-only; under "
                      f"fsdp_version 2 {does} ({lost})", key=True), warned is not None


def deepspeed_file_conflict(src: Source) -> Iterator[Problem]:
    """An Accelerate setting that conflicts with `deepspeed_config_file`.

    With a ds_config file, that file is the only source of the ZeRO stage, offload,
    accumulation, clipping and precision; Accelerate raises ("When using
    `deepspeed_config_file`, the following accelerate config variables will be
    ignored") when its own YAML also sets `gradient_accumulation_steps`,
    `gradient_clipping`, `zero_stage`, offload devices or NVMe paths,
    `zero3_save_16bit_model`, or a top-level `mixed_precision` (even `no`; only an
    absent or null one is left to the ds_config).

    Fails: accelerate
    ```yaml
    distributed_type: DEEPSPEED
    num_processes: 8
    deepspeed_config:
      deepspeed_config_file: ds.json
      zero_stage: 2
    ```
    ```json ds.json
    {"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 1, "zero_optimization": {"stage": 2}}
    ```

    Passes: accelerate
    ```yaml
    distributed_type: DEEPSPEED
    num_processes: 8
    deepspeed_config:
      deepspeed_config_file: ds.json
    ```
    ```json ds.json
    {"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 1, "zero_optimization": {"stage": 2}}
    ```

    Fix: delete the key from the YAML and set it in the ds_config.
    """
    ds = src.get("deepspeed_config")
    if not isinstance(ds, dict) or not ds.get("deepspeed_config_file"):
        return
    for key in DS_FILE_CONFLICTS:
        if key in ds:
            yield Problem(("deepspeed_config", key), f"deepspeed_config.{key} conflicts with "
                          "deepspeed_config_file: Accelerate refuses both; set it in the ds_config", key=True)
    if src.get("mixed_precision") is not None and src.get("distributed_type") == "DEEPSPEED":
        yield Problem(("mixed_precision",), "mixed_precision conflicts with deepspeed_config_file: "
                      "Accelerate refuses both; the ds_config's bf16/fp16 blocks decide", key=True)


def deepspeed_file_without_accumulation(src: Source) -> Iterator[Problem]:
    """The ds_config used through Accelerate has no `gradient_accumulation_steps`.

    Accelerate then writes `gradient_accumulation_steps: 1` into it, which overrides
    `Accelerator(gradient_accumulation_steps=...)` and the
    `ACCELERATE_GRADIENT_ACCUMULATION_STEPS` the launcher exports (only a warning in
    the log says so): the job steps the optimizer every micro-batch, with a global
    batch smaller than intended by the accumulation factor.

    Fails: accelerate
    ```yaml
    distributed_type: DEEPSPEED
    num_processes: 8
    deepspeed_config:
      deepspeed_config_file: ds.json
    ```
    ```json ds.json
    {"train_micro_batch_size_per_gpu": 2, "zero_optimization": {"stage": 2}}
    ```

    Passes: accelerate
    ```yaml
    distributed_type: DEEPSPEED
    num_processes: 8
    deepspeed_config:
      deepspeed_config_file: ds.json
    ```
    ```json ds.json
    {"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 4, "zero_optimization": {"stage": 2}}
    ```

    Fix: write `gradient_accumulation_steps` in the ds_config.
    """
    for ds in _referenced(src):
        if "gradient_accumulation_steps" not in ds.data:
            yield Problem(("deepspeed_config", "deepspeed_config_file"),
                          f"{ds.doc.file} has no gradient_accumulation_steps: Accelerate inserts 1, "
                          "overriding the Accelerator's accumulation")


def deepspeed_file_without_zero(src: Source) -> Iterator[Problem]:
    """The ds_config used through Accelerate has no `zero_optimization` block.

    Accelerate's DeepSpeed plugin refuses a config file without one (it reads the ZeRO
    stage from it), when `accelerate launch` starts the job.

    Fails: accelerate
    ```yaml
    distributed_type: DEEPSPEED
    num_processes: 8
    deepspeed_config:
      deepspeed_config_file: ds.json
    ```
    ```json ds.json
    {"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 1}
    ```

    Passes: accelerate
    ```yaml
    distributed_type: DEEPSPEED
    num_processes: 8
    deepspeed_config:
      deepspeed_config_file: ds.json
    ```
    ```json ds.json
    {"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 1, "zero_optimization": {"stage": 0}}
    ```

    Fix: add `"zero_optimization": {"stage": 0}` (or the stage you mean).
    """
    for ds in _referenced(src):
        if not isinstance(ds.data.get("zero_optimization"), dict):
            yield Problem(("deepspeed_config", "deepspeed_config_file"),
                          f"{ds.doc.file} has no zero_optimization block; Accelerate refuses it")


def parallelism_size(src: Source) -> Iterator[Problem]:
    """A `parallelism_config` mesh that Accelerate refuses.

    `ParallelismConfig` and `Accelerator()` check the mesh on every rank of the
    launched job: sizes are at least 1; context and sequence parallelism exclude each
    other; context parallelism cannot sit beside pure replication (dp_replicate > 1
    with dp_shard 1), nor tensor parallelism before Accelerate 1.16 (read from the
    judging release's table); dp_replicate × dp_shard × tp × cp × sp must
    equal `num_processes` ("ParallelismConfig total_size ... does not match
    num_processes"), unless the mesh is all ones (filled with replicas) or uses
    DeepSpeed's sequence parallelism (the default `sp_backend`, which sizes its own
    groups); and FSDP2 needs dp_shard or cp above 1 to shard over.

    Fails: accelerate
    ```yaml
    distributed_type: FSDP
    num_processes: 16
    fsdp_config:
      fsdp_version: 2
    parallelism_config:
      parallelism_config_dp_replicate_size: 2
      parallelism_config_dp_shard_size: 4
    ```

    Passes: accelerate
    ```yaml
    distributed_type: FSDP
    num_processes: 16
    fsdp_config:
      fsdp_version: 2
    parallelism_config:
      parallelism_config_dp_replicate_size: 2
      parallelism_config_dp_shard_size: 8
    ```

    Fix: sizes whose product is `num_processes`.
    """
    mesh = src.section("parallelism_config")
    if not mesh:
        return
    names = ("dp_replicate", "dp_shard", "tp", "cp", "sp")
    sizes = {name: integer(mesh.get(f"parallelism_config_{name}_size", 1)) for name in names}
    at = ("parallelism_config",)
    small = [name for name, size in sizes.items() if size is not None and size < 1]
    if small:
        yield Problem(at, f"parallelism_config {small[0]}_size must be at least 1", key=True)
        return
    if None in sizes.values():
        return
    size = {name: value or 1 for name, value in sizes.items()}
    if size["cp"] > 1 and size["sp"] > 1:
        yield Problem(at, "parallelism_config: context (cp) and sequence (sp) parallelism exclude each other",
                      key=True)
        return
    beside = table("accelerate").get("beside_replication", {"tp": False, "cp": False})
    refused = [name for name, what in (("tp", "tensor"), ("cp", "context"))
               if size[name] > 1 and not beside[name]]
    if refused and size["dp_replicate"] > 1 and size["dp_shard"] == 1:
        name = refused[0]
        what = "tensor" if name == "tp" else "context"
        yield Problem(at, f"parallelism_config: {what} parallelism cannot sit beside pure replication "
                      f"(dp_replicate > 1 with dp_shard 1) in {label('accelerate')}{_accepted_later(name)}",
                      key=True)
        return
    total = size["dp_replicate"] * size["dp_shard"] * size["tp"] * size["cp"] * size["sp"]
    processes = integer(src.get("num_processes"))
    deepspeed_sp = mesh.get("parallelism_config_sp_backend", "deepspeed") == "deepspeed" and size["sp"] > 1
    factors = " × ".join(f"{name} {value}" for name, value in size.items() if value != 1)
    if processes == 1 and total == 1:
        return  # one process: no mesh at all
    if processes is not None and total not in (1, processes) and not deepspeed_sp:
        yield Problem(at, f"parallelism_config {factors} = {total}, but num_processes is {processes}: "
                      "Accelerator() refuses the mesh", key=True)
    elif src.get("distributed_type") == "FSDP" and size["dp_shard"] == 1 and size["cp"] == 1:
        yield Problem(at, f"parallelism_config {factors} leaves FSDP2 nothing to shard over "
                      "(dp_shard and cp are 1): Accelerator() refuses it", key=True)
    elif processes == 1 and src.get("distributed_type") not in ("FSDP", "DEEPSPEED"):
        yield Problem(at, f"parallelism_config {factors} on a single process: Accelerator() accepts a mesh "
                      "only with FSDP2, DeepSpeed or several processes", key=True)


def processes_per_machine(src: Source) -> Iterator[Problem]:
    """`num_processes` that does not split evenly over `num_machines`.

    `num_processes` counts every process of the job; the launcher starts
    `num_processes // num_machines` on each machine, flooring, so the job runs with
    fewer ranks than the config says, and every batch number derived from the world
    size is off, without an error.

    Fails: accelerate
    ```yaml
    distributed_type: MULTI_GPU
    num_machines: 4
    num_processes: 30
    ```
    (7 per machine: 28 ranks.)

    Passes: accelerate
    ```yaml
    distributed_type: MULTI_GPU
    num_machines: 4
    num_processes: 32
    ```

    Fix: a multiple of `num_machines` (the total, not the per-machine count).
    """
    processes, machines = integer(src.get("num_processes")), integer(src.get("num_machines"))
    if processes and machines and machines > 1 and processes % machines:
        per = processes // machines
        yield Problem(("num_processes",), f"num_processes {processes} over num_machines {machines}: "
                      f"the launcher starts {per} per machine, {per * machines} ranks in all")


def no_num_processes(src: Source) -> Iterator[Problem]:
    """A distributed config without `num_processes`, and no launch that passes it.

    Accelerate reads a missing `num_processes` as -1 (meant for SLURM jobs that pass
    it), and `accelerate launch` refuses the file: "You need to manually pass in
    `--num_processes` using this config yaml". Only `distributed_type: NO` defaults to
    one process. An `accelerate launch --config_file` in a linted script that passes
    `--num_processes` makes the file usable; one that does not is named.

    Fails: accelerate
    ```yaml
    distributed_type: FSDP
    fsdp_config:
      fsdp_version: 2
      fsdp_reshard_after_forward: true
    ```

    Passes: accelerate
    ```yaml
    distributed_type: FSDP
    num_processes: 8
    fsdp_config:
      fsdp_version: 2
      fsdp_reshard_after_forward: true
    ```

    Fix: write `num_processes` (every process of the job), or launch with
    `accelerate launch --num_processes N --config_file FILE`.
    """
    kind = src.get("distributed_type")
    if kind is None or str(kind).upper() == "NO" or src.data.get("num_processes", -1) != -1:
        return
    if any(did_you_mean(str(key), ["num_processes"]) for key in src.data if key != "num_processes"):
        return  # a misspelt num_processes: DR341 names it
    launches = src.workspace.accelerate_launches(src.path)
    if launches and all(launch.option("num_processes") is not None for _, launch in launches):
        return
    missing = [line for line, launch in launches if launch.option("num_processes") is None]
    how = (f"{', '.join(missing)} launches it without --num_processes" if missing
           else "unless the launch passes --num_processes")
    at = ("num_processes",) if "num_processes" in src.data else ("distributed_type",)
    yield Problem(at, f"no num_processes with distributed_type {kind}: accelerate launch refuses this file "
                  f"(\"You need to manually pass in `--num_processes`\") {how}",
                  key="num_processes" in src.data)


def ds_config_outside_repository(src: Source) -> Iterator[Problem]:
    """A ds_config named by an absolute path outside the repository.

    Every node of the job opens the file the config names (`accelerate launch` exports
    `deepspeed_config_file` to each worker, whose `DeepSpeedPlugin` reads it; a
    TrainingArguments `deepspeed` is read on every rank), so a path into one machine's
    home directory works where it was written and fails on each node without that file
    ("Expected a string path to an existing deepspeed config"). A path inside the
    repository (the checkout every node runs) or relative to where the job is launched
    is not reported.

    Fails: accelerate
    ```yaml
    distributed_type: DEEPSPEED
    num_processes: 8
    deepspeed_config:
      deepspeed_config_file: /home/ubuntu/configs/ds_z2.json
    ```

    Passes: accelerate
    ```yaml
    distributed_type: DEEPSPEED
    num_processes: 8
    deepspeed_config:
      deepspeed_config_file: ds.json
    ```
    ```json ds.json
    {"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 1, "zero_optimization": {"stage": 2}}
    ```

    Fix: keep the ds_config in the repository and name it relative to where the job is
    launched (or put it on storage every node mounts at that path).
    """
    ref = ds_reference(src.kind, src.data)
    if ref is None or not os.path.isabs(ref) or src.within:
        return
    references = src.workspace.references
    fences = [*references.launch_directories(src.path, src.workspace.roots.get(os.path.abspath(src.path))),
              Path(os.path.abspath(src.path.parent))]
    target = os.path.realpath(ref)
    if any(target.startswith(os.path.realpath(fence) + os.sep) for fence in fences):
        return
    key = "deepspeed_config_file" if src.kind == "accelerate" else "deepspeed"
    at = ("deepspeed_config", key) if src.kind == "accelerate" else (key,)
    yield Problem(at, f"{key} {ref} is an absolute path outside the repository: every node of the job opens "
                      "it, so the job fails unless that file exists at that path on each node; keep the "
                      "ds_config in the repository and name it relative to where the job is launched")


def _referenced(src: Source) -> list[Source]:
    ref = ds_reference(src.kind, src.data)
    companion = src.workspace.companion(src.path, ref) if ref else None
    return [companion] if companion is not None else []


def _accepted_later(name: str) -> str:
    """` (accepted from Accelerate 1.16.0; the project runs 1.15.0 (installed))` where a
    later release's table accepts `name` beside pure replication; else nothing."""
    chosen = release("accelerate")
    later = [version for version in releases("accelerate")
             if release_key(version) > release_key(chosen.table)
             and table_of("accelerate", version).get("beside_replication", {}).get(name)]
    if not later:
        return ""
    return f" (accepted from Accelerate {later[0]}; the project runs {chosen.runs} ({chosen.where}))"
