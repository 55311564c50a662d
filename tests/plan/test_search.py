"""`plan --search` judges the host and, when nothing fits, names what binds."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from distrecipe.api import load_plan
from distrecipe.plan import host
from distrecipe.plan.search import Candidate, binding, search
from distrecipe.translator.load import load_recipe
from tests.conftest import Result

CORPUS = Path(__file__).resolve().parents[1] / "corpus" / "hf_configs"
DEEPSEEK = f"""recipe: 1
name: deepseek-v3
model: {{hf_config: {CORPUS / "real" / "deepseek-v3.json"}}}
cluster: {{nodes: 4, gpus_per_node: 8, gpu: h100}}
strategy: zero
batch: {{global: 128, seq_len: 4096}}
precision: bf16
"""
"""The user's finding: DeepSeek-V3 (671B) on 4 × 8 H100s fits only offloaded, 16Ψ/32 a rank."""


@pytest.fixture
def deepseek(write: Callable[[str, str], Path]) -> Path:
    return write("deepseek-v3.yaml", DEEPSEEK)


def test_unstated_host_memory_is_said_unchecked_with_its_need(cli: Callable[..., Result], deepseek: Path) -> None:
    result = cli("plan", deepseek, "--search", "--top", "1")
    assert result.code == 0, result.err
    first = result.out.splitlines()[1]
    assert "+ offload" in first and "host 2.68 TB per node (cluster.cpu_memory not set: not checked)" in first


def test_host_memory_binds_and_is_named(cli: Callable[..., Result], deepseek: Path) -> None:
    """With `cluster.cpu_memory: 2TB` every candidate that fits the GPU offloads more than a node
    has: nothing fits, and the message says the host binds, with both candidates' numbers."""
    result = cli("plan", deepseek, "--search", "--set", "cluster.cpu_memory=2TB")
    assert result.code == 1
    head, line = result.out.splitlines()
    assert head.startswith("0 of ")
    assert line.startswith("  nothing fits: host memory binds: the candidates that fit 80 GB per GPU offload, "
                           "and the one needing the least host memory needs host 2.68 TB per node of 2 TB")
    assert "; the lightest candidate the host holds needs " in line and " of 80 GB per GPU (" in line
    data = json.loads(cli("plan", deepseek, "--search", "--set", "cluster.cpu_memory=2TB", "--format",
                          "json").out)
    assert data["fitting"] == 0 and data["cpu_memory"] == 2e12
    assert "nothing fits: " + data["nothing_fits"] == line.strip()


def test_no_candidate_needs_more_host_than_the_node_has(deepseek: Path) -> None:
    """Unchecked, ZeRO-3 with parameters offloaded too (3.36 TB a node) is offered; with 3 TB
    stated it is not, and what is offered is checked."""
    unchecked = search(load_recipe(deepseek), gpus_per_node=8).ranked
    assert any(host.per_node(c.estimate) > 3e12 for c in unchecked)
    ranked = search(load_recipe(deepseek, ("cluster.cpu_memory=3TB",)), gpus_per_node=8).ranked
    assert ranked and all(host.fits(c.estimate) is True for c in ranked if c.estimate.engine.cpu)
    assert max(host.per_node(c.estimate) for c in ranked) <= 3e12


@pytest.mark.parametrize(("sets", "words"), [
    (("cluster.cpu_memory=2TB", "cluster.gpu_memory=12GB"),
     "GPU and host memory bind: the lightest candidate needs 12.6 of 12 GB per GPU (ZeRO-3 + "
     "offload, TP 8, micro 1, checkpointing full), and with its offload it needs host 3.36 TB per node of 2 TB"),
    (("cluster.gpu_memory=12GB",),
     "GPU memory binds: the lightest candidate needs 12.6 of 12 GB per GPU (ZeRO-3 + offload, "
     "TP 8, micro 1, checkpointing full); it needs host 3.36 TB per node (cluster.cpu_memory not set: "
     "not checked)"),
])
def test_what_binds_is_named(write: Callable[[str, str], Path], sets: tuple[str, ...], words: str) -> None:
    path = write("r.yaml", DEEPSEEK.replace("gpu: h100", "gpu_memory: 16GB"))
    result = search(load_recipe(path, sets), gpus_per_node=8)
    assert not result.ranked
    assert binding(result).startswith(words)


