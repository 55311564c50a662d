"""Verdicts that depend on who reads the file: the program an Accelerate config launches.

An Accelerate config that names a ds_config says who launches the job, not which
program runs in it: the HF Trainer (which writes `"auto"` in its templates and fills
them from TrainingArguments) or a plain Accelerate loop (which fills fewer). Where a
launch script shows the program, lint follows it; where none does, an `"auto"` only the
Trainer fills is a conditional warning naming both (DR319), never an error. The engines
judge each side: the Trainer's fill, and Accelerate's own `_prepare_deepspeed`.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import pytest

from distrecipe.lint.config import LintConfig
from distrecipe.lint.engine import lint

CORPUS = Path(__file__).resolve().parents[2] / "corpus" / "real" / "deepspeed"
ZERO2 = (CORPUS / "huggingface__transformers__tests__deepspeed__ds_config_zero2.json").read_text()
"""transformers' own ZeRO-2 template: optimizer betas and eps `"auto"`, which only the Trainer fills."""
ACCELERATE = """\
compute_environment: LOCAL_MACHINE
deepspeed_config:
  deepspeed_config_file: ds_config_zero2.json
  zero3_init_flag: false
distributed_type: DEEPSPEED
machine_rank: 0
main_training_function: main
num_machines: 1
num_processes: 8
use_cpu: false
"""
TRAINER_RUN = """\
#!/bin/bash
accelerate launch --config_file accelerate_ds.yaml run_clm.py \\
    --model_name_or_path gpt2 \\
    --per_device_train_batch_size 4 \\
    --gradient_accumulation_steps 2 \\
    --output_dir out
"""
LOOP_RUN = "accelerate launch --config_file accelerate_ds.yaml train.py --lr 1e-4 --epochs 3\n"


def found(tmp_path: Path, files: dict[str, str], **options: object) -> list[tuple[str, str, str, str]]:
    for name, text in files.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    report = lint([tmp_path], config=LintConfig(), **options)  # type: ignore[arg-type]
    assert not report.unusable, report.unusable
    return [(f.code, f.severity, f.message.split(":")[0], f.message) for f in report.findings
            if f.code in ("DR310", "DR315", "DR319") and f.where and f.where.file.endswith(".json")]


def betas_and_eps(findings: list[tuple[str, str, str, str]]) -> list[tuple[str, str, str]]:
    """(code, severity, message) of the findings at the optimizer's betas and eps."""
    return [(code, severity, message) for code, severity, _, message in findings
            if message.startswith(('"auto" at optimizer.params.betas', '"auto" at optimizer.params.eps'))]


def test_an_accelerate_config_alone_makes_a_trainer_only_auto_conditional(tmp_path: Path) -> None:
    files = {"ds_config_zero2.json": ZERO2, "accelerate_ds.yaml": ACCELERATE}
    got = found(tmp_path, files)
    assert [(code, severity) for code, severity, _ in betas_and_eps(got)] == [("DR319", "warning")] * 2
    message = betas_and_eps(got)[0][2]
    assert "under the HF Trainer it is filled from TrainingArguments [adam_beta1, adam_beta2]" in message
    assert 'under a plain Accelerate loop nothing fills it: Accelerate raises "not found in kwargs"' in message
    assert "accelerate_ds.yaml" in message
    # a loop that passes no Trainer flag says nothing either way
    assert betas_and_eps(found(tmp_path, {**files, "run.sh": LOOP_RUN})) == betas_and_eps(got)


def test_a_launch_script_running_a_trainer_program_fills_them(tmp_path: Path) -> None:
    got = found(tmp_path, {"ds_config_zero2.json": ZERO2, "accelerate_ds.yaml": ACCELERATE, "run.sh": TRAINER_RUN})
    assert betas_and_eps(got) == [
        ("DR315", "info", '"auto" at optimizer.params.betas is filled by the HF Trainer from TrainingArguments '
         "[adam_beta1, adam_beta2] (used by accelerate_ds.yaml, run by an HF Trainer program in run.sh:2)"),
        ("DR315", "info", '"auto" at optimizer.params.eps is filled by the HF Trainer from TrainingArguments '
         "adam_epsilon (used by accelerate_ds.yaml, run by an HF Trainer program in run.sh:2)")]
    assert not [f for f in got if f[0] != "DR315"]


def test_a_declared_plain_accelerate_reader_is_still_an_error(tmp_path: Path) -> None:
    got = found(tmp_path, {"ds_config_zero2.json": ZERO2, "accelerate_ds.yaml": ACCELERATE},
                consumer="accelerate")
    assert [(code, severity) for code, severity, _ in betas_and_eps(got)] == [("DR310", "error")] * 2


