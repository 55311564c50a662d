"""`"auto"` in context: who reads a ds_config (declared, or inferred from the files and
launch scripts that name it) decides whether an `"auto"` is a template value (DR315)
or a bug (DR310); launch scripts also give the world and TrainingArguments."""

from __future__ import annotations

import csv
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from distrecipe.engines.argv import launches
from distrecipe.engines.shell import commands
from distrecipe.lint.config import LintConfig, load_config
from distrecipe.lint.engine import lint
from distrecipe.lint.rules import RULES
from tests.conftest import Result

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = ROOT / "tests" / "corpus" / "real" / "scripts"
TEMPLATE = '{"train_micro_batch_size_per_gpu": "auto", "optimizer": {"type": "AdamW", "params": {"eps": "auto"}},\n' \
           ' "bfloat16": {"enabled": "auto"}, "zero_optimization": {"stage": 2}}\n'


def codes(paths: list[Path], **kwargs: object) -> list[tuple[str, int, str]]:
    report = lint(paths, **kwargs)  # type: ignore[arg-type]
    assert not report.unusable, report.unusable
    return sorted((Path(f.where.file).name, f.where.line, f.code) for f in report.findings
                  if f.where and f.code in ("DR310", "DR315", "DR360", "DR101"))


@pytest.mark.parametrize(("consumer", "want"), [
    # Unknown: an "auto" only the Trainer fills marks a Trainer template (info, like hf).
    (None, [("ds.json", 1, "DR315"), ("ds.json", 1, "DR315"), ("ds.json", 2, "DR310")]),
    ("hf", [("ds.json", 1, "DR315"), ("ds.json", 1, "DR315"), ("ds.json", 2, "DR310")]),
    ("accelerate", [("ds.json", 1, "DR310"), ("ds.json", 1, "DR315"), ("ds.json", 2, "DR310")]),
    ("raw", [("ds.json", 1, "DR310"), ("ds.json", 1, "DR310"), ("ds.json", 2, "DR310")]),
])
def test_the_consumer_decides(tmp_path: Path, consumer: str | None, want: list[tuple[str, int, str]]) -> None:
    (tmp_path / "ds.json").write_text(TEMPLATE)
    assert codes([tmp_path], config=LintConfig(), world=8, consumer=consumer) == want


def test_pyproject_declares_the_consumer_per_glob(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.distrecipe]\nds_config = { "raw/*" = "raw", "*" = "hf" }\n')
    for name in ("raw", "hf"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "ds.json").write_text(TEMPLATE)
    config = load_config(tmp_path / "pyproject.toml", frozenset(RULES), frozenset({"text"}))
    report = lint([tmp_path], config=config, world=8)
    by_dir = {(Path(f.where.file).parent.name, f.code) for f in report.findings if f.where}
    assert ("raw", "DR315") not in by_dir and ("hf", "DR315") in by_dir and ("raw", "DR310") in by_dir


def test_a_launch_script_names_the_consumer_and_the_world(tmp_path: Path) -> None:
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "ds.json").write_text(
        '{"train_batch_size": 64, "train_micro_batch_size_per_gpu": 4,\n "gradient_accumulation_steps": 4,\n'
        ' "zero_optimization": {"stage": "auto"}}\n')
    (tmp_path / "run.sh").write_text("N=8\ndeepspeed --num_gpus=$N --num_nodes 1 train.py \\\n"
                                     "  --deepspeed_config conf/ds.json\n")
    found = lint([tmp_path], config=LintConfig())
    messages = {(f.code, f.message) for f in found.findings}
    assert any(c == "DR101" and "--num_nodes 1 × --num_gpus 8 in run.sh:2" in m for c, m in messages), messages
    assert any(c == "DR310" and "used raw (--deepspeed_config in run.sh:2)" in m for c, m in messages), messages


def test_trainer_flags_in_a_script_are_checked_against_the_ds_config(tmp_path: Path) -> None:
    (tmp_path / "ds.json").write_text('{"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": "auto",'
                                      ' "zero_optimization": {"stage": 2}}\n')
    (tmp_path / "run.sh").write_text("torchrun --nproc_per_node 8 train.py --deepspeed ds.json \\\n"
                                     "    --per_device_train_batch_size 4 --gradient_accumulation_steps $GA\n")
    report = lint([tmp_path], config=LintConfig())
    [mismatch] = [f for f in report.findings if f.code == "DR360"]
    assert mismatch.where is not None and (Path(mismatch.where.file).name, mismatch.where.line) == ("run.sh", 2)


