"""Shared fixtures: run the CLI in-process, and write recipe files."""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

from distrecipe.cli import main
from distrecipe.engines import tables

# CI replays the same examples every run (a red build must mean a change broke
# something, not that a new random example was drawn); locally every run explores.
settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")

ROOT = Path(__file__).resolve().parent.parent
RECIPES = ROOT / "recipes"

TEED = re.compile(r"^\[default\d+\]:")
"""What torchrun's `--tee` puts before each line a rank prints (`tail_log.TailLog`)."""


def rank_lines(text: str) -> list[str]:
    """A job's terminal output as its ranks printed it: torchrun's tee prefix taken off."""
    return [TEED.sub("", line, count=1) for line in text.splitlines()]


CLUSTERS = ("tests/slurm/", "tests/launch/test_ray_cluster.py")
"""The tests that start a real SLURM or Ray cluster on this machine: one worker runs
them all, since each worker's session would start its own cluster on the same ports."""


SHARED_RUNS = {"tests.measured": "measured_search", "tests.launch.one_node": "one_node"}
"""Helpers whose real runs are cached once per worker process (`functools.cache`), by the
function that runs them: the test modules calling one are one work unit, so each run
happens once a session, not once on each worker that draws one of its tests."""


@functools.cache
def _shared_run(module: str) -> str | None:
    """The SHARED_RUNS helper whose run a test module calls, if any."""
    path = ROOT / module
    text = path.read_text(encoding="utf-8") if path.suffix == ".py" and path.is_file() else ""
    return next((helper for helper, run in SHARED_RUNS.items()
                 if f"from {helper} import " in text and f"{run}(" in text), None)


@functools.cache
def _shares_a_module_fixture(module: str) -> bool:
    """Whether a test module defines a module-scoped fixture (one training, one judge's
    setup): split over two workers, each would build it."""
    path = ROOT / module
    return path.suffix == ".py" and path.is_file() and 'scope="module"' in path.read_text(encoding="utf-8")


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`--dist loadgroup`, grouped here: CLUSTERS are one work unit, the modules sharing one
    of SHARED_RUNS another, a module sharing a module-scoped fixture another, every other
    test its own. xdist 3.8 names an `xdist_group` by rewriting `item._nodeid`, which
    pytest 9.2 no longer reads, so the mark would group nothing."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class Units(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            if module.startswith(CLUSTERS):
                return "clusters"
            helper = _shared_run(module)
            if helper:
                return helper
            return module if _shares_a_module_fixture(module) else nodeid

    return Units(config, log)


@dataclass(frozen=True)
class Result:
    code: int
    out: str
    err: str


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Callable[..., Result]:
    """Run `distrecipe ARGS...` in-process; returns exit code, stdout and stderr."""

    def run(*args: str) -> Result:
        capsys.readouterr()
        code = main([str(a) for a in args])
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)

    return run


@pytest.fixture
def write(tmp_path: Path) -> Callable[[str, str], Path]:
    """Write `text` to `tmp_path/name` and return the path."""

    def put(name: str, text: str) -> Path:
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        return path

    return put


SCRIPTS: dict[str, str] = {
    "deepspeed": "import deepspeed\n\nengine, *_ = deepspeed.initialize(config='ds_config.json')\n",
    "accelerate": "from accelerate import Accelerator\n\naccelerator = Accelerator()\n",
    "torchrun": "import torch.distributed as dist\n\ndist.init_process_group()\n",
}
"""A training script of each program kind `launch` tells from the source (never run)."""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[[str], Path]:
    """A working directory holding `train.py`, the script launch examples name (launch refuses
    a program file that is not there): a raw DeepSpeed script, or `project(KIND)`'s."""
    def script(kind: str) -> Path:
        (tmp_path / "train.py").write_text(SCRIPTS[kind], encoding="utf-8")
        return tmp_path / "train.py"

    script("deepspeed")
    monkeypatch.chdir(tmp_path)
    return script


@pytest.fixture(autouse=True)
def installed_releases() -> Iterator[None]:
    """Each test starts with the installed engines judging: a release one test states
    (`--engine-version`, `[tool.distrecipe] engines`) never judges the next."""
    yield
    tables.state({})


@pytest.fixture(scope="session")
def judge() -> Iterator[Any]:
    """verl's judge (distrecipe/judges/verl.py): one verl import and one Hydra context for the
    session, shared by the emitter's and lint's verl oracles (the import costs ≈ 8 s)."""
    oracle = pytest.importorskip("distrecipe.judges.verl", reason="verl is not installed")
    verl_judge = oracle.VerlJudge()
    yield verl_judge
    verl_judge.close()