@pytest.mark.slow  # imports transformers, accelerate, deepspeed and torch
def test_the_engines_fill_it_under_the_trainer_and_refuse_it_in_a_plain_loop(tmp_path: Path) -> None:
    from distrecipe.judges import accelerate as accelerate_judge
    from distrecipe.judges import deepspeed as deepspeed_judge

    (tmp_path / "ds_config_zero2.json").write_text(ZERO2)
    (tmp_path / "accelerate_ds.yaml").write_text(ACCELERATE)
    with contextlib.chdir(tmp_path):
        args, env = accelerate_judge.launch_env(Path("accelerate_ds.yaml"))
        plugin = accelerate_judge.worker_plugin(args, env)
        with pytest.raises(ValueError, match=r"`optimizer.params.betas` not found in kwargs"):
            accelerate_judge.prepared_config(args, env, plugin)
    trainer = {"per_device_train_batch_size": 4, "gradient_accumulation_steps": 2}
    filled = deepspeed_judge.hf_fill(json.loads(ZERO2), trainer, 8, env)
    assert filled["optimizer"]["params"]["betas"] == [0.9, 0.999] and filled["optimizer"]["params"]["eps"] == 1e-8


RUN_CLM_ARGS = """\
# run_clm.py's arguments, read by HfArgumentParser((ModelArguments, DataTrainingArguments, TrainingArguments))
model_name_or_path: openai-community/gpt2
dataset_name: wikitext
dataset_config_name: wikitext-2-raw-v1
block_size: 1024
per_device_train_batch_size: 8
per_device_eval_batch_size: 8
gradient_accumulation_steps: 4
learning_rate: 5.0e-5
num_train_epochs: 3
do_train: true
do_eval: true
evaluation_strategy: steps
eval_steps: 500
save_strategy: steps
save_steps: 500
output_dir: output/gpt2-wikitext
"""
"""Modelled on transformers' examples/pytorch/language-modeling: only TrainingArguments and
run_clm.py's own ModelArguments and DataTrainingArguments keys."""
HANDBOOK_SFT = RUN_CLM_ARGS.replace("dataset_name: wikitext\ndataset_config_name: wikitext-2-raw-v1\n",
                                    "dataset_mixer:\n  HuggingFaceH4/ultrachat_200k: 1.0\n"
                                    "dataset_splits:\n- train_sft\n- test_sft\n")
"""Modelled on alignment-handbook's recipes: `dataset_mixer` is its own DataArguments'."""


def removed(tmp_path: Path, files: dict[str, str]) -> list[tuple[str, str, int]]:
    for name, text in files.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    report = lint([tmp_path], config=LintConfig())
    assert not report.unusable, report.unusable
    return [(f.code, f.severity, f.where.line) for f in report.findings
            if f.code in ("DR362", "DR366") and f.where]


def test_a_removed_field_in_a_file_hfargumentparser_reads_is_an_error(tmp_path: Path) -> None:
    """Only TrainingArguments and run_clm.py's dataclass keys: the parser is known, and
    `parse_yaml_file` refuses the key no dataclass takes (the job does not start)."""
    assert removed(tmp_path, {"clm.yaml": RUN_CLM_ARGS}) == [("DR366", "error", 13)]


def test_a_file_passed_alone_to_the_program_is_read_by_hfargumentparser(tmp_path: Path) -> None:
    """alignment-handbook's own keys: alone, the script's own dataclass may take the name
    (a warning); a launch that passes the file as the program's sole argument
    (`if len(sys.argv) == 2 and sys.argv[1].endswith(".yaml")`) has HfArgumentParser read it."""
    assert removed(tmp_path, {"config_full.yaml": HANDBOOK_SFT}) == [("DR362", "warning", 16)]
    run = "ACCELERATE_LOG_LEVEL=info accelerate launch --num_processes 8 scripts/run_sft.py config_full.yaml\n"
    assert removed(tmp_path, {"config_full.yaml": HANDBOOK_SFT, "run.sh": run}) == [("DR366", "error", 16)]
    flags = run.replace("config_full.yaml\n", "config_full.yaml --learning_rate 1e-5\n")
    assert removed(tmp_path, {"config_full.yaml": HANDBOOK_SFT, "run.sh": flags}) == [("DR362", "warning", 16)]


