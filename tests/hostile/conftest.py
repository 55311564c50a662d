"""The hostile suite's sandbox, and its closing figures printed after the run."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.hostile.harness import TALLY, Sandbox


@pytest.fixture
def sandbox(tmp_path: Path) -> Sandbox:
    root = tmp_path / "sandbox"
    root.mkdir()
    return Sandbox(root)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if TALLY.inputs:
        terminalreporter.section("hostile inputs")
        for line in TALLY.lines():
            terminalreporter.write_line(line)
