"""`distrecipe init`: write a first recipe, the search's winner, asking for what is missing.

The answer to `accelerate config`: from a model (`--hf-config` or its shape), a cluster
(`--nodes`, `--gpus-per-node`, `--gpu`), a global batch and a sequence length, and
optionally the engine or the training script, it writes the fastest recipe that fits
(`distrecipe.starter`), commented, with the runners-up. In a terminal it asks for each
missing answer (click prompts, only when stdin is a TTY); otherwise a missing flag is an
error naming every missing flag, so a script never hangs on a prompt.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, get_args

import click

from distrecipe.output import write_files
from distrecipe.recipe import Gpu
from distrecipe.starter import ENGINES, REQUIRED_SHAPE, SHAPE_KEYS, Request, starter

GPU_NAMES: tuple[str, ...] = get_args(Gpu)
FLAGS = {key: "--" + key.replace("_", "-") for key in SHAPE_KEYS}


def interactive() -> bool:
    """Prompts only where someone can answer them."""
    return sys.stdin.isatty()


def _ask(answers: dict[str, Any], missing: list[str], key: str, flag: str, text: str, kind: Any,
         default: Any = None) -> None:
    if answers.get(key) is not None:
        return
    if interactive():
        answers[key] = click.prompt(text, type=kind, default=default)
    elif default is not None:
        answers[key] = default
    else:
        missing.append(flag)


def init_recipe(answers: dict[str, Any], output: str | None, force: bool) -> int:
    """Ask for (or refuse without) what is missing, search, and write the winner."""
    missing: list[str] = []
    shape = {key: answers.get(key) for key in SHAPE_KEYS}
    if answers.get("hf_config") is None and not any(shape.values()) and interactive():
        path = click.prompt("Hugging Face config.json of the model (empty: give its shape instead)",
                            default="", show_default=False)
        answers["hf_config"] = path or None
    if answers.get("hf_config") is None:
        lacking: list[str] = []
        for key in REQUIRED_SHAPE:
            _ask(shape, lacking, key, FLAGS[key], f"model {key.replace('_', ' ')}", click.IntRange(1))
        if lacking:
            missing.append(f"--hf-config (or {', '.join(lacking)})")
    _ask(answers, missing, "nodes", "--nodes", "nodes", click.IntRange(1), default=1)
    _ask(answers, missing, "gpus_per_node", "--gpus-per-node", "GPUs per node", click.IntRange(1, 1024))
    _ask(answers, missing, "gpu", "--gpu", "GPU model", click.Choice(GPU_NAMES))
    _ask(answers, missing, "global_batch", "--global-batch", "global batch (samples per optimizer step)",
         click.IntRange(1))
    _ask(answers, missing, "seq_len", "--seq-len", "sequence length (tokens per sample)", click.IntRange(1))
    if missing:
        raise click.UsageError(f"init needs {', '.join(missing)} (no terminal to ask on: stdin is not a TTY)")
    target = Path(output) if output else None
    if target is not None and target.exists() and not force:
        raise click.UsageError(f"{target} exists; init writes a new recipe (--force to replace it)")
    request = Request(hf_config=answers.get("hf_config"),
                      shape={k: v for k, v in shape.items() if v is not None},
                      nodes=answers["nodes"], gpus_per_node=answers["gpus_per_node"], gpu=answers["gpu"],
                      gpu_memory=answers.get("gpu_memory"), headroom=answers.get("headroom"),
                      cpu_memory=answers.get("cpu_memory"),
                      global_batch=answers["global_batch"],
                      seq_len=answers["seq_len"], engine=answers.get("engine"), script=answers.get("script"),
                      name=answers.get("name"), output=target)
    made = starter(request)
    if target is None:
        click.echo(made.text, nl=False)
    else:
        write_files(target.parent, {target.name: made.text})
        click.echo(f"wrote {target}: {made.ranked[0].estimate.label}, the fastest of {len(made.ranked)} "
                   "that fit", err=True)
    return 0


@click.command("init")
@click.option("--hf-config", type=click.Path(dir_okay=False), help="The model's Hugging Face config.json.")
@click.option("--params", type=click.IntRange(1), help="Or the model's shape: parameters (default: counted).")
@click.option("--hidden-size", type=click.IntRange(1))
@click.option("--layers", type=click.IntRange(1))
@click.option("--heads", type=click.IntRange(1))
@click.option("--kv-heads", type=click.IntRange(1))
@click.option("--intermediate-size", type=click.IntRange(1))
@click.option("--vocab", type=click.IntRange(1))
@click.option("--nodes", type=click.IntRange(1), help="Machines (default 1).")
@click.option("--gpus-per-node", type=click.IntRange(1, 1024))
@click.option("--gpu", type=click.Choice(GPU_NAMES),
              help="The GPU model (its memory and peak: docs/plan.md).")
@click.option("--gpu-memory", help="Per-GPU memory, when it must be stated (80GB, 80GiB); default the GPU's.")
@click.option("--headroom", help="GPU memory to leave free beyond the plan's error band: a share (0.05) or a "
                                 "size (4GB); written as cluster.headroom. Default: none.")
@click.option("--cpu-memory", help="Host memory per node (2TB, 1TiB), which offload must fit; default: "
              "unknown, not checked (the recipe says how much its offload needs).")
@click.option("--global-batch", type=click.IntRange(1), help="Samples per optimizer step, over all ranks.")
@click.option("--seq-len", type=click.IntRange(1), help="Tokens per sample.")
@click.option("--engine", type=click.Choice(ENGINES), help="The launcher to search for (default: all).")
@click.option("--script", type=click.Path(dir_okay=False), help="The training script (read for its kind).")
@click.option("--name", help="The recipe's name (default: the output file's).")
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write here (default: stdout).")
@click.option("--force", is_flag=True, help="Replace an existing --output file.")
def command(output: str | None, force: bool, **answers: Any) -> int:
    """Write a recipe for a model on a cluster: the fastest that fits, with its reasons."""
    return init_recipe(answers, output, force)
