"""`lint --engines`: the engines' verdicts as findings, and a clear line when one is missing.

The verdicts themselves are checked against the corpus in `tests/test_corpus_verdicts.py`
(slow); here, what needs no engine: the flag's failure mode and that without it the
engine rules report nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import metadata
from pathlib import Path

import pytest

from distrecipe import judges
from distrecipe.lint.config import LintConfig
from distrecipe.lint.engine import lint
from tests.conftest import Result

TEMPLATE = '{"bfloat16": {"enabled": "auto"}, "train_micro_batch_size_per_gpu": "auto"}\n'
"""A ds_config DeepSpeed accepts but reads otherwise (DR901 under --engines)."""


def test_a_missing_engine_is_one_line_and_exit_2(cli: Callable[..., Result], write: Callable[[str, str], Path],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    def not_installed(package: str) -> str:
        raise metadata.PackageNotFoundError(package)

    monkeypatch.setattr(judges.metadata, "version", not_installed)
    result = cli("lint", "--engines", write("ds_config.json", TEMPLATE))
    assert result.code == 2
    assert result.err.strip().splitlines() == [
        "distrecipe: error: lint --engines: deepspeed is not installed (pip install 'distrecipe[deepspeed]')"]


def test_without_engines_the_engine_rules_are_silent(write: Callable[[str, str], Path]) -> None:
    report = lint([write("ds_config.json", TEMPLATE)], config=LintConfig(), world=8)
    assert not {f.code for f in report.findings} & {"DR900", "DR901"}


@pytest.mark.slow  # a fresh process importing DeepSpeed, as a user's run does
def test_the_engines_log_lines_go_to_stderr_so_json_stays_json(tmp_path: Path) -> None:
    """DeepSpeed logs `[WARNING] [real_accelerator.py...]` to the stdout it saw at import;
    `lint --engines --format json` must still print one JSON document on stdout."""
    import json
    import os
    import subprocess
    import sys

    pytest.importorskip("deepspeed")
    (tmp_path / "ds_config.json").write_text(TEMPLATE)
    root = Path(__file__).resolve().parent.parent
    done = subprocess.run([sys.executable, "-m", "distrecipe", "lint", "--engines", "--format", "json",
                           "ds_config.json"], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(root)})
    assert done.returncode == 1, done.stderr
    assert {f["code"] for f in json.loads(done.stdout)["findings"]} & {"DR900", "DR901"}
