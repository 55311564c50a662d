"""DR105: heads and sequence split over the tensor and sequence degrees as each engine
requires (`distrecipe/engines/heads.py` cites the sources); lint and compile report a
written recipe that breaks them, `plan --search` never proposes one, and a recipe that
does not state its heads hears nothing."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from distrecipe.api import load_plan
from distrecipe.engines.heads import refusal
from distrecipe.plan.search import search
from distrecipe.translator.load import load_recipe
from tests.conftest import RECIPES, Result

SEED = RECIPES / "seed-8b-32gpu-zero2.yaml"
"""32 heads, 8 kv heads, 8192 tokens: every degree 1, 2, 4, 8 splits it."""
QWEN7B = ("model.heads=28", "model.kv_heads=4", "model.hidden_size=3584", "model.layers=28")


def refused(*sets: str) -> str | None:
    found = refusal(load_plan(SEED, sets))
    return None if found is None else f"{found.keys[0]}: {found.message}"


@pytest.mark.parametrize(("sets", "key"), [
    # DeepSpeed Ulysses: heads % sp, kv % sp or sp % kv, seq % sp.
    (("parallel.sequence=8", *QWEN7B), "parallel.sequence"),
    (("parallel.sequence=4", *QWEN7B), None),
    (("parallel.sequence=8", "model.kv_heads=4"), None),  # 8 % 4 == 0: kv heads replicated
    (("parallel.sequence=8", "model.heads=24", "model.kv_heads=3"), "parallel.sequence"),
    (("parallel.sequence=8", "batch.seq_len=8196"), "batch.seq_len"),
    (("parallel.sequence=4", "batch.seq_len=8196"), None),
    # DeepSpeed AutoTP: uneven kv-head split, but every rank needs one.
    (("parallel.tensor=8", *QWEN7B), "parallel.tensor"),
    (("parallel.tensor=4", *QWEN7B), None),
    (("parallel.tensor=8", "model.kv_heads=12", "model.heads=24"), None),
    # torchtitan: colwise q, k, v (heads and kv heads % tp), head-tail CP (seq % 2·cp).
    (("strategy=fsdp", "stage=3", "parallel.tensor=8", *QWEN7B), "parallel.tensor"),
    (("strategy=fsdp", "stage=3", "parallel.tensor=8", "model.kv_heads=12", "model.heads=24"),
     "parallel.tensor"),
    (("strategy=fsdp", "stage=3", "parallel.tensor=4", *QWEN7B), None),
    (("strategy=fsdp", "stage=3", "parallel.sequence=2", "batch.seq_len=8196"), None),
    (("strategy=fsdp", "stage=3", "parallel.sequence=4", "batch.seq_len=8196"), "batch.seq_len"),
    (("strategy=fsdp", "stage=3", "parallel.sequence=2", "batch.seq_len=8194"), "batch.seq_len"),
    # Accelerate: torch's context_parallel falls back to an even split: seq % cp.
    (("strategy=fsdp", "stage=3", "launch.backend=accelerate", "parallel.sequence=2",
      "batch.seq_len=8194"), None),
    (("strategy=fsdp", "stage=3", "launch.backend=accelerate", "parallel.sequence=4",
      "batch.seq_len=8194"), "batch.seq_len"),
    (("strategy=fsdp", "stage=3", "launch.backend=accelerate", "parallel.tensor=8", *QWEN7B),
     "parallel.tensor"),
    # verl runs `zero` as FSDP2 (engines.verl.actor_engine): its Ulysses pads the
    # sequence, so DeepSpeed's seq % sp does not apply; the head rules do.
    (("launch.backend=verl", "parallel.sequence=8", "batch.seq_len=8196"), None),
    (("launch.backend=verl", "parallel.sequence=8", *QWEN7B), "parallel.sequence"),
    (("launch.backend=verl", "strategy=ddp", "stage=0", "parallel.sequence=8",
      "batch.seq_len=8196"), None),
])
def test_each_engine_rule(sets: tuple[str, ...], key: str | None) -> None:
    found = refused(*sets)
    assert (found or "").split(":")[0] == (key or ""), found


def headless(tmp_path: Path) -> Path:
    """The seed without `model.heads` and `model.kv_heads`."""
    path = tmp_path / "headless.yaml"
    text = SEED.read_text(encoding="utf-8").replace("  heads: 32\n", "").replace("  kv_heads: 8\n", "")
    path.write_text(text, encoding="utf-8")
    return path


def test_unknown_heads_check_nothing(tmp_path: Path) -> None:
    recipe = headless(tmp_path)
    for sets in (("parallel.sequence=8",), ("parallel.tensor=8",),
                 ("strategy=fsdp", "stage=3", "parallel.tensor=8")):
        assert load_plan(recipe, sets).recipe.model.heads is None
        assert refusal(load_plan(recipe, sets)) is None
    # The sequence rule needs no heads: it is checked whenever seq_len is known.
    assert refusal(load_plan(recipe, ("parallel.sequence=8", "batch.seq_len=8196"))) is not None


def test_search_keeps_only_layouts_that_split(tmp_path: Path) -> None:
    """Qwen2.5-7B's 28 heads and 4 kv heads at 8196 tokens: tensor or sequence 8 splits
    in no engine, context parallel 4 only where the sequence splits into 4 equal parts;
    without the heads stated, the search keeps tensor 8, which only the heads rule out."""
    sets = ("cluster.gpu=h100", *QWEN7B, "batch.seq_len=8196")
    ranked = search(load_recipe(SEED, sets), gpus_per_node=8).ranked
    assert ranked
    assert all(refusal(c.estimate.plan) is None for c in ranked)
    layouts = {(c.estimate.plan.recipe.strategy, c.estimate.plan.dims.tensor, c.estimate.plan.dims.sequence)
               for c in ranked}
    assert not {layout for layout in layouts if 8 in layout[1:]}
    assert ("zero", 1, 4) in layouts and ("fsdp", 1, 4) not in layouts
    unknown = search(load_recipe(headless(tmp_path), (*sets[:1], *sets[3:])), gpus_per_node=8).ranked
    assert any(c.estimate.plan.dims.tensor == 8 for c in unknown)


def test_seed_search_winner_and_top_five_split() -> None:
    ranked = search(load_recipe(SEED, ("cluster.gpu=h100",)), gpus_per_node=8).ranked
    assert len(ranked) >= 5
    assert all(refusal(c.estimate.plan) is None for c in ranked[:5])


def test_compile_refuses_with_the_position(cli: Callable[..., Result], tmp_path: Path) -> None:
    recipe = tmp_path / "r.yaml"
    recipe.write_text(SEED.read_text(encoding="utf-8").replace(
        "stage: 2\n", "stage: 2\nparallel: {sequence: 8}\n").replace("seq_len: 8192", "seq_len: 8196"),
        encoding="utf-8")
    result = cli("compile", recipe)
    assert result.code == 2
    line = next(n for n, text in enumerate(recipe.read_text().splitlines(), 1) if "seq_len" in text)
    assert result.err.startswith(f"{recipe}:{line}:"), result.err
    assert "error: DR105 DeepSpeed splits each sequence into sequence 8 equal parts" in result.err


def test_compile_for_verl_refuses_a_rollout_layout_at_its_key(cli: Callable[..., Result], tmp_path: Path) -> None:
    """DR221: the rollout's TP stated in native.verl does not divide the 8 GPUs; compile
    points at that line, lint (DR354) at the same place, and compile for another target
    refuses with lint's line (the recipe is one job, whichever engine's file is asked for)."""
    recipe = tmp_path / "r.yaml"
    recipe.write_text(
        "recipe: 1\nmodel: {params: 7.6e9}\ncluster: {nodes: 1, gpus_per_node: 8}\nstrategy: fsdp\n"
        "batch: {micro: 1, global: 64}\nrl: {rollout_n: 4, prompts_per_step: 16}\nnative:\n  verl:\n"
        "    - actor_rollout_ref.rollout.tensor_model_parallel_size=3\n", encoding="utf-8")
    result = cli("compile", recipe, "-t", "verl")
    assert result.code == 2
    assert result.err.startswith(f"{recipe}:9:7: error: DR221 8 GPUs are not a multiple of the rollout's "
                                 "tensor × data × pipeline parallelism 3 × 1 × 1 = 3"), result.err
    linted = cli("lint", recipe)
    assert f"{recipe}:9:7: error DR354: 8 GPUs" in linted.out, linted.out
    result = cli("compile", recipe, "-t", "deepspeed")
    assert result.code == 1 and f"{recipe}:9:7: error DR354: 8 GPUs" in result.err, result.err


def test_compile_for_verl_refuses_heads_the_rollout_cannot_split(cli: Callable[..., Result],
                                                                 tmp_path: Path) -> None:
    """DR221 for vLLM's heads rule: at `model.heads` under verl's default rollout TP 2, at the
    `native.verl` line when it states the TP; lint's DR354 at the same place; nothing when
    the heads are not stated."""
    recipe = tmp_path / "r.yaml"
    head = ("recipe: 1\nmodel:\n  params: 7.6e9\n  heads: 25\ncluster: {nodes: 1, gpus_per_node: 8}\n"
            "strategy: fsdp\nbatch: {micro: 1, global: 64}\nrl: {rollout_n: 4, prompts_per_step: 16}\n")
    recipe.write_text(head, encoding="utf-8")
    result = cli("compile", recipe, "-t", "verl")
    assert result.code == 2
    assert result.err.startswith(f"{recipe}:4:10: error: DR221 the model's 25 attention heads do not divide "
                                 "by the rollout's tensor parallelism 2 (vLLM refuses it"), result.err
    assert f"{recipe}:4:10: error DR354: the model's 25 attention heads" in cli("lint", recipe).out
    recipe.write_text(head.replace("heads: 25", "heads: 28\n  kv_heads: 4") + "native:\n  verl:\n"
                      "    - actor_rollout_ref.rollout.tensor_model_parallel_size=8\n", encoding="utf-8")
    result = cli("compile", recipe, "-t", "verl")
    assert result.err.startswith(f"{recipe}:12:7: error: DR221 the model's 28 attention heads"), result.err
    recipe.write_text(head.replace("  heads: 25\n", ""), encoding="utf-8")
    result = cli("compile", recipe, "-t", "verl", "-o", tmp_path / "out")
    assert result.code == 0, result.err
