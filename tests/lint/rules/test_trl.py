"""TRL's rules against TrlParser: lint finds a refusal (DR400-DR403) exactly where `trl
NAME --config FILE` of the installed TRL stops, at the same world."""

from __future__ import annotations

from pathlib import Path

import pytest

from distrecipe.engines.trl import command_of
from distrecipe.lint.config import LintConfig
from distrecipe.lint.engine import lint
from distrecipe.source import parse_text
from tests import trl_judge

pytest.importorskip("trl")
CORPUS = Path(__file__).resolve().parents[2] / "lint_corpus"
TRL_CODES = {"DR400", "DR401", "DR402", "DR403"}

ISSUE = """model_name_or_path: Qwen/Qwen2.5-0.5B
dataset_name: trl-lib/Capybara
packing: true
per_device_train_batch_size: 2
max_seq_length: 1024
evaluation_strategy: steps
output_dir: out
"""

FILES = {
    "issue-sft": (ISSUE, 1),
    "good-sft": (ISSUE.replace("max_seq_length", "max_length").replace("evaluation_strategy", "eval_strategy"), 1),
    "dpo": ("model_name_or_path: m\nbeta: 0.1\nmax_length: 512\nloss_type: sigmoid\noutput_dir: o\n", 1),
    "dpo-typo": ("model_name_or_path: m\nbeta: 0.1\nmax_lenght: 512\noutput_dir: o\n", 1),
    "grpo-seven": ("model_name_or_path: m\nper_device_train_batch_size: 1\nnum_generations: 8\nuse_vllm: true\n", 7),
    "grpo-eight": ("model_name_or_path: m\nper_device_train_batch_size: 1\nnum_generations: 8\nuse_vllm: true\n", 8),
    "grpo-steps": ("model_name_or_path: m\nper_device_train_batch_size: 3\nsteps_per_generation: 4\n"
                   "num_generations: 6\nuse_vllm: true\n", 2),
    "grpo-bool": ("model_name_or_path: m\nuse_vllm: maybe\nnum_generations: 8\nper_device_train_batch_size: 8\n", 1),
    "grpo-env": ("env:\n  WANDB_PROJECT: x\nmodel_name_or_path: m\nnum_generations: 4\n"
                 "per_device_train_batch_size: 4\nbeta: 0.04\n", 2),
}
CASES = [(name, text, world) for name, (text, world) in FILES.items()] + [
    (f"{case.parent.name}/{case.name}", (next(p for p in sorted(case.iterdir()) if p.suffix == ".yaml")).read_text(),
     int(next((line.split(":")[1] for line in (case / "expect").read_text().splitlines()
               if line.startswith("# world:")), "1")))
    for code in sorted(TRL_CODES) for case in sorted((CORPUS / code).iterdir())]


