"""DR301 and DR302: statements of a world that contradict each other, one line per case."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from distrecipe.lint.config import LintConfig
from distrecipe.lint.engine import lint

ACCELERATE = "distributed_type: MULTI_GPU\nnum_machines: 1\nnum_processes: 8\n"
RECIPE = ("recipe: 1\nname: r\nmodel: {params: 1.0e9, hidden_size: 2048, layers: 16, heads: 16}\n"
          "cluster: {nodes: 2, gpus_per_node: 8}\nstrategy: zero\nstage: 2\n"
          "batch: {micro: 2, accumulation: 2, global: 64}\nprecision: bf16\n")
VERL = "python3 -m verl.trainer.main_ppo \\\n  trainer.nnodes=1 \\\n  trainer.n_gpus_per_node=8\n"
DS = '{"train_batch_size": 64, "train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 2}\n'


def check(files: dict[str, str], code: str, *, world: int | None = None,
          problem: tuple[int, int] | None = None) -> None:
    """Lint the first of `files` (the others beside it): `code` is reported at `problem`
    (line, column) on it, or not at all when `problem` is None."""
    with tempfile.TemporaryDirectory() as tmp:
        for name, text in files.items():
            (Path(tmp) / name).write_text(text, encoding="utf-8")
        report = lint([Path(tmp) / next(iter(files))], config=LintConfig(), world=world)
        assert not report.unusable, report.unusable
        found = [(f.where.line, f.where.col) for f in report.findings if f.code == code and f.where]
        assert found == ([problem] if problem else []), report.findings


def test_world_option_against_the_files_own() -> None:
    check({"acc.yaml": ACCELERATE}, "DR301", world=16, problem=(3, 16))
    check({"acc.yaml": ACCELERATE}, "DR301", world=8)
    check({"acc.yaml": ACCELERATE}, "DR301")
    check({"recipe.yaml": RECIPE}, "DR301", world=8, problem=(4, 36))
    check({"recipe.yaml": RECIPE.replace("gpus_per_node: 8", "gpus_per_node: auto")}, "DR301", world=8)
    check({"run.sh": VERL}, "DR301", world=16, problem=(3, 27))
    check({"run.sh": "deepspeed --num_gpus 4 train.py --per_device_train_batch_size 2\n"}, "DR301", world=8,
          problem=(1, 1))


def test_project_world_is_a_fallback_not_a_contradiction(tmp_path: Path) -> None:
    (tmp_path / "acc.yaml").write_text(ACCELERATE)
    report = lint([tmp_path / "acc.yaml"], config=LintConfig(world=32))
    assert [f.code for f in report.findings] == []


def test_a_launch_option_against_the_accelerate_file() -> None:
    script = "accelerate launch --config_file acc.yaml --num_processes 16 train.py\n"
    check({"acc.yaml": ACCELERATE, "run.sh": script}, "DR302", problem=(3, 16))
    check({"acc.yaml": ACCELERATE, "run.sh": script.replace("16", "8")}, "DR302")
    check({"acc.yaml": ACCELERATE, "run.sh": "accelerate launch --config_file acc.yaml train.py\n"}, "DR302")


def test_a_launch_script_against_the_accelerate_config_naming_the_ds_config() -> None:
    sibling = ACCELERATE.replace("MULTI_GPU", "DEEPSPEED") + "deepspeed_config:\n  deepspeed_config_file: ds.json\n"
    script = "deepspeed --num_gpus 4 train.py --deepspeed_config ds.json\n"
    check({"ds.json": DS, "acc.yaml": sibling, "run.sh": script}, "DR302", problem=(1, 1))
    check({"ds.json": DS, "acc.yaml": sibling, "run.sh": script.replace("4", "8")}, "DR302")
    check({"ds.json": DS, "acc.yaml": ACCELERATE, "run.sh": script}, "DR302")  # names no ds_config


ZERO2 = ("compute_environment: LOCAL_MACHINE\ndistributed_type: DEEPSPEED\ndeepspeed_config:\n"
         "  deepspeed_config_file: ds_config.json\n  zero3_init_flag: false\nnum_machines: 2\nnum_processes: 16\n")
DDP = "compute_environment: LOCAL_MACHINE\ndistributed_type: MULTI_GPU\nmixed_precision: bf16\nnum_machines: 1\n" \
      "num_processes: 8\n"
DS16 = ('{"train_batch_size": 64, "train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 1,\n'
        ' "zero_optimization": {"stage": 2}}\n')


def worlds(files: dict[str, str], *, named: str | None = None) -> list[tuple[str, str, str]]:
    """Lint a directory of `files` (or only `named` in it): (file, code, the message's world)
    of the batch findings and DR300."""
    with tempfile.TemporaryDirectory() as tmp:
        for name, text in files.items():
            (Path(tmp) / name).write_text(text, encoding="utf-8")
        report = lint([Path(tmp) / named if named else Path(tmp)], config=LintConfig())
        return sorted((Path(f.where.file).name, f.code, f.message) for f in report.findings
                      if f.where and f.code in ("DR101", "DR300", "DR360"))


def test_an_unrelated_accelerate_config_beside_a_ds_config_gives_it_no_world() -> None:
    """A DDP Accelerate config names no ds_config: it runs another job, and its
    num_processes is no world for the ds_config beside it (it was: DR101 at world 8)."""
    assert [(name, code) for name, code, _ in worlds({"ds_config.json": DS16, "ddp.yaml": DDP},
                                                     named="ds_config.json")] == [("ds_config.json", "DR300")]


def test_a_ds_config_is_judged_at_the_world_of_the_file_naming_it_once_per_run() -> None:
    """The Accelerate config naming the ds_config runs it on 16 ranks, where DeepSpeed
    accepts its batch numbers; the DDP config beside it (8) and the TrainingArguments file
    naming the same ds_config judge it at no other world (DR360 used the TrainingArguments
    file's world, from the DDP config: 8, while the ds_config itself was judged at 16)."""
    from distrecipe.judges import deepspeed as judge

    files = {"ds_config.json": DS16, "accelerate_ddp.yaml": DDP, "zero2.yaml": ZERO2,
             "training_args.json": '{"output_dir": "out", "per_device_train_batch_size": 4,\n'
                                   ' "gradient_accumulation_steps": 1, "deepspeed": "ds_config.json"}\n'}
    assert judge.accepts(json.loads(DS16), 16) and not judge.accepts(json.loads(DS16), 8)
    assert worlds(files) == []
    assert worlds(files) == worlds(files)  # deterministic: every run the same
    bad = {name: text.replace('"gradient_accumulation_steps": 1', '"gradient_accumulation_steps": 2')
           for name, text in files.items()}
    assert not judge.accepts(json.loads(bad["ds_config.json"]), 16)
    found = worlds(bad)
    assert [(name, code) for name, code, _ in found] == [("ds_config.json", "DR101"),
                                                         ("training_args.json", "DR360")]
    assert "world 16 from num_processes in zero2.yaml" in found[0][2] and "world 16 × micro" in found[1][2]
