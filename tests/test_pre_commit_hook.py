"""The pre-commit hook in a real `pre-commit run`: cross-file findings whichever file changed.

pre-commit hands the hook only the changed files, so a ds_config changed alone used to
pass although the launch script naming it disagrees with it (DR360). The hook is this
repository's `.pre-commit-hooks.yaml`, used as `repo: local` in a scratch git repository
(its `files`, `exclude`, `types` and `entry` as written; the entry run by this
interpreter, with this checkout's `distrecipe`, since a `language: python` install would
need the package index). Needs pre-commit (the `test` extra); skipped without it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
HOOKS = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())

DS = '{"train_micro_batch_size_per_gpu": %d, "gradient_accumulation_steps": 1, "zero_optimization": {"stage": 2}}\n'
SCRIPT = "#!/bin/bash\ndeepspeed --num_gpus 8 train.py --deepspeed c2/ds.json --per_device_train_batch_size %d\n"


def pre_commit() -> list[str]:
    try:
        import pre_commit  # noqa: F401
    except ImportError:
        found = shutil.which("pre-commit")
        if found is None:
            pytest.skip("pre-commit is not installed (pip install 'distrecipe[test]')")
        return [found]
    return [sys.executable, "-m", "pre_commit"]


@pytest.fixture
def repository(tmp_path: Path) -> Path:
    """A git repository whose pre-commit config runs this checkout's hook, with c2/ds.json
    and the c2/run.sh naming it, committed and consistent (micro 4 on both sides)."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    repo = tmp_path / "repo"
    (repo / "c2").mkdir(parents=True)
    git(repo, "init", "-q", ".")
    hook = dict(HOOKS[0])
    hook["language"] = "system"
    hook["entry"] = f"{sys.executable} -m " + hook["entry"]
    config = {"repos": [{"repo": "local", "hooks": [hook]}]}
    (repo / ".pre-commit-config.yaml").write_text(yaml.safe_dump(config))
    (repo / "c2" / "ds.json").write_text(DS % 4)
    (repo / "c2" / "run.sh").write_text(SCRIPT % 4)
    (repo / "notes.yaml").write_text("title: not a config\n")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "start")
    return repo


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(repo), *args],
                   check=True, capture_output=True)


def run(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PRE_COMMIT_HOME": str(repo.parent / "cache"),
           "NO_COLOR": "1"}
    return subprocess.run([*pre_commit(), "run", *args], cwd=repo, env=env, capture_output=True,
                          text=True, timeout=300, check=False)


def test_a_consistent_commit_passes(repository: Path) -> None:
    (repository / "notes.yaml").write_text("title: still not a config\n")
    git(repository, "add", "notes.yaml")
    done = run(repository)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Passed" in done.stdout


@pytest.mark.parametrize("changed", ["c2/ds.json", "c2/run.sh"])
def test_the_pair_is_checked_whichever_side_changed(repository: Path, changed: str) -> None:
    if changed.endswith(".json"):
        (repository / changed).write_text(DS % 2)
    else:
        (repository / changed).write_text(SCRIPT % 8)
    git(repository, "add", changed)
    done = run(repository)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Failed" in done.stdout
    assert "c2/run.sh:2:" in done.stdout and "DR360" in done.stdout, done.stdout


def test_all_files_from_a_subdirectory_sees_the_same_pair(repository: Path) -> None:
    (repository / "c2" / "ds.json").write_text(DS % 2)
    done = run(repository, "--all-files")
    assert done.returncode == 1 and "DR360" in done.stdout, done.stdout
    lint = subprocess.run([sys.executable, "-m", "distrecipe", "lint", "."], cwd=repository / "c2",
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
                          check=False)
    assert lint.returncode == 1 and "run.sh:2:86: error DR360: " in lint.stdout, lint.stdout


def test_the_hook_and_the_readme_both_pin_a_sha() -> None:
    import re

    sha = re.compile(r"rev: [0-9a-f]{40}\b")
    assert sha.search((ROOT / ".pre-commit-hooks.yaml").read_text())
    assert sha.search((ROOT / "README.md").read_text())
    assert "<a tag>" not in (ROOT / ".pre-commit-hooks.yaml").read_text()