def test_unknown_variables_stay_unknown() -> None:
    text = "A=4\nB=$UNSET\necho x; deepspeed --num_gpus $B t.py --x $A --y ${A} --z '$A' --w $(nproc) --v $1\n"
    [launch] = launches(text, "s.sh")
    assert launch.world() == (None, "")
    assert {k: v[1].value if v[1] else None for k, v in launch.flags.items()} == {
        "x": "4", "y": "4", "z": "$A", "w": None, "v": None}
    assert [w.value for w in commands("cat <<EOF\ndeepspeed x\nEOF\nls\n", "s")[1]] == ["ls"]


def test_compile_hf_auto_output_lints_clean(tmp_path: Path, cli: Callable[..., Result]) -> None:
    recipe = ROOT / "recipes" / "seed-8b-32gpu-zero3.yaml"
    for target in ("hf", "all"):
        assert cli("compile", recipe, "-t", target, "--hf-auto", "-o", tmp_path / target).code == 0
        assert cli("lint", tmp_path / target).code == 0
    assert cli("compile", recipe, "-t", "deepspeed", "--hf-auto", "-o", tmp_path / "ds").code == 0
    assert cli("lint", tmp_path / "ds", "--ds-config-consumer", "hf").code == 0


def test_corpus_script_pairs_in_their_repository_layout(tmp_path: Path) -> None:
    """The scripts and the configs they name, put back where their repositories keep them
    (the repositories of the first corpus; issue 20's set B is held to the engines in
    tests/test_corpus_verdicts.py)."""
    with (SCRIPTS / "PROVENANCE.csv").open() as table:
        for row in csv.DictReader(table):
            if "issue 20 set B" in row["notes"]:
                continue
            target = tmp_path / row["repo"] / row["path"]
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(SCRIPTS / row["file"], target)
    errors, removed, regrouped = {}, {}, {}
    for repo in sorted(p for p in tmp_path.glob("*/*") if p.is_dir()):
        report = lint([repo], config=LintConfig())
        found = [f for f in report.findings if f.severity == "error"]
        # Written for transformers 4: flags transformers 5 removed (DR363), each at its line.
        removed[repo.name] = sorted(f.message.split()[0] for f in found if f.code == "DR363")
        # Written for OpenRLHF before 0.10.2 grouped its options: 0.11.2's parser refuses each (DR410).
        regrouped[repo.name] = [f.message.split()[0] for f in found if f.code == "DR410"]
        errors[repo.name] = [str(f) for f in found if f.code not in ("DR363", "DR410")]
        if repo.name in ("LLaVA", "LLaMA-Factory"):  # --deepspeed names the file: the Trainer fills it
            assert {f.code for f in report.findings} >= {"DR315"}
        pinned = lint([repo], config=LintConfig(transformers="4.37"))  # LLaVA pins 4.37.2
        assert not [f for f in pinned.findings if f.severity == "error" and f.code != "DR410"]
    assert errors == {name: [] for name in errors}
    assert removed == {"FastChat": [*["--evaluation_strategy"] * 2, "--fsdp_transformer_layer_cls_to_wrap"],
                       "LLaMA-Factory": [
        "--evaluation_strategy", "--overwrite_output_dir"], "LLaVA": ["--evaluation_strategy"] * 2,
        "OpenRLHF": [], "open-r1": [], "peft": [], "DeepSpeedExamples": []}
    assert {name: options for name, options in regrouped.items() if options} == {"OpenRLHF": [
        "--max_len", "--dataset", "--input_key", "--output_key", "--train_batch_size", "--micro_train_batch_size",
        "--max_samples", "--pretrain", "--save_path", "--save_steps", "--logging_steps", "--eval_steps",
        "--zero_stage", "--max_epochs", "--bf16", "--flash_attn", "--learning_rate", "--load_checkpoint",
        "--gradient_checkpointing"]}


@pytest.mark.slow  # imports deepspeed, accelerate and torch
def test_bare_flags_are_the_launchers_own() -> None:
    """Each launcher's options that take no value, read again from its argparse parser."""
    import argparse
    from unittest import mock

    from distrecipe.engines.argv import BARE_FLAGS

    runner = pytest.importorskip("deepspeed.launcher.runner")
    accelerate_launch = pytest.importorskip("accelerate.commands.launch")
    torchrun = pytest.importorskip("torch.distributed.run")

    def bare(parser: argparse.ArgumentParser) -> frozenset[str]:
        return frozenset(s for a in parser._actions if a.nargs == 0 for s in a.option_strings)

    parsers: list[argparse.ArgumentParser] = []
    with mock.patch.object(argparse.ArgumentParser, "parse_args",
                           lambda self, *a, **k: parsers.append(self)):
        runner.parse_args([])  # only records the parser it builds
    assert bare(parsers[0]) == BARE_FLAGS["deepspeed"]
    assert bare(accelerate_launch.launch_command_parser()) == BARE_FLAGS["accelerate"]
    assert bare(torchrun.get_args_parser()) == BARE_FLAGS["torchrun"]
