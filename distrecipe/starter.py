"""`distrecipe init`: a first recipe, the search's winner, written with its reasons.

`accelerate config` asks questions and writes what was answered; `init` asks for what only
the user knows (the model, the cluster, the global batch and sequence length, optionally
the engine or the training script) and lets the planner choose the rest: every recipe
`plan --search` would consider for that job (`plan.search.search`) is ranked, and the
fastest that fits is written as a commented YAML recipe, each searched value with its
reason and the runners-up in the header. The text is read back and resolved before it is
returned, so what is written is exactly the plan that was ranked first. Nothing here
imports torch or an engine.

An engine (`--engine`: a launcher) restricts the search to the strategies it runs; a
script (`--script`) is read (parsed, never run, as `launch` reads it) for its program
kind, which restricts it to the launchers that can hand that kind what it reads, and is
stated as `launch.program_kind`, so the search offers only the layouts that kind carries
(`translator.programs`) and `launch` runs the file without refusing it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from distrecipe.api import plan_of_document
from distrecipe.engines.gpus import GPUS
from distrecipe.errors import DistrecipeError, RecipeError
from distrecipe.job import plan_values
from distrecipe.launch.kinds import scan
from distrecipe.model_shapes import active_params
from distrecipe.output import one_line
from distrecipe.plan import host
from distrecipe.plan.search import Candidate, binding, combined, search, why
from distrecipe.recipe import Backend, Gpu, ProgramKind, Recipe, Strategy, slug
from distrecipe.source import SourceError, parse_text, read_text
from distrecipe.translator.load import recipe_from_document
from distrecipe.translator.programs import COMPATIBLE

ENGINE_STRATEGIES: dict[Backend, tuple[Strategy, ...]] = {
    "deepspeed": ("zero",),
    "accelerate-deepspeed": ("zero",),
    "accelerate": ("fsdp", "ddp"),
    "torchrun": ("fsdp", "ddp"),
}
"""The strategies each launcher runs as `plan` models them (verl needs `rl`, which `init`
does not write; Megatron is a formula only)."""
ENGINES: tuple[Backend, ...] = tuple(ENGINE_STRATEGIES)
KIND_STRATEGIES: dict[ProgramKind, tuple[Strategy, ...]] = {"deepspeed": ("zero",)}
"""A program that calls `deepspeed.initialize` runs ZeRO whichever launcher starts it."""


class NoneFits(DistrecipeError):
    """No recipe for the job fits: exit 1, as `plan` says "fits? no"."""

    exit_code = 1
SHAPE_KEYS = ("params", "hidden_size", "layers", "heads", "kv_heads", "intermediate_size", "vocab")
"""The model's shape as flags give it (`--hidden-size`, ...), without a Hugging Face config."""
REQUIRED_SHAPE = ("hidden_size", "layers", "heads", "intermediate_size", "vocab")
RUNNERS_UP = 4


@dataclass(frozen=True, kw_only=True)
class Request:
    """What the user said: the model, the cluster, the batch; optionally an engine or script."""

    hf_config: str | None = None
    """A Hugging Face config.json, as given (relative to the working directory)."""
    shape: dict[str, int] = field(default_factory=dict)
    """Or the model's shape (`SHAPE_KEYS`)."""
    nodes: int = 1
    gpus_per_node: int
    gpu: Gpu
    gpu_memory: str | None = None
    """A size that is the GPU's (checked against the GPU table), else the GPU's own."""
    headroom: str | None = None
    """GPU memory to leave free, as `cluster.headroom` is written: a share (0.05) or a size (4GB)."""
    cpu_memory: str | None = None
    """Host memory per node (`cluster.cpu_memory`), which offload is checked against; None:
    unknown, and the written recipe says how much its offload needs, unchecked."""
    global_batch: int
    seq_len: int
    engine: Backend | None = None
    script: str | None = None
    name: str | None = None
    output: Path | None = None
    """Where the recipe will be written (its directory anchors `model.hf_config`); None: stdout."""


@dataclass(frozen=True, slots=True)
class Starter:
    text: str
    """The recipe, commented, as it is to be written."""
    ranked: list[Candidate]
    """Every recipe that fits, fastest first; the first is the one written."""
    tried: int


def starter(request: Request) -> Starter:
    """Search every recipe for the request and write the winner (module docstring)."""
    base_dir = (request.output.parent if request.output is not None else Path(".")).resolve()
    here = Path(".").resolve()
    # Searched and checked from here with the config's absolute path (the output's directory
    # may not exist yet); written relative to the output's directory, where it then resolves.
    doc, written = _document(request, None), _document(request, base_dir)
    results = []
    for backend, strategy in _groups(request):
        recipe = _recipe({**doc, "strategy": strategy,
                          **({"launch": {**doc.get("launch", {}), "backend": backend}} if backend else {})},
                         here)
        try:
            result = search(recipe, request.gpus_per_node)
        except RecipeError as exc:  # the user's flags, not a file's position
            raise DistrecipeError(exc.message) from None
        results.append(result)
    every = combined(results)  # the search's own order across the groups: ties by its stated preferences
    ranked, tried = every.ranked, every.tried
    if not ranked:
        raise NoneFits(f"none of the {tried} valid recipes for this job fits {GPUS[request.gpu].sizes()} "
                       f"per GPU ({request.gpu}): {binding(every)}", None)
    _check(_text(request, doc, ranked, tried), here, ranked[0])
    return Starter(_text(request, written, ranked, tried), ranked, tried)


