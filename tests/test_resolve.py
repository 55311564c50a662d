"""The resolver: batch algebra, consistency rules, provenance, model shapes."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from distrecipe.api import load_plan
from distrecipe.errors import LaunchError, RecipeError
from distrecipe.job import Plan
from distrecipe.translator.load import count_parameters, load_recipe, recipe_from_text
from distrecipe.translator.resolve import resolve
from tests.conftest import RECIPES, Result

BASE = """\
recipe: 1
model: {{params: 1.3e9, hidden_size: 2048}}
cluster: {{nodes: {nodes}, gpus_per_node: {gpus}}}
strategy: zero
stage: 2
parallel: {{tensor: {tp}}}
batch: {{micro: {micro}, accumulation: {acc}, global: {glob}}}
"""


def plan_of(micro: object = 2, acc: object = 4, glob: object = 64, nodes: int = 1, gpus: int = 8,
            tp: int = 1, extra: str = "") -> Plan:
    text = BASE.format(micro=micro, acc=acc, glob=glob, nodes=nodes, gpus=gpus, tp=tp) + extra
    return resolve(recipe_from_text(text, "r.yaml"))


@pytest.mark.parametrize(
    ("micro", "acc", "glob", "expected"),
    [
        (2, 4, 64, (2, 4, 64)),
        ("auto", 4, 64, (2, 4, 64)),
        (2, "auto", 64, (2, 4, 64)),
        (2, 4, "auto", (2, 4, 64)),
        (2, "auto", "auto", (2, 1, 16)),
    ],
)
def test_batch_algebra_fills_any_one_or_two_autos(micro: object, acc: object, glob: object,
                                                 expected: tuple[int, int, int]) -> None:
    plan = plan_of(micro, acc, glob)
    assert (plan.batch.micro, plan.batch.accumulation, plan.batch.global_) == expected
    assert plan.batch.micro * plan.batch.accumulation * plan.dims.dp == plan.batch.global_


def test_provenance_names_the_factors() -> None:
    plan = plan_of(2, "auto", 256, nodes=4)
    assert plan.batch.accumulation == 4
    assert plan.provenance["batch.accumulation"] == "global / (micro × DP) = 256 / (2 × 32)"
    assert plan.provenance["parallel.dp"].endswith("4 × 8 / (1 × 1 × 1)")
    assert plan.provenance["batch.micro"] == "recipe"
    assert plan.provenance["parallel.pipeline"] == "default"


def test_tensor_parallel_divides_the_world() -> None:
    plan = plan_of(2, "auto", 64, tp=2)
    assert (plan.dims.world, plan.dims.dp, plan.batch.accumulation) == (8, 4, 8)


def test_one_model_parallel_size_and_one_parameter_split() -> None:
    """tensor × pipeline × sequence has one home (`recipe.model_parallel`, the Plan's
    property): DP is the world over it; the parameters split over tensor × pipeline only,
    as sequence-parallel ranks hold their layers whole."""
    plan = plan_of(2, "auto", 64, nodes=2, tp=2)
    megatron = resolve(recipe_from_text(
        BASE.format(micro=1, acc="auto", glob=64, nodes=2, gpus=8, tp=2)
        .replace("{tensor: 2}", "{tensor: 2, pipeline: 2, sequence: 2}").replace("strategy: zero\nstage: 2", "strategy: megatron"),
        "r.yaml"))
    assert (plan.dims.model_parallel, plan.dims.model_shards, plan.dims.dp) == (2, 2, 8)
    assert (megatron.dims.model_parallel, megatron.dims.model_shards, megatron.dims.dp) == (8, 4, 2)
    assert megatron.dims.dp * megatron.dims.model_parallel == megatron.dims.world


def test_model_parallel_must_divide_the_world() -> None:
    with pytest.raises(RecipeError, match=r"tensor\(3\) × pipeline\(1\) × sequence\(1\) = 3"):
        plan_of(tp=3)


def test_micro_and_global_auto_leave_the_batch_to_the_script_with_its_accumulation() -> None:
    """An Accelerate config states its accumulation and leaves the micro-batch to the
    DataLoader: the plan keeps the one and asks for the other where numbers are needed."""
    plan = plan_of("auto", 4, "auto")
    assert (plan.script_batch, plan.script_accumulation) == (True, 4)
    assert plan.provenance["batch.accumulation"] == "recipe"
    with pytest.raises(RecipeError, match=r"batch is the training script's.*--set batch\.micro=") as err:
        _ = plan.batch
    assert err.value.where is not None and err.value.where.line == 7  # at batch.micro


def test_accumulation_1_without_micro_or_global_is_refused_naming_what_to_set() -> None:
    text = BASE.format(micro="auto", acc="auto", glob="auto", nodes=1, gpus=8, tp=1).replace(
        "global: auto}", "global: auto, micro_policy: accumulation-1}")
    with pytest.raises(RecipeError, match=r"micro_policy accumulation-1 divides the global batch.*--set batch\.global="
                       ) as err:
        resolve(recipe_from_text(text, "r.yaml"))
    assert err.value.where is not None and err.value.where.line == 7  # at batch.micro


def test_non_integer_micro_offers_nearest_globals() -> None:
    with pytest.raises(RecipeError) as err:
        plan_of("auto", 3, 64)
    assert "64 / (3 × 8) = 2.66667" in err.value.message
    assert "nearest valid batch.global: 48 or 72" in err.value.message
    assert str(err.value.where) == "r.yaml:7:47"  # the `global: 64` the user must change


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ("offload: {optimizer: nvme}\n", "needs offload.nvme_path"),
        ("parallel: {shard_group: 3}\n", None),
    ],
)
def test_consistency_rules(extra: str, message: str | None) -> None:
    text = BASE.format(micro=2, acc=4, glob=64, nodes=1, gpus=8, tp=1).replace("parallel: {tensor: 1}\n", "")
    with pytest.raises(RecipeError) as err:
        resolve(recipe_from_text(text + extra, "r.yaml"))
    if message:
        assert message in err.value.message
    else:
        assert "shard_group 3 must divide the data-parallel world DP = 8; valid: 1, 2, 4, 8" in err.value.message


def test_hybrid_shard_group() -> None:
    text = BASE.format(micro=2, acc=4, glob=64, nodes=1, gpus=8, tp=1).replace(
        "parallel: {tensor: 1}", "parallel: {shard_group: 4}")
    plan = resolve(recipe_from_text(text, "r.yaml"))
    assert plan.dims.hybrid and plan.dims.shard_group == 4 and plan.dims.replicas == 2


@pytest.mark.parametrize(("strategy", "stage"), [("ddp", 0), ("zero", 2), ("fsdp", 3), ("megatron", 1)])
def test_natural_stage_per_strategy(strategy: str, stage: int) -> None:
    text = BASE.format(micro=2, acc=4, glob=64, nodes=1, gpus=8, tp=1)
    text = text.replace("strategy: zero\nstage: 2\n", f"strategy: {strategy}\n")
    plan = resolve(recipe_from_text(text, "r.yaml"))
    assert plan.stage == stage and plan.provenance["stage"].startswith("natural stage")


def test_gpus_per_node_auto_uses_detection_or_explains() -> None:
    text = BASE.format(micro=2, acc="auto", glob=64, nodes=2, gpus="auto", tp=1)
    recipe = recipe_from_text(text, "r.yaml")
    assert resolve(recipe, detected_gpus=4).dims.dp == 8
    with pytest.raises(RecipeError, match="no GPUs were detected"):
        resolve(recipe)


def test_gpus_per_node_auto_from_a_known_world_is_exact(cli: Any, write: Any) -> None:
    """lint's and diff's --world answer `auto` too, divided by the nodes and never floored."""
    text = BASE.format(micro=2, acc="auto", glob=64, nodes=2, gpus="auto", tp=1)
    recipe = recipe_from_text(text, "r.yaml")
    plan = resolve(recipe, world=8)
    assert (plan.dims.gpus_per_node, plan.dims.world) == (4, 8)
    assert plan.provenance["cluster.gpus_per_node"] == "world / nodes = 8 / 2"
    with pytest.raises(RecipeError, match=r"world is 9, which cluster.nodes = 2 does not divide.*8 or 10"):
        resolve(recipe, world=9)
    path = write("r.yaml", text)
    linted = cli("lint", path, "--world", "9")
    assert linted.code == 1 and "does not divide" in linted.out
    assert "does not divide" in cli("diff", path, path, "--world", "9").err


def test_hf_style_buckets_from_hidden_size() -> None:
    plan = resolve(load_recipe(RECIPES / "seed-8b-32gpu-zero3.yaml"))
    assert plan.buckets.reduce_bucket_size == 4096 * 4096
    assert plan.buckets.stage3_prefetch_bucket_size == int(0.9 * 4096 * 4096)
    assert plan.buckets.stage3_param_persistence_threshold == 40960


def test_hf_config_fills_the_shape_and_counts_parameters(tmp_path: Path) -> None:
    config = {"architectures": ["LlamaForCausalLM"], "hidden_size": 4096, "num_hidden_layers": 32,
              "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336,
              "vocab_size": 128256, "tie_word_embeddings": False}
    (tmp_path / "config.json").write_text(json.dumps(config))
    recipe_path = tmp_path / "r.yaml"
    recipe_path.write_text(
        "recipe: 1\nmodel: {hf_config: config.json}\ncluster: {gpus_per_node: 8}\n"
        "strategy: fsdp\nbatch: {micro: 1, global: 64}\n"
    )
    plan = resolve(load_recipe(recipe_path))
    assert plan.recipe.model.layer_cls == "LlamaDecoderLayer"
    assert plan.recipe.model.kv_heads == 8
    assert plan.recipe.model.params == 8_030_261_248  # Llama-3-8B, as its model card counts


def test_count_parameters_needs_the_whole_shape() -> None:
    from distrecipe.recipe import Model

    assert count_parameters(Model(hidden_size=64)) is None


def test_shipped_recipes_resolve_to_the_seed_numbers() -> None:
    for path in sorted(RECIPES.glob("seed-8b-32gpu-*.yaml")):
        plan = resolve(load_recipe(path))
        assert (plan.batch.micro, plan.batch.accumulation, plan.dims.dp, plan.batch.global_) == (2, 4, 32, 256), path
    tiny = resolve(load_recipe(RECIPES / "tiny-cpu.yaml"))
    assert tiny.recipe.cluster.device == "cpu" and tiny.dims.world == 2 and tiny.batch.global_ == 8
    assert 50_000 < (tiny.recipe.model.params or 0) < 200_000


def test_load_plan_probes_gpus_for_auto(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from distrecipe.api import load_plan

    path = tmp_path / "r.yaml"
    path.write_text(BASE.format(micro=2, acc="auto", glob=64, nodes=2, gpus="auto", tp=1))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3")
    assert load_plan(path).dims.dp == 8
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "-1")
    with pytest.raises(RecipeError, match="no GPUs were detected"):
        load_plan(path)
    # launch probes the environment it will start the job in, and needs the probe's reason
    assert load_plan(path, environ={"CUDA_VISIBLE_DEVICES": "0,1"}).dims.dp == 4
    with pytest.raises(LaunchError, match="hides every GPU"):
        load_plan(path, must_detect=True)


def test_integral_floats_count_as_integers() -> None:
    """JSON Schema accepts 2.0 as an integer; what is emitted must then be 2."""
    text = BASE.format(micro="2.0", acc=4, glob="64.0", nodes="1.0", gpus=8, tp=1)
    text = text.replace("gpus_per_node: 8}", "gpus_per_node: 8, gpu_memory: 1.0}")
    plan = resolve(recipe_from_text(text, "r.yaml"))
    assert (plan.batch.micro, plan.batch.global_, plan.dims.nodes, plan.gpu_memory) == (2, 64, 1, 1)
    assert all(type(v) is int for v in (plan.batch.micro, plan.batch.global_, plan.dims.nodes, plan.gpu_memory))


def test_nearest_valid_globals_respect_rollout_n() -> None:
    """Every suggested batch.global resolves: a multiple of DP × micro and of rollout_n."""
    rl = "rl: {rollout_n: 3, prompts_per_step: 1000}\n"
    for micro, acc, glob in ((2, 4, 60), ("auto", 1, 60), (2, "auto", 60), (2, 1, "auto")):
        try:
            plan_of(micro, acc, glob, extra=rl)
        except RecipeError as exc:
            if "nearest valid batch.global" in exc.message:
                offered = exc.message.rsplit("nearest valid batch.global", 1)[1].split(":", 1)[1]
                numbers = [int(n) for n in re.findall(r"\d+", offered)]
                assert numbers, exc.message
                for n in numbers:
                    assert plan_of(micro, acc, n, extra=rl).batch.global_ % 3 == 0
            else:  # "accumulation K with global G" or "accumulation K (global G)"
                assert "global 64" not in exc.message, exc.message  # 64 is not a multiple of 3
                found = re.search(r"accumulation (\d+) (?:with global|\(global) (\d+)", exc.message)
                assert found, exc.message
                k, g = map(int, found.groups())
                assert plan_of(micro, k, "auto" if glob == "auto" else g, extra=rl).batch.global_ == g
        else:
            raise AssertionError(f"{micro} {acc} {glob} resolved")


MEGATRON = """recipe: 1
model: {params: 1.0e9, hidden_size: 1024, layers: 28}
cluster: {nodes: 1, gpus_per_node: 8}
strategy: megatron
parallel: {tensor: 2, pipeline: 4}
batch: {micro: 1, global: 8}
"""


@pytest.mark.parametrize(("extra", "message"), [
    ("parallel: {tensor: 2, pipeline: 4, first_stage_layers: 6, last_stage_layers: 6}", None),
    ("parallel: {tensor: 2, pipeline: 4, first_stage_layers: 7, last_stage_layers: 6}",
     r"less the stated stages' 7 \+ 6 leaves 15 layers, which do not split evenly over the other 2"),
    ("parallel: {tensor: 2, pipeline: 4, first_stage_layers: 6, last_stage_layers: 6, virtual_stages: 2}", None),
    ("parallel: {tensor: 2, pipeline: 4, first_stage_layers: 5, last_stage_layers: 7, virtual_stages: 2}",
     r"every pipeline stage's layers must split into 2 model chunks .* hold 5, 8, 8, 7 layers"),
    ("parallel: {tensor: 2, pipeline: 1, first_stage_layers: 6}", r"need parallel.pipeline > 1"),
    ("strategy: fsdp\nparallel: {tensor: 2, pipeline: 4, first_stage_layers: 6}",
     r"Megatron's uneven pipeline stages .* strategy fsdp splits the layers evenly"),
    ("strategy: zero\nparallel: {tensor: 2, tensor_sequence: true}", r"tensor_sequence is Megatron's"),
    ("offload: {activations: cpu}", r"needs activation_checkpointing: full; this recipe has none"),
    ("offload: {activations: cpu}\nactivation_checkpointing: full", None),
])
def test_megatron_stage_and_offload_rules(extra: str, message: str | None) -> None:
    """Megatron-Core's uneven end stages (`get_num_layers_to_build`'s assertions), Megatron's
    sequence parallelism, and CPU-held checkpoints (full recompute only), refused here."""
    lines = [line for line in MEGATRON.splitlines()
             if not any(line.startswith(key.split(":")[0] + ":") for key in extra.splitlines())]
    text = "\n".join(lines) + "\n" + extra + "\n"
    if message is None:
        resolve(recipe_from_text(text, "m.yaml"))
        return
    with pytest.raises(RecipeError, match=message) as caught:
        resolve(recipe_from_text(text, "m.yaml"))
    assert caught.value.where is not None and caught.value.where.line > 1  # at the key, not the start


def test_two_autos_beside_a_fixed_global_need_what_memory_needs() -> None:
    """`micro: auto` with accumulation auto is the largest micro-batch that fits: without the
    shape, sequence and GPU memory that is an error naming them, never accumulation 1."""
    with pytest.raises(RecipeError) as caught:
        plan_of("auto", "auto", 64)
    message = caught.value.message
    assert ("batch.micro and batch.accumulation are auto, so the micro-batch is the largest that fits the GPU "
            "(batch.micro_policy largest-that-fits), which needs model.layers, model.heads, model.vocab, "
            "batch.seq_len, cluster.gpu_memory (or cluster.gpu)") in message
    assert "set batch.micro_policy: accumulation-1 for micro = global / DP = 64 / 8 = 8" in message
    assert caught.value.where is not None and caught.value.where.line == 7  # the batch line


def test_micro_policy_accumulation_1_is_the_stated_other_meaning() -> None:
    text = BASE.format(micro="auto", acc="auto", glob=64, nodes=1, gpus=8, tp=1).replace(
        "global: 64}", "global: 64, micro_policy: accumulation-1}")
    plan = resolve(recipe_from_text(text, "r.yaml"))
    assert (plan.batch.micro, plan.batch.accumulation, plan.batch.global_) == (8, 1, 64)
    assert plan.provenance["batch.accumulation"] == "1, as batch.micro_policy accumulation-1 says"


def test_the_seed_without_its_gpu_memory_says_what_is_missing(cli: Callable[..., Result],
                                                              tmp_path: Path) -> None:
    """The issue's case: micro auto on the seed without GPU memory used to plan micro 32 per
    GPU ("needs 316 GB", exit 0)."""
    recipe = tmp_path / "r.yaml"
    recipe.write_text((RECIPES / "seed-8b-32gpu-zero2.yaml").read_text()
                      .replace(", gpu_memory: 80GB", "").replace("micro: 2", "micro: auto"))
    result = cli("plan", recipe)
    assert result.code == 2 and result.err.count("\n") == 1
    assert "which needs cluster.gpu_memory (or cluster.gpu): give it" in result.err
    fitted = cli("resolve", recipe, "--set", "cluster.gpu=h100", "--format", "json")
    assert fitted.code == 0, fitted.err
    data = json.loads(fitted.out)
    assert data["cluster.gpu_memory"] == {"value": 80 * 10**9,
                                          "from": "80 GB, as cluster.gpu h100 implies (engines/gpus.py)"}
    assert data["batch.micro"]["value"] < 32
    assert data["batch.micro"]["from"].startswith("largest that fits 80 GB at the top of its error band")


def test_one_sample_per_rank_needs_no_memory_model() -> None:
    plan = plan_of("auto", "auto", 8)
    assert (plan.batch.micro, plan.batch.accumulation) == (1, 1)


def test_an_accelerate_program_defaults_to_accelerate_s_launcher() -> None:
    """It learns its engine only from `accelerate launch`: the launcher `auto` means is that one,
    on its DeepSpeed path for ZeRO, so `plan --search` judges the engine `launch` will run."""
    seed = str(Path(__file__).parent.parent / "recipes" / "seed-8b-32gpu-zero2.yaml")
    zero = load_plan(seed, ["launch.program_kind=accelerate"])
    assert zero.backend == "accelerate-deepspeed"
    assert zero.provenance["launch.backend"] == "default for strategy zero and launch.program_kind accelerate"
    assert load_plan(seed, ["launch.program_kind=accelerate", "strategy=fsdp"]).backend == "accelerate"
    assert load_plan(seed, ["launch.program_kind=hf"]).backend == "deepspeed"
    assert load_plan(seed, []).provenance["launch.backend"] == "default for strategy zero"


@pytest.mark.parametrize("strategy", ["ddp", "zero", "megatron"])
def test_fsdp_version_needs_strategy_fsdp(strategy: str) -> None:
    """Which FSDP runs means nothing to another strategy: refused at the field, not ignored."""
    text = (f"recipe: 1\nmodel: {{}}\ncluster: {{nodes: 1, gpus_per_node: 8}}\nstrategy: {strategy}\n"
            "fsdp_version: 1\nbatch: {micro: 2, accumulation: 4}\n")
    with pytest.raises(RecipeError, match=f"fsdp_version 1 says which FSDP strategy fsdp runs; this recipe has "
                                          f"strategy {strategy}") as caught:
        resolve(recipe_from_text(text))
    assert caught.value.where is not None and (caught.value.where.line, caught.value.where.col) == (5, 15)


def test_a_variant_leaving_fsdp_leaves_its_version() -> None:
    """Advice, `--compare` and search move a recipe off `fsdp`: its `fsdp_version` goes with
    the strategy (else every such variant would be refused), and comes back as the default."""
    from distrecipe.translator.resolve import variant

    plan = resolve(recipe_from_text("recipe: 1\nmodel: {}\ncluster: {nodes: 1, gpus_per_node: 8}\nstrategy: fsdp\n"
                                    "fsdp_version: 1\nbatch: {micro: 2, accumulation: 4}\n"))
    zero = variant(plan, strategy="zero", stage=2)
    assert (zero.recipe.fsdp_version, zero.fsdp_version) == (None, None)
    assert variant(plan, stage=2).fsdp_version == 1  # staying FSDP keeps it
    assert variant(zero, strategy="fsdp", stage=3).fsdp_version == 2
