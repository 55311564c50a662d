"""Statements of a file's world that contradict each other (`lint.world`).

Lint checks a file at the first statement of its world (its own, then `--world`, then
the launch scripts and Accelerate configs around it); a later one that disagrees does
not lose silently: it means the batch rules ran at a world other than someone meant.
"""

from __future__ import annotations

from collections.abc import Iterator

from distrecipe.keys import integer
from distrecipe.lint.rule import Problem
from distrecipe.lint.workspace import Source
from distrecipe.lint.world import World


def _own(src: Source) -> World | None:
    return next((world for world in src.worlds if world.by == "file"), None)


def world_contradicts_option(src: Source) -> Iterator[Problem]:
    """`--world` says one number of ranks, the file another: the file wins, silently.

    A recipe's cluster, an Accelerate config's `num_processes`, verl's
    `trainer.nnodes × trainer.n_gpus_per_node` and a launch script's own launcher options
    decide how many ranks the job starts; `--world` only fills in a world a file does not
    state. When both are given and differ, lint checks the file at its own world, and
    one of the two numbers is wrong: the CI line or the file.

    Fails: accelerate --world 16
    ```yaml
    distributed_type: MULTI_GPU
    num_machines: 1
    num_processes: 8
    ```

    Passes: accelerate --world 8
    ```yaml
    distributed_type: MULTI_GPU
    num_machines: 1
    num_processes: 8
    ```

    Fix: the same number in both, or leave `--world` out for files that state their own.
    """
    own = _own(src)
    option = next((world for world in src.worlds if world.by == "option"), None)
    if own is None or option is None or own.ranks == option.ranks:
        return
    yield Problem((), f"--world {option.ranks} but the file runs on {own.ranks} ranks ({own.source}): "
                      f"the launcher starts {own.ranks}, and lint checked the file at {own.ranks}",
                  where=own.where)


def world_sources_disagree(src: Source) -> Iterator[Problem]:
    """A launch script starts the file at a world its Accelerate config does not state.

    `accelerate launch --num_processes N --config_file FILE` wins over the file's own
    `num_processes`, so the number written in the file is not what runs. Likewise a
    ds_config that a launch script runs at one world while the Accelerate config beside
    it, naming the same ds_config, says another: one of them describes another job.

    Fails: accelerate
    ```yaml accelerate_config.yaml
    distributed_type: MULTI_GPU
    num_machines: 1
    num_processes: 8
    ```
    ```text run.sh
    accelerate launch --config_file accelerate_config.yaml --num_processes 16 train.py
    ```

    Passes: accelerate
    ```yaml accelerate_config.yaml
    distributed_type: MULTI_GPU
    num_machines: 1
    num_processes: 16
    ```
    ```text run.sh
    accelerate launch --config_file accelerate_config.yaml --num_processes 16 train.py
    ```

    Fix: one number: in the file (and drop the option), or in the launch option alone.
    """
    launched = [world for world in src.worlds if world.by == "launch"]
    if src.kind == "accelerate":
        own = _own(src)
        for world in launched:
            if own is not None and world.ranks != own.ranks:
                yield Problem(("num_processes",), f"num_processes {own.ranks}, but {world.source} wins over "
                                                  f"it: the job starts {world.ranks} processes")
        return
    consumers = [s for s in src.workspace.references.consumers(src.path) if s.kind == "accelerate"]
    for sibling in consumers:
        stated = integer(sibling.doc.data.get("num_processes"))
        for world in launched:
            if stated is not None and world.ranks != stated:
                yield Problem((), f"{sibling.path.name} runs this file on num_processes {stated} ranks, but "
                                  f"{world.source} starts {world.ranks}: one of them describes another job")