def _groups(request: Request) -> Iterator[tuple[Backend | None, Strategy]]:
    """(launcher, strategy) pairs to search: every strategy under its natural launcher when
    nothing restricts it, else those of the engine or of the launchers the script's kind allows."""
    engines: tuple[Backend, ...] | None = (request.engine,) if request.engine else None
    only: tuple[Strategy, ...] | None = None
    if request.script is not None:
        kind = program_kind(request.script)
        allowed = tuple(e for e in COMPATIBLE[kind] if e in ENGINE_STRATEGIES)
        if request.engine is not None and request.engine not in allowed:
            raise DistrecipeError(f"--script {request.script} is a {kind} program, which --engine "
                                  f"{request.engine} cannot run; use one of {', '.join(allowed)}")
        only = KIND_STRATEGIES.get(kind)
        if engines is None and kind in ("accelerate", "deepspeed"):
            engines = allowed
    if engines is None:
        yield None, "zero"  # the search tries DDP, ZeRO-1/2/3 and FSDP2 under their own launchers
        return
    for engine in engines:
        for strategy in ENGINE_STRATEGIES[engine]:
            if only is None or strategy in only:
                yield engine, strategy


def program_kind(script: str) -> ProgramKind:
    """The script's program kind, as `launch` reads it (parsed, never run)."""
    try:
        source = read_text(Path(script))
    except SourceError as exc:
        raise DistrecipeError(f"--script {script}: {exc.message}") from None
    try:
        found = scan(source, script)
    except (SyntaxError, ValueError, RecursionError) as exc:
        raise DistrecipeError(f"--script {script} is not Python distrecipe can parse: {exc}") from None
    return found.kind if found is not None else "torchrun"


def _document(request: Request, base_dir: Path | None) -> dict[str, Any]:
    """The job as the user stated it, as a recipe document (the search varies the rest);
    `model.hf_config` relative to `base_dir`, or absolute without one."""
    if request.hf_config is not None:
        absolute = Path(request.hf_config).resolve()
        config = str(absolute) if base_dir is None else os.path.relpath(absolute, base_dir)
        model: dict[str, Any] = {"hf_config": Path(config).as_posix(),
                                 **{k: v for k, v in request.shape.items() if v is not None}}
    else:
        model = {k: v for k, v in request.shape.items() if v is not None}
    cluster: dict[str, Any] = {"nodes": request.nodes, "gpus_per_node": request.gpus_per_node,
                               "gpu": request.gpu}
    if request.gpu_memory is not None:
        cluster["gpu_memory"] = request.gpu_memory
    if request.headroom is not None:
        cluster["headroom"] = _headroom(request.headroom)
    if request.cpu_memory is not None:
        cluster["cpu_memory"] = request.cpu_memory
    doc: dict[str, Any] = {
        "recipe": 1, "name": _name(request), "model": model, "cluster": cluster, "strategy": "zero",
        "batch": {"global": request.global_batch, "seq_len": request.seq_len},
        "precision": "bf16" if GPUS[request.gpu].bf16 else "fp16",
    }
    if request.script is not None:  # the kind is part of the job: the search offers only what it runs
        doc["launch"] = {"script": request.script, "program_kind": program_kind(request.script)}
    return doc


def _headroom(written: str) -> float | str:
    """`--headroom 0.05` is a share (a number in the recipe), `--headroom 4GB` a size."""
    try:
        return float(written)
    except ValueError:
        return written


def _name(request: Request) -> str:
    if request.name is not None:
        return slug(request.name)
    if request.output is not None:
        return slug(request.output.stem)
    config = Path(request.hf_config) if request.hf_config else None
    model = "" if config is None else config.stem if config.stem != "config" else config.resolve().parent.name
    return slug(f"{model or 'model'}-{request.nodes * request.gpus_per_node}gpu")


def _recipe(doc: dict[str, Any], base_dir: Path) -> Recipe:
    """The document as a Recipe; its errors are the user's flags, named as such."""
    try:
        return recipe_from_document(parse_text(json.dumps(doc), "distrecipe init"), base_dir)
    except RecipeError as exc:
        raise DistrecipeError(exc.message) from None


