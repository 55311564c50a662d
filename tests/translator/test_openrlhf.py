"""Recipe → OpenRLHF's command line, judged by OpenRLHF: its entry module's parser and
`__main__` checks take the written line, and DeepSpeed takes the ds_config OpenRLHF builds
from it at the actor's world; what OpenRLHF cannot run is refused."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml

from distrecipe import api
from distrecipe.errors import DistrecipeError
from distrecipe.translator.targets import TARGETS, EmitOptions
from tests import openrlhf_judge

RECIPE = """recipe: 1
name: grpo-{world}
model: {{params: 1.5e9, hidden_size: 1536, layers: 28, heads: 12, kv_heads: 2, vocab: 151936}}
cluster: {{nodes: {nodes}, gpus_per_node: {gpus}, gpu: h100}}
strategy: zero
stage: {stage}
batch: {{micro: {micro}, global: {global_}, seq_len: 2048}}
precision: bf16
optimizer: {{name: adamw, lr: 1.0e-6}}
grad_clip: 1.0
rl: {{rollout_n: {n}, prompts_per_step: {prompts}, rollout_memory: 0.4, free_rollout_memory: true}}
"""
def judged(path: Path) -> tuple[list[str], dict[str, Any]]:
    """The recipe at `path` compiled to OpenRLHF's script (written beside it, for import), the
    words bash hands over (the shell's models and data filled in), and OpenRLHF's parser's
    reading of them, which its own checks accept."""
    text = TARGETS["openrlhf"](api.load_plan(path), EmitOptions()).files["openrlhf_train.sh"]
    (path.parent / "openrlhf_train.sh").write_text(text)
    shell = text.replace("\\\n", " ").replace("$ACTOR", "a").replace("$REWARD", "r").replace("$PROMPTS", "p")
    words = shlex.split(shell, comments=True)  # as bash hands the words over
    assert openrlhf_judge.verdict(words[2], words[3:]) is None
    return words, vars(openrlhf_judge.parser(words[2]).parse_args(words[3:]))


CASES = [  # nodes, gpus, stage, micro, global, n
    (1, 8, 3, 4, 128, 8), (2, 8, 2, 2, 256, 4), (1, 7, 3, 1, 56, 7), (1, 4, 2, 8, 64, 16)]


@pytest.mark.parametrize("numbers", CASES, ids=["-".join(map(str, c)) for c in CASES])
def test_openrlhf_takes_the_written_line(numbers: tuple[int, ...], tmp_path: Path) -> None:
    nodes, gpus, stage, micro, global_, n = numbers
    path = tmp_path / "recipe.yaml"
    path.write_text(RECIPE.format(world=nodes * gpus, nodes=nodes, gpus=gpus, stage=stage, micro=micro,
                                  global_=global_, n=n, prompts=global_ // n))
    words, args = judged(path)
    assert words[:3] == ["python3", "-m", "openrlhf.cli.train_ppo_ray"]
    assert (args["train.batch_size"], args["rollout.batch_size"] * args["rollout.n_samples_per_prompt"]
            ) == (global_, global_), "one rollout is one optimizer step of the recipe's global batch"


@pytest.mark.parametrize(("change", "why"), [(("strategy: zero", "strategy: fsdp"), "not fsdp"),
                                             (("precision: bf16", "precision: fp32"), "not fp32")])
def test_what_openrlhf_cannot_run_is_refused(change: tuple[str, str], why: str, tmp_path: Path) -> None:
    path = tmp_path / "recipe.yaml"
    path.write_text(RECIPE.format(world=8, nodes=1, gpus=8, stage=3, micro=4, global_=128, n=8, prompts=16)
                    .replace(*change))
    with pytest.raises(DistrecipeError, match=f"DR208.*{why}"):
        TARGETS["openrlhf"](api.load_plan(path), EmitOptions())


def test_what_the_line_does_not_carry_is_named_by_the_option_it_leaves(tmp_path: Path) -> None:
    """The findings read OpenRLHF's column of the carry table: a stated field the line has an
    option for but compile does not write names that option; a native section, its keys."""
    path = tmp_path / "recipe.yaml"
    path.write_text(RECIPE.format(world=8, nodes=1, gpus=8, stage=3, micro=4, global_=128, n=8, prompts=16)
                    .replace("name: adamw, lr: 1.0e-6}", "name: sgd, lr: 1.0e-6}")
                    + "checkpoint: {weights: full}\noffload: {optimizer: cpu}\nnative: {hf: {seed: 3}}\n")
    found: dict[str, str] = {}
    for f in TARGETS["openrlhf"](api.load_plan(path), EmitOptions()).findings:
        found[f.code] = found.get(f.code, "") + f.message
    assert "offload.optimizer cpu" in found["DR222"] and "--ds.adam_offload is not written" in found["DR222"]
    assert "checkpoint.weights full" in found["DR222"] and "--ckpt.save_hf" in found["DR222"]
    assert "optimizer.name sgd" in found["DR222"] and "OpenRLHF builds its own AdamW" in found["DR222"]
    assert "native.hf: seed" in found["DR233"]


def test_an_optimizer_without_a_learning_rate_leaves_openrlhf_s(tmp_path: Path) -> None:
    path = tmp_path / "recipe.yaml"
    path.write_text(RECIPE.format(world=8, nodes=1, gpus=8, stage=3, micro=4, global_=128, n=8, prompts=16)
                    .replace("optimizer: {name: adamw, lr: 1.0e-6}", "optimizer: {name: adamw}"))
    text = TARGETS["openrlhf"](api.load_plan(path), EmitOptions()).files["openrlhf_train.sh"]
    assert "--actor.adam.lr" not in text


def test_the_checkpoint_is_openrlhf_s_ckpt_options_and_comes_back(tmp_path: Path) -> None:
    """`checkpoint.dir/every/keep/resume auto` are `--ckpt.path/save_steps/max_num/load_enable`,
    as OpenRLHF's parser reads them; import reads them back, with `launch.backend: openrlhf` so
    `launch` runs the trainer the line is for (an `rl` recipe's default is verl)."""
    from distrecipe.translator.importers import World
    from distrecipe.translator.importers.registry import import_document, read_native

    path = tmp_path / "recipe.yaml"
    path.write_text(RECIPE.format(world=8, nodes=1, gpus=8, stage=3, micro=4, global_=128, n=8, prompts=16)
                    + "checkpoint: {dir: ck/run, every: 10, keep: 2, resume: auto}\n")
    _, args = judged(path)
    assert (args["ckpt.path"], args["ckpt.save_steps"], args["ckpt.max_num"], args["ckpt.load_enable"]) == (
        "ck/run", 10, 2, True)
    kind, doc = read_native(tmp_path / "openrlhf_train.sh")
    back = import_document(kind, doc, World.of(8)).recipe
    assert back["checkpoint"] == {"dir": "ck/run", "every": 10, "keep": 2, "resume": "auto"}
    assert back["launch"] == {"backend": "openrlhf"}


@pytest.mark.parametrize(("checkpoint", "why"), [
    ("{resume: auto}", "checkpoint.resume auto: OpenRLHF loads from --ckpt.path/_actor, and checkpoint.dir"),
    ("{dir: ck, resume: other/global_step4}", "checkpoint.resume other/global_step4: OpenRLHF loads only the "
                                              "tag `latest` names in --ckpt.path/_actor (ck/_actor"),
])
def test_a_resume_openrlhf_cannot_be_pointed_at_is_one_positioned_line(checkpoint: str, why: str,
                                                                       tmp_path: Path, cli: Any) -> None:
    path = tmp_path / "recipe.yaml"
    path.write_text(RECIPE.format(world=8, nodes=1, gpus=8, stage=3, micro=4, global_=128, n=8, prompts=16)
                    + f"checkpoint: {checkpoint}\n")
    result = cli("compile", path, "--target", "openrlhf", "-o", tmp_path / "out")
    assert result.code == 2
    [line] = [line for line in result.err.splitlines() if "error" in line]
    assert line.startswith(f"{path}:12:") and "DR208" in line and why in line, line
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("resume", ["auto", "ck/_actor", "ck/_actor/global_step4", "ck", "none"])
def test_a_resume_openrlhf_can_take_is_its_load_switch(resume: str, tmp_path: Path) -> None:
    path = tmp_path / "recipe.yaml"
    path.write_text(RECIPE.format(world=8, nodes=1, gpus=8, stage=3, micro=4, global_=128, n=8, prompts=16)
                    + f"checkpoint: {{dir: ck, resume: {resume}}}\n")
    text = TARGETS["openrlhf"](api.load_plan(path), EmitOptions()).files["openrlhf_train.sh"]
    assert ("--ckpt.load_enable" in text) is (resume != "none")


@pytest.mark.parametrize(("optimizer", "schedule", "expected"), [
    ("{name: adamw, lr: 1.0e-6, betas: [0.8, 0.99], eps: 1.0e-6, weight_decay: 0.1}", None,
     {"actor.adam.betas": [0.8, 0.99], "actor.adam.eps": 1e-6, "actor.adam.weight_decay": 0.1}),
    ("{name: adamw, lr: 1.0e-6}", "{decay: cosine, warmup_ratio: 0.1, min_lr_ratio: 0.05}",
     {"actor.lr_scheduler": "cosine_with_min_lr", "actor.lr_warmup_ratio": 0.1, "actor.min_lr_ratio": 0.05}),
    ("{name: adamw, lr: 1.0e-6}", "{decay: constant, warmup_ratio: 0.2}",
     {"actor.lr_scheduler": "constant_with_warmup", "actor.lr_warmup_ratio": 0.2, "actor.min_lr_ratio": 0.1}),
    ("{name: adamw, lr: 1.0e-6}", "{decay: linear}",
     {"actor.lr_scheduler": "linear", "actor.lr_warmup_ratio": 0.03}),
], ids=["adam", "cosine", "constant", "linear"])
def test_the_optimizer_and_schedule_are_the_actor_s_options(optimizer: str, schedule: str | None,
                                                            expected: dict[str, object], tmp_path: Path) -> None:
    """AdamW's betas, eps and weight decay, and the schedule's decay, warmup ratio and floor,
    are the actor's options, as OpenRLHF's parser reads them (left out: its defaults); the
    scheduler name is one transformers' `get_scheduler` takes, as OpenRLHF calls it, and
    import reads them all back."""
    from transformers import SchedulerType

    from distrecipe.translator.importers import World
    from distrecipe.translator.importers.registry import import_document, read_native

    path = tmp_path / "recipe.yaml"
    path.write_text(RECIPE.format(world=8, nodes=1, gpus=8, stage=3, micro=4, global_=128, n=8, prompts=16)
                    .replace("optimizer: {name: adamw, lr: 1.0e-6}", f"optimizer: {optimizer}")
                    + (f"schedule: {schedule}\n" if schedule else ""))
    _, args = judged(path)
    assert {key: args[key] for key in expected} == expected
    SchedulerType(args["actor.lr_scheduler"])  # a name get_scheduler takes
    kind, doc = read_native(tmp_path / "openrlhf_train.sh")
    back = import_document(kind, doc, World.of(8)).recipe
    stated = yaml.safe_load(path.read_text())
    assert back["optimizer"] == stated["optimizer"]
    said = stated.get("schedule", {})
    assert back.get("schedule") == (None if schedule is None else {
        "warmup_ratio": 0.03, **({"min_lr_ratio": 0.1} if said["decay"] == "cosine" else {}), **said})


def test_a_floor_the_decay_has_not_is_named(tmp_path: Path) -> None:
    path = tmp_path / "recipe.yaml"
    path.write_text(RECIPE.format(world=8, nodes=1, gpus=8, stage=3, micro=4, global_=128, n=8, prompts=16)
                    + "schedule: {decay: linear, min_lr_ratio: 0.1}\n")
    found = [f.message for f in TARGETS["openrlhf"](api.load_plan(path), EmitOptions()).findings if f.code == "DR225"]
    assert found == ["openrlhf: the learning-rate schedule is approximated: this engine's schedulers cannot "
                     + found[0].split("cannot ", 1)[1]] and "--actor.min_lr_ratio is cosine_with_min_lr's floor; "\
        "linear has none" in found[0]


def test_a_save_dir_with_a_space_is_one_word_of_the_script(tmp_path: Path) -> None:
    """The recipe's words are shell-quoted (the models' placeholders are not): the parser gets
    the dir whole, and import reads it back."""
    from distrecipe.translator.importers import World
    from distrecipe.translator.importers.registry import import_document, read_native

    path = tmp_path / "recipe.yaml"
    path.write_text(RECIPE.format(world=8, nodes=1, gpus=8, stage=3, micro=4, global_=128, n=8, prompts=16)
                    + "checkpoint: {dir: 'my runs/ck $HOME', every: 10}\n")
    text = TARGETS["openrlhf"](api.load_plan(path), EmitOptions()).files["openrlhf_train.sh"]
    assert "    --ckpt.path 'my runs/ck $HOME' \\\n" in text and "    --actor.model_name_or_path $ACTOR \\\n" in text
    (tmp_path / "openrlhf_train.sh").write_text(text)
    words = shlex.split(text.replace("\\\n", " "), comments=True)
    assert vars(openrlhf_judge.parser(words[2]).parse_args(words[3:]))["ckpt.path"] == "my runs/ck $HOME"
    kind, doc = read_native(tmp_path / "openrlhf_train.sh")
    assert import_document(kind, doc, World.of(8)).recipe["checkpoint"] == {"dir": "my runs/ck $HOME", "every": 10}
