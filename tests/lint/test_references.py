"""The reference index: who names a file, resolved from where jobs are launched."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from distrecipe.lint.config import LintConfig
from distrecipe.lint.engine import lint
from distrecipe.lint.files import Files
from distrecipe.lint.references import References, mentions

DS = '{"train_micro_batch_size_per_gpu": 2, "zero_optimization": {"stage": 2}}\n'
ARGS = '{"output_dir": "o", "per_device_train_batch_size": 4, "deepspeed": "configs/ds.json"}\n'


def layout(root: Path, *, git: bool) -> None:
    """configs/ds.json named by scripts/train.sh and by args/train.json, from the root."""
    for directory in ("configs", "scripts", "args", "other"):
        (root / directory).mkdir(parents=True, exist_ok=True)
    (root / "configs" / "ds.json").write_text(DS)
    (root / "scripts" / "train.sh").write_text(
        "deepspeed --num_gpus 2 train.py --deepspeed configs/ds.json --per_device_train_batch_size 4\n")
    (root / "args" / "train.json").write_text(ARGS)
    (root / "other" / "ds.json").write_text(DS)  # the same name, another file: names nothing here
    (root / "other" / "run.sh").write_text("deepspeed train.py --deepspeed ds.json\n")
    if git:
        subprocess.run(["git", "init", "-q", str(root)], check=True)


@pytest.mark.parametrize("git", [True, False])
def test_who_names_a_file(tmp_path: Path, git: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    layout(tmp_path, git=git)
    monkeypatch.chdir(tmp_path)
    config = LintConfig() if git else LintConfig(root=tmp_path)  # the project: where pyproject.toml is
    refs = References(Files(), config)
    assert [p.as_posix() for p in refs.related([Path("configs/ds.json")])] == [
        "args/train.json", "scripts/train.sh"]
    assert [p.as_posix() for p in refs.related([Path("scripts/train.sh")])] == ["configs/ds.json"]
    assert [p.as_posix() for p in refs.related([Path("other/ds.json")])] == ["other/run.sh"]


def test_mentions_without_git_reads_configs_and_scripts_only(tmp_path: Path) -> None:
    (tmp_path / "README.md").write_text("see ds.json\n")
    (tmp_path / "a.yaml").write_text("deepspeed: ds.json\n")
    (tmp_path / ".venv").mkdir()
    (tmp_path / ".venv" / "b.json").write_text('{"x": "ds.json"}')
    assert mentions(tmp_path, {"ds.json"}) == [tmp_path / "a.yaml"]


def test_a_changed_ds_config_is_checked_with_its_users(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    layout(tmp_path, git=True)
    monkeypatch.chdir(tmp_path)
    report = lint(["configs/ds.json"], config=LintConfig())
    assert sorted((f.where.file, f.code) for f in report.findings if f.where) == [
        ("args/train.json", "DR360"), ("scripts/train.sh", "DR360")]
    assert report.files == 1 and report.exit_code == 1


def test_lint_inside_a_subdirectory_resolves_from_the_repository(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    layout(tmp_path, git=True)
    monkeypatch.chdir(tmp_path / "scripts")
    report = lint(["."], config=LintConfig())
    assert [(os.path.basename(f.where.file), f.code) for f in report.findings if f.where] == [
        ("train.sh", "DR360")]


def test_outside_a_repository_or_project_only_the_files_directory_is_read(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "deep").mkdir()
    (tmp_path / "ds.json").write_text(DS)
    (tmp_path / "run.sh").write_text("deepspeed --num_gpus 2 train.py --deepspeed ds.json\n")
    (tmp_path / "deep" / "run.sh").write_text("deepspeed --num_gpus 2 train.py --deepspeed ../ds.json\n")
    monkeypatch.chdir(tmp_path)
    refs = References(Files(), LintConfig())
    assert refs.scan_root(Path("ds.json")) == (tmp_path, False)
    assert [p.as_posix() for p in refs.related([Path("ds.json")])] == ["run.sh"]


AXOLOTL = """base_model: meta-llama/Llama-3.1-8B
datasets:
  - path: tatsu-lab/alpaca
    type: alpaca
micro_batch_size: 4
gradient_accumulation_steps: 2
learning_rate: 2.0e-5
output_dir: ./outputs/sft
deepspeed: deepspeed_configs/zero2.json
"""
ZERO2 = '{"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": "auto", "zero_optimization": {"stage": 2}}\n'


def axolotl_project(root: Path, *, git: bool) -> None:
    """Axolotl's own layout: examples/MODEL/*.yaml naming deepspeed_configs/*.json, which
    Axolotl opens from the repository's root (where `axolotl train` runs)."""
    (root / "examples" / "llama").mkdir(parents=True)
    (root / "deepspeed_configs").mkdir()
    (root / "examples" / "llama" / "sft.yaml").write_text(AXOLOTL)
    (root / "deepspeed_configs" / "zero2.json").write_text(ZERO2)
    if git:
        subprocess.run(["git", "init", "-q", str(root)], check=True)


def test_github_annotations_name_a_companion_relative_to_the_working_directory(
        cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The ds_config reached from the Axolotl YAML (resolved from the repository's root) is
    the same file as the one named on the command line: its findings say it as given."""
    axolotl_project(tmp_path / "proj", git=True)
    monkeypatch.chdir(tmp_path)
    result = cli("lint", "proj/examples/llama/sft.yaml", "proj/deepspeed_configs/zero2.json", "--format", "github")
    files = {part.removeprefix("file=") for line in result.out.splitlines()
             for part in line.split("::")[1].split(",") if part.startswith("file=")}
    assert files == {"proj/examples/llama/sft.yaml", "proj/deepspeed_configs/zero2.json"}, result.out
    text = cli("lint", "proj/examples/llama/sft.yaml", "proj/deepspeed_configs/zero2.json").out
    assert str(tmp_path) not in text, text


@pytest.mark.parametrize("git", [True, False])
@pytest.mark.parametrize("given", [("proj/examples/llama/sft.yaml", "proj/deepspeed_configs/zero2.json"),
                                   ("proj/examples/llama/sft.yaml",)])
def test_axolotl_and_its_ds_config_are_compared_with_or_without_git(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, git: bool, given: tuple[str, ...]) -> None:
    """Axolotl opens `deepspeed:` from the directory it runs in; without a checkout to say
    which, the file given on the command line, else the nearest directory above the YAML
    that holds the path, is the one it opens."""
    axolotl_project(tmp_path / "proj", git=git)
    monkeypatch.chdir(tmp_path)
    report = lint(list(given), config=LintConfig())
    assert [(f.where.file, f.where.line, f.code) for f in report.findings if f.code == "DR360" and f.where] == [
        ("proj/examples/llama/sft.yaml", 5, "DR360")], "\n".join(map(str, report.findings))
