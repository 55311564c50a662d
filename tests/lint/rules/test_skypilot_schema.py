"""DR399: lint judges a SkyPilot task as `sky launch` does before it asks any cloud.

SkyPilot itself is the judge (tests/launch/skypilot_judge.py, run by `.venv-skypilot`):
its task schema, `Task.from_yaml_config` (the envs, then the resources' own schema).
Each task file below is one people write; SkyPilot refuses it ⇔ lint reports DR399, at
the key SkyPilot names. The table lint applies is what `scripts/skypilot_tables.py`
copies from the installed SkyPilot.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from distrecipe.lint.config import LintConfig
from distrecipe.lint.engine import lint
from tests.launch.test_skypilot import SKY_PYTHON, judge

ROOT = Path(__file__).resolve().parents[3]
RUN = "torchrun --nnodes $SKYPILOT_NUM_NODES --nproc_per_node 8 train.py --deepspeed ds.json\n"

TASKS: dict[str, tuple[str, str | None]] = {
    # name: (task file, the key DR399 points at; None where SkyPilot accepts it)
    "null-env": ("""\
name: sft-llama
num_nodes: 2
resources:
  accelerators: H100:8
envs:
  WANDB_PROJECT: sft
  HF_TOKEN:  # passed with --env at launch
run: |
  torchrun --nnodes $SKYPILOT_NUM_NODES --nproc_per_node 8 train.py
""", "envs.HF_TOKEN"),
    "empty-env-string": ("""\
num_nodes: 2
resources: {accelerators: H100:8}
envs: {HF_TOKEN: "", MAX_JOBS: 4, NCCL_DEBUG: INFO}
run: |
  torchrun --nnodes $SKYPILOT_NUM_NODES --nproc_per_node 8 train.py
""", None),
    "misspelt-num-nodes": ("""\
num_node: 2
resources: {accelerators: H100:8}
run: |
  torchrun --nnodes $SKYPILOT_NUM_NODES --nproc_per_node 8 train.py
""", "num_node"),
    "nodes-as-string": ("""\
num_nodes: "2"
resources: {accelerators: H100:8}
run: |
  torchrun --nnodes $SKYPILOT_NUM_NODES --nproc_per_node 8 train.py
""", "num_nodes"),
    "env-name-with-dash": ("""\
num_nodes: 1
resources: {accelerators: A100:8}
envs: {MODEL-NAME: llama}
run: |
  python train.py
""", "envs"),
    "spot-as-text": ("""\
num_nodes: 1
resources:
  accelerators: A100-80GB:8
  use_spot: "yes"
run: |
  python train.py
""", "resources.use_spot"),
    "misspelt-accelerators": ("""\
num_nodes: 2
resources:
  accelerator: H100:8
  disk_size: 512
run: |
  torchrun --nnodes $SKYPILOT_NUM_NODES --nproc_per_node 8 train.py
""", "resources.accelerator"),
    "gpus-alias": ("""\
num_nodes: 2
resources:
  gpus: H100:8
  disk_size: 512
setup:
run: |
  torchrun --nnodes $SKYPILOT_NUM_NODES --nproc_per_node 8 train.py
""", None),
    "any-of-misspelt": ("""\
num_nodes: 1
resources:
  any_of:
    - accelerators: H100:8
    - acelerators: A100-80GB:8
run: |
  python train.py
""", "resources.any_of[1].acelerators"),
    "setup-as-list": ("""\
num_nodes: 1
resources: {accelerators: L4:1}
setup:
  - pip install -r requirements.txt
run: |
  python train.py
""", "setup"),
}


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, dict[str, Any]]]:
    folder = tmp_path_factory.mktemp("tasks")
    paths = []
    for name, (text, _) in TASKS.items():
        path = folder / f"{name}.yaml"
        path.write_text(text, encoding="utf-8")
        paths.append(path)
    judged = judge(paths, tmp_path_factory.mktemp("home"))
    return {path.stem: (path, verdict) for path, verdict in zip(paths, judged, strict=True)}


@pytest.mark.parametrize("name", sorted(TASKS))
def test_dr399_agrees_with_skypilot(verdicts: dict[str, tuple[Path, dict[str, Any]]], name: str) -> None:
    path, verdict = verdicts[name]
    report = lint([path], config=LintConfig())
    assert not report.unusable, report.unusable
    found = [f for f in report.findings if f.code == "DR399"]
    assert bool(found) == (not verdict["ok"]), (verdict, [str(f) for f in report.findings])
    assert (TASKS[name][1] is None) == verdict["ok"], verdict  # the table above says what SkyPilot does
    if found:
        assert all(f.severity == "error" for f in found)
        key = TASKS[name][1]
        assert key is not None
        assert any(f"{key}" in f.message for f in found), ([str(f) for f in found], verdict["error"])


def test_the_table_is_what_the_script_copies_from_skypilot(tmp_path: Path) -> None:
    if not SKY_PYTHON.exists():
        pytest.skip(f"{SKY_PYTHON} is missing") if os.environ.get("DISTRECIPE_SKYPILOT") == "0" else pytest.fail(
            f"{SKY_PYTHON} is missing: run `make skypilot`")
    done = subprocess.run([str(SKY_PYTHON), str(ROOT / "scripts" / "skypilot_tables.py"), "--check"],
                          capture_output=True, text=True, timeout=300, check=False,
                          env={"HOME": str(tmp_path), "PATH": os.environ.get("PATH", "/usr/bin")})
    assert done.returncode == 0, done.stderr[-3000:]


def test_lint_tells_a_task_by_the_schema_s_keys() -> None:
    """The keys lint tells a SkyPilot task by (`engines.platforms`) are the task schema's."""
    from distrecipe.engines.platforms import SKYPILOT_KEYS
    from distrecipe.engines.skypilot import task_keys

    assert task_keys() == SKYPILOT_KEYS


@pytest.mark.parametrize("recipe", ["seed-8b-32gpu-zero2.yaml", "tiny-cpu.yaml"])
def test_what_launch_skypilot_writes_lints_clean(cli: Any, recipe: str, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)  # the workdir: recipe and script inside it
    result = cli("launch", f"recipes/{recipe}", "--skypilot", "--set", "cluster.gpu=h100", "--", "train.py")
    assert result.code == 0, result.err
    task = tmp_path / "task.yaml"
    task.write_text(result.out, encoding="utf-8")
    report = lint([task], config=LintConfig())
    assert [str(f) for f in report.findings if f.severity == "error"] == []
