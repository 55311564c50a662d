"""Hypothesis strategies for the Accelerate, verl and HF emitter oracles.

`tests/strategies.py` draws the batch side of recipes (with `auto`s); these draw the
side the non-DeepSpeed emitters branch on: sequence parallelism, hybrid sharding,
tensor parallelism (Megatron's, DeepSpeed AutoTP, FSDP2's), pipeline stages (interleaved
too: `parallel.virtual_stages`), recompute, wrap classes, the accelerate-deepspeed backend and `rl`.
Batch numbers are written out, and `rl` is drawn around verl's rules so that most
recipes satisfy them and some break exactly one, so the oracles see both sides.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from distrecipe.engines.deepspeed import CONFIG_FILE
from distrecipe.job import Plan
from distrecipe.lint.config import LintConfig
from distrecipe.lint.engine import lint
from distrecipe.translator.load import recipe_from_text
from distrecipe.translator.resolve import resolve
from distrecipe.translator.targets import Output, launch_world
from tests.strategies import STAGES, to_yaml


@st.composite
def engine_documents(
    draw: st.DrawFn,
    strategies: tuple[str, ...] = ("ddp", "zero", "fsdp", "megatron"),
    rl: bool = False,
) -> dict[str, Any]:
    """A resolvable recipe document exercising every emitter branch."""
    strategy = draw(st.sampled_from(strategies))
    stage = draw(st.sampled_from(STAGES[strategy]))
    nodes = draw(st.sampled_from([1, 1, 2, 4]))
    gpus = draw(st.sampled_from([1, 2, 4, 8]))
    world = nodes * gpus
    divisors = [d for d in (1, 2, 4) if world % d == 0]
    # Tensor parallelism for every strategy (DeepSpeed AutoTP, FSDP2 + TP, refusals for
    # DDP); pipeline stages only under Megatron.
    tensor = draw(st.sampled_from(divisors))
    pipeline = virtual = 1
    layers = 8
    if strategy == "megatron":
        pipeline = draw(st.sampled_from([d for d in divisors if world % (tensor * d) == 0]))
        # Interleaved 1F1B (resolve's `_check_virtual_stages`): p × v chunks of whole layers,
        # and accumulation a multiple of p, drawn below.
        chunks = [v for v in (2, 4) if pipeline > 1 and layers % (pipeline * v) == 0]
        if chunks and draw(st.booleans()):
            virtual = draw(st.sampled_from(chunks))
    sequence = draw(
        st.sampled_from([d for d in divisors if world % (tensor * pipeline * d) == 0])
        if strategy != "ddp"
        else st.just(1)
    )
    dp = world // (tensor * pipeline * sequence)
    micro = draw(st.integers(1, 4))
    acc = pipeline * draw(st.integers(1, 2)) if virtual > 1 else draw(st.integers(1, 4))
    glob = micro * acc * dp
    doc: dict[str, Any] = {
        "recipe": 1,
        "name": "generated",
        "model": {"params": 1_300_000_000, "hidden_size": 1024, "layers": layers, "heads": 16},
        "cluster": {"nodes": nodes, "gpus_per_node": gpus},
        "strategy": strategy,
        "stage": stage,
        "parallel": {"tensor": tensor, "pipeline": pipeline, "sequence": sequence},
        "batch": {"micro": micro, "accumulation": acc, "global": glob, "seq_len": 1024},
        "precision": draw(st.sampled_from(["bf16", "fp16", "fp32"])),
        "optimizer": {
            "name": draw(st.sampled_from(["adamw", "adam", "sgd"])),
            "lr": draw(st.sampled_from([1e-5, 3e-4])),
            "betas": draw(st.sampled_from([[0.9, 0.95], [0.9, 0.999]])),
            "eps": draw(st.sampled_from([1e-8, 1e-6])),
            "weight_decay": draw(st.sampled_from([0.0, 0.1])),
        },
        "grad_clip": draw(st.sampled_from([0, 1.0, 0.5])),
        "activation_checkpointing": draw(st.sampled_from([False, True, "selective"])),
    }
    if virtual > 1:
        doc["parallel"]["virtual_stages"] = virtual
    if draw(st.booleans()):
        doc["model"]["layer_cls"] = "LlamaDecoderLayer"
    if stage >= 1 and strategy != "megatron":
        offload = draw(st.sampled_from(["none", "optimizer", "params", "both"]))
        if offload != "none" and (stage == 3 or offload == "optimizer"):
            doc["offload"] = {
                "optimizer": "cpu" if offload in ("optimizer", "both") else "none",
                "params": "cpu" if offload in ("params", "both") else "none",
            }
        groups = [g for g in (1, 2, 4) if g < dp and dp % g == 0]
        if groups and draw(st.booleans()):
            doc["parallel"]["shard_group"] = draw(st.sampled_from(groups))
    if strategy == "fsdp" and draw(st.booleans()):
        doc["fsdp_version"] = draw(st.sampled_from([1, 2]))
    launch: dict[str, Any] = {}
    if strategy == "zero" and draw(st.booleans()):
        launch["backend"] = "accelerate-deepspeed"
    if nodes > 1 and draw(st.booleans()):
        launch["master_addr"] = "10.0.0.1"
    if launch:
        doc["launch"] = launch
    if rl:
        doc["rl"] = draw(rl_sections(glob))
        if nodes * gpus % 2:  # verl's default rollout TP 2 does not start on one GPU (DR221)
            doc["native"] = {"verl": ["actor_rollout_ref.rollout.tensor_model_parallel_size=1"]}
    return doc


@st.composite
def rl_sections(draw: st.DrawFn, glob: int) -> dict[str, int | float | bool]:
    """`rl` for a global batch: rollout_n divides it, prompts mostly whole mini-batches;
    sometimes the rollout engine's share of the GPU and whether it is freed."""
    n = draw(st.sampled_from([d for d in (1, 2, 4, 8) if glob % d == 0]))
    mini = glob // n
    prompts = draw(
        st.one_of(
            st.integers(1, 4).map(lambda k: k * mini),
            st.integers(mini, 3 * mini),
        )
    )
    out: dict[str, int | float | bool] = {"rollout_n": n, "prompts_per_step": prompts}
    if draw(st.booleans()):
        out["rollout_memory"] = draw(st.sampled_from([0.05, 0.3, 0.5, 0.85, 1]))
    if draw(st.booleans()):
        out["free_rollout_memory"] = draw(st.booleans())
    return out


def plan_of(doc: dict[str, Any]) -> Plan:
    """The Plan distrecipe resolves the document to (through the real loader)."""
    return resolve(recipe_from_text(to_yaml(doc), "generated.yaml"))


def lint_errors(plan: Plan, output: Output) -> list[str]:
    """The error findings of `lint` on `output`'s files, written into one directory as a user
    commits them and linted at the world the job launches at (a Megatron ds_config at the
    data-parallel ranks DeepSpeed is handed, `launch_world`, alone)."""
    with tempfile.TemporaryDirectory() as tmp:
        for name, text in output.files.items():
            (Path(tmp) / name).write_text(text, encoding="utf-8")
        report = lint([tmp], config=LintConfig(), world=plan.dims.world)
        ds = Path(tmp) / CONFIG_FILE
        findings = report.findings
        if launch_world(plan) != plan.dims.world and ds.is_file():
            alone = lint([ds], config=LintConfig(), world=launch_world(plan))
            findings = [f for f in findings if not f.where or f.where.file != str(ds)] + alone.findings
            assert not alone.unusable, alone.unusable
    assert not report.unusable, report.unusable
    return [str(f) for f in findings if f.severity == "error"]