@pytest.mark.parametrize(("name", "text", "world"), CASES, ids=[c[0] for c in CASES])
def test_lint_refuses_exactly_what_trl_refuses(name: str, text: str, world: int, tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(text)
    report = lint([path], config=LintConfig(), world=world)
    assert not report.unusable and {f.where.file for f in report.findings if f.where} <= {str(path)}
    found = [f for f in report.findings if f.code in TRL_CODES]
    data = parse_text(text, str(path)).data
    command = command_of(data).name
    refused = trl_judge.refusal(command, path, world)
    assert bool(found) == (refused is not None), (command, refused, [f.message for f in report.findings])


def test_the_issue_s_file_names_both_keys_with_their_releases(tmp_path: Path) -> None:
    path = tmp_path / "sft.yaml"
    path.write_text(ISSUE)
    report = lint([path], config=LintConfig())
    assert [(f.where.line if f.where else 0, f.code, f.severity) for f in report.findings] == [
        (5, "DR400", "error"), (6, "DR400", "error")]
    first, second = (f.message for f in report.findings)
    assert "removed in TRL 0.20.0 (last in 0.19.1)" in first and first.endswith("use max_length")
    assert "removed in transformers 4.51.0" in second and second.endswith("use eval_strategy")


def test_an_older_release_accepts_its_own_key(tmp_path: Path) -> None:
    path = tmp_path / "sft.yaml"
    path.write_text(ISSUE.replace("evaluation_strategy: steps\n", ""))
    older = lint([path], config=LintConfig(engines=(("trl", "0.19.1", "--engine-version"),)))
    assert [f.code for f in older.findings] == []
    assert [f.code for f in lint([path], config=LintConfig()).findings] == ["DR400"]


def test_grpo_message_names_every_factor_and_the_nearest_choices(tmp_path: Path) -> None:
    path = tmp_path / "grpo.yaml"
    path.write_text(FILES["grpo-seven"][0])
    [finding] = lint([path], config=LintConfig(), world=7).findings
    assert (finding.code, finding.where.line if finding.where else 0) == ("DR402", 3)
    assert ("per_device_train_batch_size 1 × 7 processes × gradient_accumulation_steps 1 = 7" in finding.message
            and "num_generations (8)" in finding.message and "num_generations 7" in finding.message
            and "per_device_train_batch_size 8" in finding.message)


COMMANDS = {
    "zero2-default-world": ("trl grpo --config grpo.yaml --accelerate_config zero2 --num_generations 16 "
                            "--per_device_train_batch_size 1\n"),
    "zero2-seven": "trl grpo --config grpo.yaml --accelerate_config zero2 --num_processes 7\n",
    "zero2-eight": "trl grpo --config grpo.yaml --accelerate_config zero2 --num_processes 8\n",
    "single-gpu": "trl grpo --config grpo.yaml --accelerate_config single_gpu --num_generations 7\n",
    "single-gpu-one-process": "trl grpo --config grpo.yaml --accelerate_config single_gpu --num_generations 16\n",
    "typo": "trl sft --model_name_or_path m --dataset_name d --max_lenght 512\n",
    "removed": "trl sft --model_name_or_path m --dataset_name d --max_seq_length 512\n",
    "sft-ok": "trl sft --model_name_or_path m --dataset_name d --max_length 512 --num_processes 4 --packing\n",
    "bad-int": "trl grpo --config grpo.yaml --num_generations eight\n",
}
GRPO_YAML = "model_name_or_path: m\ndataset_name: d\nper_device_train_batch_size: 8\nnum_generations: 8\n"


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_a_trl_command_line_is_refused_exactly_where_trl_refuses_it(name: str, tmp_path: Path) -> None:
    import shlex

    (tmp_path / "grpo.yaml").write_text(GRPO_YAML)
    script = tmp_path / "run.sh"
    script.write_text(COMMANDS[name])
    report = lint([script], config=LintConfig())
    assert not report.unusable
    errors = [f for f in report.findings if f.severity == "error" and f.where and f.where.file == str(script)]
    words = shlex.split(COMMANDS[name])
    refused = trl_judge.command_refusal(words[1], words[2:], tmp_path)
    assert bool(errors) == (refused is not None), (refused, [f.message for f in report.findings])


def test_a_shipped_accelerate_config_s_world_is_named(tmp_path: Path) -> None:
    (tmp_path / "grpo.yaml").write_text(GRPO_YAML)
    script = tmp_path / "run.sh"
    script.write_text(COMMANDS["zero2-default-world"])
    [finding] = lint([script], config=LintConfig()).findings
    assert (finding.code, finding.where.line if finding.where else 0) == ("DR402", 1)
    assert "world 8 from --accelerate_config zero2: TRL's shipped config says num_processes: 8" in finding.message


OPEN_R1 = ("model_name_or_path: Qwen/Qwen2.5-1.5B-Instruct\nuse_vllm: true\nvllm_mode: server\n"
           "per_device_train_batch_size: 1\nnum_generations: 8\noutput_dir: out\n")


@pytest.mark.parametrize("processes", [7, 8])
def test_a_launch_script_s_world_reaches_the_config_it_passes(processes: int, tmp_path: Path) -> None:
    """open-r1's layout: vLLM serves on one GPU, `accelerate launch --num_processes 7` trains."""
    (tmp_path / "recipes").mkdir()
    (tmp_path / "scripts").mkdir()
    config = tmp_path / "recipes" / "config_demo.yaml"
    config.write_text(OPEN_R1)
    (tmp_path / "scripts" / "train.sh").write_text(
        f"accelerate launch --num_processes {processes} \\\n    src/open_r1/grpo.py --config recipes/config_demo.yaml\n")
    report = lint([tmp_path], config=LintConfig())
    found = [(f.code, f.where.line if f.where else 0) for f in report.findings if f.where and f.where.file == str(config)]
    refused = trl_judge.refusal("grpo", config, processes)
    assert bool(found) == (refused is not None) == (processes == 7), (found, refused)
    if found:
        assert found == [("DR402", 5)]
        [finding] = report.findings
        assert f"world {processes} from --num_processes {processes} in train.sh:1" in finding.message