MIXTRAL = f"""recipe: 1
name: mixtral
model: {{hf_config: {CORPUS / "reconstructed" / "mixtral-8x7b.classdefaults.json"}}}
cluster: {{nodes: 1, gpus_per_node: 8, gpu: a100-40gb}}
strategy: zero
batch: {{global: 512, seq_len: 8192}}
precision: bf16
"""
"""The user's finding: Mixtral 8x7B on 8 A100-40GB searched to a winner at 61 % MFU."""


def test_an_moe_mfu_no_published_run_reached_is_flagged_and_ranked_last(
        cli: Callable[..., Result], write: Callable[[str, str], Path]) -> None:
    """Megatron-Core's Mixtral reached 47.3 % MFU (468 TFLOPS per H100); a candidate estimated
    above it is said to be not credible and comes after every plausible candidate."""
    recipe = load_recipe(write("mixtral.yaml", MIXTRAL))
    ranked = search(recipe, gpus_per_node=8).ranked
    flags = [c.implausible is not None for c in ranked]
    assert any(flags) and not all(flags)
    assert flags == sorted(flags)  # every plausible one first
    assert all((c.implausible is not None) == (c.seconds and c.estimate.step and c.estimate.step.mfu > 0.473)
               for c in ranked)
    assert ranked[0].implausible is None and ranked[0].estimate.step is not None
    assert ranked[0].estimate.step.mfu <= 0.473
    data = json.loads(cli("plan", write("m.yaml", MIXTRAL), "--search", "--format", "json", "--top", "10000").out)
    flagged = [c for c in data["candidates"] if c["implausible"]]
    assert flagged and flagged[0]["rank"] > max(c["rank"] for c in data["candidates"] if not c["implausible"])
    assert flagged[0]["implausible"].startswith(f"MFU {flagged[0]['mfu']:.1%} is above the best published run "
                                                "of a mixtral mixture of experts, 47.3% (megatron_core_moe_readme")


def test_megatron_searches_expert_parallelism_and_pays_its_all_to_all(
        cli: Callable[..., Result], write: Callable[[str, str], Path], tmp_path: Path) -> None:
    """Mixtral (8 experts) on 8 × 8 H100s under Megatron: expert degrees that divide the experts
    and DP × sequence are candidates; each holds fewer experts than the same layout without
    (`memory.held_params`) and pays the dispatcher's all-to-all (`steptime.expert_parallel_bytes`);
    the written winner resolves to the ranked plan."""
    text = (MIXTRAL.replace("nodes: 1", "nodes: 8").replace("a100-40gb", "h100")
            .replace("strategy: zero", "strategy: megatron\nstage: 1")
            .replace("global: 512, seq_len: 8192", "global: 256, seq_len: 4096"))
    path = write("meg.yaml", text)
    ranked = search(load_recipe(path), gpus_per_node=8).ranked
    by_layout: dict[tuple[object, ...], dict[int, Candidate]] = {}
    for c in ranked:
        key = tuple(v for k, v in c.overrides().items() if k != "parallel.expert")
        by_layout.setdefault(key, {})[c.shape.parallel.expert] = c
    assert {c.shape.parallel.expert for c in ranked} == {1, 2, 4, 8}
    pairs = [(d[1], d[e]) for d in by_layout.values() for e in (2, 4, 8) if 1 in d and e in d]
    assert pairs
    for alone, split in pairs:
        assert split.estimate.need < alone.estimate.need
        assert split.estimate.step is not None and split.estimate.step.exposed_by["expert parallel"] > 0
        assert "expert parallel" not in (alone.estimate.step.exposed_by if alone.estimate.step else {})
    best = tmp_path / "best.yaml"
    assert cli("plan", path, "--search", "--write", best).code == 0
    assert load_plan(best).recipe.parallel.expert == ranked[0].shape.parallel.expert
