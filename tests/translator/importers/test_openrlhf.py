"""OpenRLHF command line → recipe: recipe → `--target openrlhf` → import gives the recipe
back, and what a command line says beyond a recipe is named by the option written."""

from __future__ import annotations

from pathlib import Path

import pytest

from distrecipe import api
from distrecipe.translator.importers import NotImportable, World
from distrecipe.translator.importers.registry import import_document, read_native
from distrecipe.translator.targets import TARGETS, EmitOptions
from tests.translator.test_openrlhf import CASES, RECIPE


def imported(text: str, tmp_path: Path, world: int | None = None):  # type: ignore[no-untyped-def]
    script = tmp_path / "openrlhf_train.sh"
    script.write_text(text)
    kind, doc = read_native(script)
    assert kind == "openrlhf"
    return import_document(kind, doc, None if world is None else World.of(world))


@pytest.mark.parametrize("numbers", CASES)
@pytest.mark.parametrize("memory", ["rollout_memory: 0.4, free_rollout_memory: true", "rollout_memory: 0.7"])
def test_recipe_to_openrlhf_and_back(numbers: tuple[int, ...], memory: str, tmp_path: Path) -> None:
    nodes, gpus, stage, micro, global_, n = numbers
    text = RECIPE.format(world=nodes * gpus, nodes=nodes, gpus=gpus, stage=stage, micro=micro, global_=global_, n=n,
                         prompts=global_ // n).replace("rollout_memory: 0.4, free_rollout_memory: true", memory)
    (tmp_path / "recipe.yaml").write_text(text)
    plan = api.load_plan(tmp_path / "recipe.yaml")
    back = imported(TARGETS["openrlhf"](plan, EmitOptions()).files["openrlhf_train.sh"], tmp_path)
    r = plan.recipe
    assert r.rl is not None and r.optimizer is not None
    rl = {"rollout_n": n, "prompts_per_step": global_ // n, "rollout_memory": r.rl.rollout_memory,
          **({"free_rollout_memory": True} if r.rl.free_rollout_memory else {})}
    assert back.recipe == {"recipe": 1, "model": {}, "cluster": {"nodes": nodes, "gpus_per_node": gpus}, "strategy": "zero", "stage": stage,
                           "batch": {"micro": micro, "global": global_}, "precision": "bf16",
                           "optimizer": {"name": "adamw", "lr": r.optimizer.lr}, "grad_clip": r.grad_clip,
                           "rl": rl, "launch": {"backend": "openrlhf"}}
    # only the user's models and data are left: named by the option written
    assert back.notes == ["3 OpenRLHF options are not a recipe's (models, data, algorithm, generation: "
                          "--actor.model_name_or_path, --data.prompt_dataset, --reward.model_name_or_path): keep "
                          "the command line for them"]


LINE = """python3 -m openrlhf.cli.train_ppo_ray \\
    --actor.num_nodes 1 --actor.num_gpus_per_node 4 --ref.num_nodes 1 --ref.num_gpus_per_node 2 \\
    --vllm.num_engines 2 --vllm.tensor_parallel_size 2 \\
    --train.batch_size 64 --train.micro_batch_size 4 --rollout.batch_size 32 --rollout.n_samples_per_prompt 4 \\
    --algo.advantage.estimator group_norm --actor.model_name_or_path m
"""


def test_separate_engines_are_a_server_and_the_rest_is_named(tmp_path: Path) -> None:
    back = imported(LINE, tmp_path)
    # unstated: OpenRLHF's parser defaults (ZeRO-2, bf16, lr 1e-6, max_norm 1.0)
    assert (back.recipe["stage"], back.recipe["precision"], back.recipe["grad_clip"]) == (2, "bf16", 1.0)
    assert back.recipe["rl"] == {"rollout_n": 4, "prompts_per_step": 32, "rollout_mode": "server"}
    assert back.notes == [
        "2 OpenRLHF options are not a recipe's (models, data, algorithm, generation: "
        "--actor.model_name_or_path, --algo.advantage.estimator): keep the command line for them",
        "--ref.num_gpus_per_node, --vllm.tensor_parallel_size: not the recipe's placement (every model group "
        "on all 1 × 4 GPUs, one-GPU vLLM engines): keep the command line for them",
        "--critic.num_gpus_per_node (default 8), --reward.num_gpus_per_node (default 8): left to OpenRLHF's "
        "defaults, which compile replaces with the recipe's placement (1 × 4 GPUs for every model group)"]


def test_options_in_a_bash_array_are_refused_not_read_as_defaults(tmp_path: Path) -> None:
    """`${ARGS[@]}` expands to options import cannot see: reading the line without them would
    put the parser's defaults (8 GPUs, one sample a prompt) in the recipe without a word."""
    script = tmp_path / "train.sh"
    script.write_text("ARGS=(\n   --actor.num_gpus_per_node 4\n)\n"
                      "python3 -m openrlhf.cli.train_ppo_ray \\\n   ${ARGS[@]} \\\n   --train.colocate_all\n")
    kind, doc = read_native(script)
    with pytest.raises(NotImportable, match=r"\$\{ARGS\[@\]\} is left to the shell") as caught:
        import_document(kind, doc, None)
    where = caught.value.where
    assert where is not None and (where.line, where.col) == (5, 4)


def test_a_number_left_to_the_shell_is_refused_at_its_option(tmp_path: Path) -> None:
    with pytest.raises(NotImportable, match=r"--train\.batch_size is left to a shell variable") as caught:
        imported(LINE.replace("--train.batch_size 64", "--train.batch_size $BATCH"), tmp_path)
    where = caught.value.where
    assert where is not None and (where.line, where.col) == (4, 24)  # the variable


def test_a_word_that_is_no_number_is_refused_not_a_traceback(tmp_path: Path) -> None:
    with pytest.raises(NotImportable, match=r"lr 'fast' is not a number"):
        imported(LINE.replace("--actor.model_name_or_path m", "--actor.adam.lr fast"), tmp_path)


def test_an_option_of_another_release_is_refused_at_its_name(tmp_path: Path) -> None:
    """OpenRLHF < 0.10.2's flat `--train_batch_size`: read at the default instead, the batch would change."""
    with pytest.raises(NotImportable, match=r"--train_batch_size is not an option of OpenRLHF [\d.]+'s "
                                            r"train_ppo_ray") as caught:
        imported(LINE.replace("--train.batch_size 64", "--train_batch_size 64"), tmp_path)
    where = caught.value.where
    assert where is not None and (where.line, where.col) == (4, 5)


CKPT = """python3 -m openrlhf.cli.train_ppo_ray \\
    --actor.num_nodes 1 --actor.num_gpus_per_node 8 --vllm.num_engines 8 --train.colocate_all \\
    --train.batch_size 128 --train.micro_batch_size 4 --rollout.batch_size 16 --rollout.n_samples_per_prompt 8 \\
    --actor.model_name_or_path m CKPT
"""


@pytest.mark.parametrize(("options", "checkpoint", "note"), [
    ("--ckpt.load_enable --ckpt.save_steps 5", {"dir": "./ckpt/checkpoints_ppo_ray", "every": 5, "resume": "auto"},
     "--ckpt.load_enable without --ckpt.path: checkpoint.dir is OpenRLHF's default ./ckpt/checkpoints_ppo_ray"),
    ("--ckpt.save_steps -1 --ckpt.max_num 1", {"keep": 1}, None),
    ("--ckpt.path /ck --ckpt.save_hf", {"dir": "/ck"}, "--ckpt.save_hf"),
], ids=["default-path", "never-saves", "save-hf-named"])
def test_ckpt_options_are_the_recipe_s_checkpoint(options: str, checkpoint: dict[str, object], note: str | None,
                                                 tmp_path: Path) -> None:
    back = imported(CKPT.replace("CKPT", options), tmp_path)
    assert back.recipe["checkpoint"] == checkpoint
    assert back.recipe["launch"] == {"backend": "openrlhf"}
    assert note is None or any(note in line for line in back.notes), back.notes


def test_a_save_interval_the_recipe_cannot_hold_is_refused_where_written(tmp_path: Path) -> None:
    with pytest.raises(NotImportable, match=r"--ckpt\.save_steps 0: the recipe's checkpoint\.every is at least 1") as caught:
        imported(CKPT.replace("CKPT", "--ckpt.save_steps 0"), tmp_path)
    assert caught.value.where is not None and caught.value.where.line == 4


def test_a_ckpt_option_left_to_the_shell_is_named_not_read(tmp_path: Path) -> None:
    back = imported(CKPT.replace("CKPT", "--ckpt.path $CKPT --ckpt.load_enable --ckpt.save_steps 5"), tmp_path)
    assert back.recipe["checkpoint"] == {"every": 5}
    assert any(line.startswith("--ckpt.load_enable, --ckpt.path: not read (the save dir is left to the shell)")
               for line in back.notes), back.notes


@pytest.mark.parametrize(("options", "schedule", "note"), [
    ("--actor.lr_scheduler cosine", {"decay": "cosine", "warmup_ratio": 0.03, "min_lr_ratio": 0.0},
     "--actor.lr_scheduler cosine decays to 0"),
    ("--actor.lr_scheduler constant --actor.lr_warmup_ratio 0.1", {"decay": "constant", "warmup_ratio": 0.0},
     "--actor.lr_scheduler constant ignores the warmup"),
    ("--actor.lr_warmup_ratio 0.05", {"decay": "cosine", "warmup_ratio": 0.05, "min_lr_ratio": 0.1}, None),
    ("--actor.lr_scheduler polynomial", None, "--actor.lr_scheduler polynomial: the recipe's schedule has no such"),
], ids=["cosine-to-0", "constant", "defaults", "unknown"])
def test_the_actor_s_schedule_is_what_runs(options: str, schedule: dict[str, object] | None, note: str | None,
                                           tmp_path: Path) -> None:
    """Unstated options are the parser's defaults (what runs); a scheduler the recipe has no
    decay for, or one compile writes back under another name, is named."""
    back = imported(CKPT.replace("CKPT", options), tmp_path)
    assert back.recipe.get("schedule") == schedule
    assert note is None or any(line.startswith(note) for line in back.notes), back.notes
