"""Recipe → TRL: the config `trl grpo|sft` reads, judged by TRL itself, and back.

TRL's own CLI path (`tests/trl_judge.command_refusal`) parses the written config with the
written Accelerate config, and GRPOConfig's derived generation batch is the recipe's
prompts per step in whole groups; `import` gives the recipe back, and `diff` names only
what a TRL config cannot hold (the model's shape, the GPU)."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import pytest
import yaml

from distrecipe import api
from distrecipe.errors import DistrecipeError
from distrecipe.translator.importers import World
from distrecipe.translator.importers.registry import import_document, read_native
from distrecipe.translator.targets import TARGETS, EmitOptions
from tests import trl_judge
from tests.grpo import GRPO as BASE_GRPO

pytest.importorskip("trl")

GRPO = BASE_GRPO.replace("rollout_memory: 0.3}", "rollout_memory: 0.3, free_rollout_memory: true}")
SFT = """recipe: 1
name: sft-2x4
model: {params: 5.0e8, hidden_size: 896, layers: 24, heads: 14, kv_heads: 2, vocab: 151936}
cluster: {nodes: 2, gpus_per_node: 4}
strategy: fsdp
stage: 3
batch: {micro: 2, global: 64, seq_len: 1024}
precision: bf16
optimizer: {name: adamw, lr: 2.0e-5}
launch: {backend: accelerate}
"""


def compiled(text: str, tmp_path: Path) -> tuple[Any, dict[str, str]]:
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(text)
    plan = api.load_plan(recipe)
    files = TARGETS["trl"](plan, EmitOptions()).files
    for name, body in files.items():
        (tmp_path / name).write_text(body)
    return plan, files


@pytest.mark.parametrize(("text", "command", "config"), [(GRPO, "grpo", "grpo_config.yaml"),
                                                        (SFT, "sft", "sft_config.yaml")])
def test_trl_starts_the_written_config_at_the_recipe_s_world(text: str, command: str, config: str,
                                                             tmp_path: Path) -> None:
    plan, files = compiled(text, tmp_path)
    assert files[config].startswith(f"# distrecipe: {plan.recipe.name}. trl {command} --config {config} "
                                    "--accelerate_config accelerate_config.yaml\n")
    accelerate = yaml.safe_load(files["accelerate_config.yaml"])
    assert accelerate["num_processes"] == plan.dims.world  # not TRL's shipped 8
    argv = ["--config", config, "--accelerate_config", "accelerate_config.yaml", "--model_name_or_path", "m",
            "--output_dir", str(tmp_path / "out")]
    assert trl_judge.command_refusal(command, argv, tmp_path) is None


def test_grpo_s_generation_batch_is_the_recipe_s_prompts_in_whole_groups(tmp_path: Path) -> None:
    plan, _ = compiled(GRPO, tmp_path)
    parser = trl_judge.parser("grpo")
    with trl_judge.world(plan.dims.world):
        _script, args, *_ = parser.parse_args_and_config(
            ["--config", str(tmp_path / "grpo_config.yaml"), "--model_name_or_path", "m", "--report_to", "none",
             "--output_dir", str(tmp_path / "out"), "--deepspeed", str(tmp_path / "ds_config.json")])
    rl = plan.recipe.rl
    assert rl is not None
    assert args.num_generations == rl.rollout_n
    assert args.generation_batch_size == rl.prompts_per_step * rl.rollout_n == plan.batch.global_
    assert (args.per_device_train_batch_size, args.gradient_accumulation_steps) == (
        plan.batch.micro, plan.batch.accumulation)
    assert (args.use_vllm, args.vllm_mode, args.vllm_gpu_memory_utilization, args.vllm_enable_sleep_mode) == (
        True, "colocate", rl.rollout_memory, True)


def test_recipe_to_trl_and_back(tmp_path: Path) -> None:
    plan, _ = compiled(GRPO, tmp_path)
    kind, doc = read_native(tmp_path / "grpo_config.yaml")
    assert kind == "trl"
    back = import_document(kind, doc, World.of(plan.dims.world)).recipe
    assert back["rl"] == {"rollout_n": 8, "prompts_per_step": 16, "rollout_memory": 0.3,
                          "free_rollout_memory": True}
    assert (back["strategy"], back["stage"], back["precision"], back["launch"]) == (
        "zero", 3, "bf16", {"backend": "accelerate-deepspeed"})
    assert (back["batch"]["micro"], back["batch"]["accumulation"]) == (4, 4)
    assert back["optimizer"]["lr"] == 1.0e-6


def test_diff_names_what_a_trl_config_cannot_hold(tmp_path: Path, cli: Any) -> None:
    compiled(GRPO, tmp_path)
    result = cli("diff", tmp_path / "recipe.yaml", tmp_path / "grpo_config.yaml", "--world", "8")
    assert result.code == 0, result.err
    named = {line.split(":")[0] for line in result.out.splitlines() if "→" in line}
    assert named == {"model.params", "model.layers", "model.heads", "model.kv_heads", "model.vocab",
                     "cluster.gpu", "cluster.gpu_memory", "batch.seq_len"}


@pytest.mark.parametrize(("launch", "named"), [("", False), ("launch: {backend: deepspeed}\n", True),
                                               ("launch: {backend: accelerate}\n", True)])
def test_trl_under_zero_writes_deepspeed_s_plugin_with_the_ds_config_it_names(launch: str, named: bool,
                                                                            tmp_path: Path) -> None:
    """Whatever launcher the recipe says (`auto` is verl's for `rl`), `trl` runs under
    `accelerate launch` and the config's `deepspeed` key runs DeepSpeed: the pair is the
    DeepSpeed plugin's config and the ds_config both name, and import reads it back."""
    from distrecipe.judges import accelerate as accelerate_judge

    text = GRPO.replace("launch: {backend: accelerate-deepspeed}\n", launch)
    plan, files = compiled(text, tmp_path)
    assert yaml.safe_load(files["grpo_config.yaml"])["deepspeed"] == "ds_config.json"
    assert "ds_config.json" in files
    args, env = accelerate_judge.launch_env(tmp_path / "accelerate_config.yaml")
    assert (env["ACCELERATE_USE_DEEPSPEED"], env["ACCELERATE_DEEPSPEED_CONFIG_FILE"]) == ("true", "ds_config.json")
    with contextlib.chdir(tmp_path):
        plugin = accelerate_judge.worker_plugin(args, env)
    assert plugin.deepspeed_config["zero_optimization"]["stage"] == 3
    argv = ["--config", "grpo_config.yaml", "--accelerate_config", "accelerate_config.yaml", "--model_name_or_path",
            "m", "--output_dir", str(tmp_path / "out")]
    assert trl_judge.command_refusal("grpo", argv, tmp_path) is None
    found = [f.message for f in TARGETS["trl"](plan, EmitOptions()).findings if f.code == "DR234"]
    assert any("accelerate_config.yaml is its DeepSpeed plugin" in m for m in found) is named
    kind, doc = read_native(tmp_path / "grpo_config.yaml")
    back = import_document(kind, doc, World.of(plan.dims.world)).recipe
    assert (back["strategy"], back["stage"], back["launch"]) == ("zero", 3, {"backend": "accelerate-deepspeed"})


def test_a_group_of_one_is_refused_as_grpo_refuses_it(tmp_path: Path) -> None:
    from distrecipe.errors import DistrecipeError

    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(GRPO.replace("rollout_n: 8, prompts_per_step: 16", "rollout_n: 1, prompts_per_step: 128"))
    with pytest.raises(DistrecipeError, match=r"DR208.*at least 2 generations per prompt; rl\.rollout_n is 1"):
        TARGETS["trl"](api.load_plan(recipe), EmitOptions())
    assert trl_judge.refusal_of({"model_name_or_path": "m", "num_generations": 1, "output_dir": str(tmp_path)},
                                "grpo", tmp_path) is not None


LONG = GRPO.replace("prompts_per_step: 16", "prompts_per_step: 32")
"""One generation of 32 prompts × 8 = 256 sequences, trained in two optimizer steps of 128."""


def test_a_generation_of_several_steps_is_grpo_s_generation_batch(tmp_path: Path) -> None:
    plan, files = compiled(LONG, tmp_path)
    assert yaml.safe_load(files["grpo_config.yaml"])["generation_batch_size"] == 256
    with trl_judge.world(plan.dims.world):
        _script, args, *_ = trl_judge.parser("grpo").parse_args_and_config(
            ["--config", str(tmp_path / "grpo_config.yaml"), "--model_name_or_path", "m", "--report_to", "none",
             "--output_dir", str(tmp_path / "out"), "--deepspeed", str(tmp_path / "ds_config.json")])
    # 256 / (micro 4 × world 8) = 8 micro-steps per generation, twice the accumulation of 4
    assert (args.generation_batch_size, args.steps_per_generation, args.gradient_accumulation_steps) == (256, 8, 4)
    kind, doc = read_native(tmp_path / "grpo_config.yaml")
    assert import_document(kind, doc, World.of(plan.dims.world)).recipe["rl"]["prompts_per_step"] == 32


def test_a_generation_batch_grpo_refuses_is_refused_with_the_nearest_prompts(tmp_path: Path) -> None:
    from distrecipe.errors import DistrecipeError
    from distrecipe.translator import trl

    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(GRPO.replace("prompts_per_step: 16", "prompts_per_step: 18"))
    plan = api.load_plan(recipe)
    with pytest.raises(DistrecipeError, match=r"DR208.*generation_batch_size = rl\.prompts_per_step × rl\.rollout_n "
                                              r"= 18 × 8 = 144 must be divisible by per_device_train_batch_size × "
                                              r"world = 4 × 8 = 32; nearest valid rl\.prompts_per_step: 16 or 20"):
        TARGETS["trl"](plan, EmitOptions())
    values = {key: value for key, value in trl.emit(plan).items() if key != "deepspeed"}
    said = trl_judge.refusal_of({**values, "model_name_or_path": "m", "output_dir": str(tmp_path)}, "grpo",
                                tmp_path, size=8)
    assert said is not None and "generation_batch_size (144) must be divisible by the global batch size (32)" in said
    for prompts in (16, 20):  # the suggestions pass TRL's own check
        recipe.write_text(GRPO.replace("prompts_per_step: 16", f"prompts_per_step: {prompts}"))
        values = {key: value for key, value in trl.emit(api.load_plan(recipe)).items() if key != "deepspeed"}
        assert trl_judge.refusal_of({**values, "model_name_or_path": "m", "output_dir": str(tmp_path)}, "grpo",
                                    tmp_path, size=8) is None


SERVER = GRPO.replace("rollout_memory: 0.3, free_rollout_memory: true", "rollout_mode: server")


def test_a_vllm_server_is_grpo_s_server_mode_and_comes_back(tmp_path: Path) -> None:
    plan, files = compiled(SERVER, tmp_path)
    config = yaml.safe_load(files["grpo_config.yaml"])
    assert (config["use_vllm"], config["vllm_mode"]) == (True, "server")
    assert not {"vllm_gpu_memory_utilization", "vllm_enable_sleep_mode"} & set(config)
    argv = ["--config", "grpo_config.yaml", "--accelerate_config", "accelerate_config.yaml", "--model_name_or_path",
            "m", "--output_dir", str(tmp_path / "out")]
    assert trl_judge.command_refusal("grpo", argv, tmp_path) is None
    kind, doc = read_native(tmp_path / "grpo_config.yaml")
    assert import_document(kind, doc, World.of(plan.dims.world)).recipe["rl"] == {
        "rollout_n": 8, "prompts_per_step": 16, "rollout_mode": "server"}


def test_a_server_s_memory_is_named_not_written(tmp_path: Path) -> None:
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(SERVER.replace("rollout_mode: server", "rollout_mode: server, rollout_memory: 0.9"))
    out = TARGETS["trl"](api.load_plan(recipe), EmitOptions())
    assert "vllm_gpu_memory_utilization" not in out.files["grpo_config.yaml"]
    [named] = [f.message for f in out.findings if f.code == "DR222"]
    assert named.endswith("(rl.rollout_memory: a vLLM server's memory is `trl vllm-serve`'s "
                          "(--gpu_memory_utilization), not the config's)")


@pytest.mark.parametrize(("target", "why"), [("verl", "hybrid engine generates on the actor's GPUs"),
                                             ("openrlhf", "separate vLLM engines")])
def test_the_other_trainers_name_a_server_they_cannot_place(target: str, why: str, tmp_path: Path) -> None:
    from distrecipe.errors import DistrecipeError

    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(SERVER.replace("launch: {backend: accelerate-deepspeed}", "launch: {backend: verl}"))
    with pytest.raises(DistrecipeError, match=f"DR208.*rl.rollout_mode server: .*{why}"):
        TARGETS[target](api.load_plan(recipe), EmitOptions())


@pytest.mark.parametrize(("knobs", "where"), [({"steps_per_generation": 8}, None),
                                              ({"generation_batch_size": 256}, None),
                                              ({"generation_batch_size": 256, "steps_per_generation": 8},
                                               "together"),
                                              ({"generation_batch_size": 48}, "positive multiple")])
def test_import_reads_grpo_s_generation_batch(knobs: dict[str, int], where: str | None, tmp_path: Path) -> None:
    from distrecipe.translator.importers import NotImportable

    plan, files = compiled(GRPO, tmp_path)
    config = {**yaml.safe_load(files["grpo_config.yaml"]), **knobs}
    (tmp_path / "grpo_config.yaml").write_text(yaml.safe_dump(config))
    kind, doc = read_native(tmp_path / "grpo_config.yaml")
    if where is None:
        assert import_document(kind, doc, World.of(plan.dims.world)).recipe["rl"]["prompts_per_step"] == 32
        assert trl_judge.refusal_of({**config, "model_name_or_path": "m", "output_dir": str(tmp_path),
                                     "deepspeed": None}, "grpo", tmp_path, size=8) is None
    else:
        with pytest.raises(NotImportable, match=where):
            import_document(kind, doc, World.of(plan.dims.world))
        assert trl_judge.refusal_of({**config, "model_name_or_path": "m", "output_dir": str(tmp_path),
                                     "deepspeed": None}, "grpo", tmp_path, size=8) is not None


def test_what_the_trl_config_carries_is_not_named_as_lost(tmp_path: Path) -> None:
    """The findings read the carry table over the files written together: the TRL config
    carries the Trainer's checkpointing and clipping, which an Accelerate config alone cannot."""
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(SFT + "grad_clip: 0.5\ncheckpoint: {every: 100, keep: 2}\nnative: {verl: [trainer.x=1]}\n")
    found = TARGETS["trl"](api.load_plan(recipe), EmitOptions()).findings
    text = "\n".join(f.message for f in found)
    assert not {"grad_clip", "checkpoint.every", "checkpoint.keep"} & {word.rstrip(",") for word in text.split()}
    assert [f.message.endswith("(native.verl: trainer.x)") for f in found if f.code == "DR233"] == [True]


@pytest.mark.parametrize(("steps", "refused"), [(4, False), (2, True)])
def test_native_trl_is_written_and_held_to_the_recipe(steps: int, refused: bool, tmp_path: Path) -> None:
    """`native.trl` (TRL's own keys) lands in the config; a generation in steps that is the
    recipe's (16 prompts × 8 = 4 steps of micro 4 × 8 ranks) replaces generation_batch_size,
    which GRPOConfig refuses beside it, and one that is not is refused at resolve."""
    text = GRPO + f"native: {{trl: {{beta: 0.1, model_name_or_path: m, steps_per_generation: {steps}}}}}\n"
    if refused:
        recipe = tmp_path / "recipe.yaml"
        recipe.write_text(text)
        with pytest.raises(DistrecipeError, match=r"native\.trl\.steps_per_generation.*rl\.prompts_per_step"):
            api.load_plan(recipe)
        return
    _plan, files = compiled(text.replace("global: 128", "global: 32"), tmp_path)
    config = yaml.safe_load(files["grpo_config.yaml"])
    assert (config["beta"], config["steps_per_generation"]) == (0.1, 4) and "generation_batch_size" not in config
    argv = ["--config", "grpo_config.yaml", "--accelerate_config", "accelerate_config.yaml",
            "--output_dir", str(tmp_path / "out")]
    assert trl_judge.command_refusal("grpo", argv, tmp_path) is None


def test_a_native_null_names_the_section_that_holds_it(tmp_path: Path) -> None:
    """TRL's config is written with native.hf and native.trl: a null that removes the
    optimizer's key is named where it is written, not as the Accelerate file's gap."""
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(SFT + "native: {hf: {optim: null}}\n")
    found = [f.message for f in TARGETS["trl"](api.load_plan(recipe), EmitOptions()).findings if f.code == "DR222"]
    assert any("optimizer.name adamw" in m and "here native.hf.optim is null: compile leaves it out" in m
               for m in found), found