def _text(request: Request, doc: dict[str, Any], ranked: list[Candidate], tried: int) -> str:
    """The winner as commented YAML (every scalar written as JSON, which YAML reads the same)."""
    winner = ranked[0]
    plan, est = winner.estimate.plan, winner.estimate
    budget = float(plan.gpu_memory or 0)
    spec = GPUS[request.gpu]
    model = plan.recipe.model
    lines = [f"# Written by distrecipe init: the fastest of {len(ranked)} recipes that fit "
             f"{budget / 1e9:.0f} GB per GPU ({tried} judged),",
             f"# ranked as `distrecipe plan --search` ranks them: {one_line(why(winner, budget))}"]
    if len(ranked) > 1:
        lines.append("# Runners-up (change the keys below to take one):")
        lines += [f"#   {rank}. {one_line(why(c, budget))}"
                  for rank, c in enumerate(ranked[1:1 + RUNNERS_UP], 2)]
    lines += ["# `distrecipe plan` on this file shows its memory, traffic and step time; `--search` ranks "
              "again.",
              "recipe: 1", f"name: {json.dumps(doc['name'])}", "model:"]
    active = active_params(model)
    about = f"the {model.family} family, {(model.params or 0) / 1e9:.3g}B parameters" + (
        f", {active / 1e9:.3g}B active per token" if model.experts and active else "")
    for key, value in doc["model"].items():
        lines.append(_line(f"  {key}: {json.dumps(value)}", about if key in ("hf_config", "params") else ""))
    if "hf_config" not in doc["model"] and "params" not in doc["model"]:
        lines[-1] = _line(lines[-1], about)
    lines.append("cluster:")
    for key, value in doc["cluster"].items():
        note = (f"{spec.name}: {spec.memory[0]} GB, {spec.peak_tflops:g} TFLOPS dense 16-bit "
                "(engines/gpus.py)"
                if key == "gpu" else "")
        lines.append(_line(f"  {key}: {json.dumps(value)}", note))
    chosen = winner.overrides()
    lines.append(_line(f"strategy: {json.dumps(chosen['strategy'])}", f"the search's winner: {est.label}"))
    lines.append(f"stage: {chosen['stage']}")
    lines.append("offload:")
    lines.append(_line(f"  optimizer: {json.dumps(chosen['offload.optimizer'])}",
                       host.note(est) or "everything on the GPU"))
    lines.append(f"  params: {json.dumps(chosen['offload.params'])}")
    dims = plan.dims
    lines.append("parallel:")
    lines.append(_line(f"  tensor: {chosen['parallel.tensor']}",
                       f"tensor × pipeline × sequence = {dims.model_parallel}, so DP = {dims.dp}"))
    for key in ("pipeline", "sequence", "virtual_stages"):
        lines.append(f"  {key}: {chosen[f'parallel.{key}']}")
    batch = plan.batch
    lines.append("batch:")
    lines.append(_line(f"  micro: {batch.micro}", f"micro × accumulation × DP = {batch.micro} × "
                                                  f"{batch.accumulation} × {dims.dp} = {batch.global_}"))
    lines.append(f"  accumulation: {batch.accumulation}")
    lines.append(_line(f"  global: {batch.global_}", "yours"))
    lines.append(_line(f"  seq_len: {request.seq_len}", "yours"))
    lines.append(_line(f"precision: {json.dumps(doc['precision'])}",
                       "" if spec.bf16 else f"{spec.name} has no bf16"))
    lines.append(_line(f"activation_checkpointing: {json.dumps(chosen['activation_checkpointing'])}",
                       f"needs {est.need / 1e9:.1f} of {budget / 1e9:.0f} GB per GPU"))
    if "launch" in doc or request.engine is not None:
        lines.append("launch:")
        if request.engine is not None:
            lines.append(f"  backend: {json.dumps(request.engine)}")
        if request.script is not None:
            kind = program_kind(request.script)
            lines.append(_line(f"  script: {json.dumps(request.script)}", f"a {kind} program"))
            lines.append(_line(f"  program_kind: {json.dumps(kind)}", "read from the script, as launch reads "
                               "it: the search offered only what it runs"))
    return "\n".join(lines) + "\n"


def _line(text: str, note: str) -> str:
    return f"{text}  # {one_line(note)}" if note else text


def _check(text: str, base_dir: Path, winner: Candidate) -> None:
    """The text resolves to the plan the search ranked first, or it is not written."""
    try:
        again = plan_of_document(parse_text(text, "distrecipe init"), base_dir)
    except DistrecipeError as exc:
        raise DistrecipeError(f"the recipe init wrote does not resolve ({exc.message}); this is a bug in "
                              "distrecipe") from None
    want, got = plan_values(winner.estimate.plan), plan_values(again)
    differ = sorted(k for k in want if want[k] != got.get(k))
    if differ:
        raise DistrecipeError(f"the recipe init wrote does not resolve to the plan it ranked ({differ}); "
                              "this is a bug in distrecipe")