@pytest.mark.slow  # imports transformers and torch
def test_hfargumentparser_refuses_the_file_and_a_scripts_own_field_takes_it(tmp_path: Path) -> None:
    import dataclasses

    from transformers import HfArgumentParser, TrainingArguments

    @dataclasses.dataclass
    class ModelArguments:
        model_name_or_path: str | None = None

    @dataclasses.dataclass
    class DataTrainingArguments:
        dataset_name: str | None = None
        dataset_config_name: str | None = None
        block_size: int | None = None

    @dataclasses.dataclass
    class OwnArguments(DataTrainingArguments):
        evaluation_strategy: str = "no"

    (tmp_path / "clm.yaml").write_text(RUN_CLM_ARGS)
    with contextlib.chdir(tmp_path), pytest.raises(ValueError, match=r"not used by the HfArgumentParser.*"
                                                                      r"evaluation_strategy"):
        HfArgumentParser((ModelArguments, DataTrainingArguments, TrainingArguments)).parse_yaml_file("clm.yaml")
    with contextlib.chdir(tmp_path):
        _, own, training = HfArgumentParser((ModelArguments, OwnArguments, TrainingArguments)).parse_yaml_file(
            "clm.yaml")
    assert own.evaluation_strategy == "steps" and training.eval_strategy == "no"  # taken, and never read


TRAINING_ARGS = """\
{
  "output_dir": "output/llama-sft",
  "per_device_train_batch_size": 4,
  "gradient_accumulation_steps": 4,
  "learning_rate": 2e-5,
  "lr_scheduler_type": "cosine",
  "warmup_ratio": 0.03,
  "num_train_epochs": 3,
  "bf16": true,
  "deepspeed": "ds_config_zero2.json"
}
"""


def schedulers(tmp_path: Path, files: dict[str, str]) -> list[tuple[str, int, str, str]]:
    for name, text in files.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    report = lint([tmp_path], config=LintConfig())
    assert not report.unusable, report.unusable
    return [(Path(f.where.file).name, f.where.line, f.severity, f.message) for f in report.findings
            if f.code == "DR367" and f.where]


def test_the_ds_configs_scheduler_wins_over_lr_scheduler_type(tmp_path: Path) -> None:
    [(name, line, severity, message)] = schedulers(tmp_path, {"ds_config_zero2.json": ZERO2,
                                                              "training_args.json": TRAINING_ARGS})
    assert (name, line, severity) == ("ds_config_zero2.json", 25, "warning")
    assert message == ("scheduler WarmupLR in ds_config_zero2.json wins over lr_scheduler_type cosine "
                       "(training_args.json:6): the HF Trainer hands DeepSpeed the ds_config's scheduler whenever "
                       "it has one, and never builds the cosine schedule; delete the scheduler section, or "
                       "lr_scheduler_type")
    without = json.loads(ZERO2)
    del without["scheduler"]
    assert schedulers(tmp_path, {"ds_config_zero2.json": json.dumps(without)}) == []
    unset = TRAINING_ARGS.replace('  "lr_scheduler_type": "cosine",\n', "")
    assert schedulers(tmp_path, {"ds_config_zero2.json": ZERO2, "training_args.json": unset}) == []


def test_the_flag_in_a_launch_script_too(tmp_path: Path) -> None:
    run = ("deepspeed --num_gpus 8 train.py --deepspeed ds_config_zero2.json \\\n"
           "    --per_device_train_batch_size 4 --lr_scheduler_type cosine --warmup_ratio 0.03\n")
    [(name, line, _, message)] = schedulers(tmp_path, {"ds_config_zero2.json": ZERO2, "run.sh": run})
    assert (name, line) == ("ds_config_zero2.json", 25) and "lr_scheduler_type cosine (run.sh:2)" in message


@pytest.mark.slow  # imports transformers, accelerate, deepspeed and torch
def test_the_trainer_builds_deepspeeds_scheduler_not_its_own() -> None:
    from types import SimpleNamespace
    from unittest import mock

    import torch
    from transformers.integrations.deepspeed import deepspeed_optim_sched

    from distrecipe.judges import hf as hf_judge

    values = {key: value for key, value in json.loads(TRAINING_ARGS).items() if key != "deepspeed"}
    model = torch.nn.Linear(2, 2)
    for config, ours in ((json.loads(ZERO2), False), ({**json.loads(ZERO2), "scheduler": None}, True)):
        if config["scheduler"] is None:
            del config["scheduler"]
        args = hf_judge.training_arguments(values, 8, deepspeed=config)
        trainer = SimpleNamespace(create_optimizer=mock.Mock(return_value=torch.optim.AdamW(model.parameters())),
                                  create_scheduler=mock.Mock())
        _, scheduler = deepspeed_optim_sched(trainer, args.hf_deepspeed_config, args, 1000, model.parameters())
        built_by_deepspeed = scheduler is not None and getattr(scheduler, "lr_scheduler_callable", None) is None
        assert built_by_deepspeed == (not ours)  # with a scheduler section, the cosine is never built
        assert args.lr_scheduler_type == "cosine"
