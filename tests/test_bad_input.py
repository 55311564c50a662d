"""Bad input: one test per class. Each must exit 2 with `file:line:col`, no traceback."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import Result

GOOD = """\
recipe: 1
model: {params: 1.3e9, hidden_size: 2048}
cluster: {nodes: 1, gpus_per_node: 8}
strategy: zero
stage: 2
batch: {micro: 2, accumulation: 4, global: 64}
"""

BOMB = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{n}: &{n} [{', '.join(['*' + p] * 10)}]\n" for p, n in zip("abcdefgh", "bcdefghi", strict=True)
)

CASES = {
    "yaml syntax": ("recipe: 1\nmodel: {params: 1\n", 3, 1, "invalid YAML"),
    "tab indentation": ("recipe: 1\nmodel:\n\tparams: 1\n", 3, 1, "tabs"),
    "duplicate key": (GOOD + "stage: 3\n", 7, 1, "duplicate key 'stage' (first defined at line 5)"),
    "unknown key": (GOOD.replace("stage: 2", "stgae: 2"), 5, 1, "did you mean 'stage'?"),
    "wrong type": (GOOD.replace("micro: 2", "micro: two"), 6, 16, "batch.micro must be an integer from 1 to 2,147,483,648 or 'auto'"),
    "out of range": (GOOD.replace("stage: 2", "stage: 4"), 5, 8, "stage must be an integer from 0 to 3, got 4"),
    "enum with typo": (GOOD.replace("strategy: zero", "strategy: zeor"), 4, 11, "did you mean 'zero'?"),
    "python tag": (GOOD + "name: !!python/object/apply:os.system [echo owned]\n", 7, 7, "refused tag"),
    "alias bomb": (BOMB, None, None, "alias bomb"),
    "non-divisible batch": (GOOD.replace("accumulation: 4", "accumulation: auto").replace("global: 64", "global: 60"),
                            6, 47, "60 / (2 × 8) = 3.75 is not a positive integer"),
    "dp > global": (GOOD.replace("micro: 2, accumulation: 4, global: 64", "micro: auto, global: 4"),
                    6, 30, "DP = 8 is larger than batch.global = 4"),
    "param offload at stage 2": (GOOD + "offload: {params: cpu}\n", 7, 19, "needs stage 3"),
    "mismatched triple": (GOOD.replace("global: 64", "global: 128"), 6, 44,
                          "2 × 4 × 8 = 64, but batch.global is 128; set global 64, accumulation 8 or micro 4"),
    "ddp with stage 2": (GOOD.replace("strategy: zero", "strategy: ddp"), 5, 8, "does not go with strategy ddp"),
    "not a mapping": ("- just\n- a list\n", 1, 1, "must be a mapping"),
    "empty file": ("", 1, 1, "must be a mapping"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input_is_one_positioned_line(
    case: str, cli: Callable[..., Result], write: Callable[[str, str], Path]
) -> None:
    text, line, col, fragment = CASES[case]
    path = write("bad.yaml", text)
    out_dir = path.parent / "out"
    result = cli("compile", path, "-o", out_dir)
    assert result.code == 2, result
    assert "Traceback" not in result.err and "internal error" not in result.err
    assert len(result.err.strip().splitlines()) == 1, result.err
    position = f"{path}:{line}:{col}: error: " if line else f"{path}:"
    assert result.err.startswith(position), result.err
    assert fragment in result.err
    assert not out_dir.exists(), "nothing may be written when the recipe is wrong"


def test_bad_override_points_at_the_override(cli: Callable[..., Result], write: Callable[[str, str], Path]) -> None:
    path = write("r.yaml", GOOD)
    result = cli("compile", path, "--set", "batch.micro=abc")
    assert result.code == 2
    assert result.err.startswith("--set batch.micro=abc:1:13: error: batch.micro must be"), result.err
    result = cli("compile", path, "--set", "batch.mikro=4")
    assert result.code == 2
    assert result.err.startswith("--set batch.mikro=4:1:7: error: unknown key 'mikro' in batch; did you mean 'micro'?")


def test_json_errors_have_positions(cli: Callable[..., Result], write: Callable[[str, str], Path]) -> None:
    path = write("r.json", '{\n  "recipe": 1,\n  "recipe": 1\n}\n')
    result = cli("resolve", path)
    assert result.code == 2 and result.err.startswith(f"{path}:3:3: error: duplicate key 'recipe'")
    path = write("s.json", '{\n  "recipe": 1,\n}\n')
    result = cli("resolve", path)
    assert result.code == 2 and re.match(rf"{re.escape(str(path))}:3:1: error: invalid JSON", result.err)


def test_missing_file_is_a_clear_error(cli: Callable[..., Result], tmp_path: Path) -> None:
    result = cli("resolve", tmp_path / "nope.yaml")
    assert result.code == 2
    assert "cannot read" in result.err and "Traceback" not in result.err


def test_huge_file_is_refused_before_parsing(cli: Callable[..., Result], write: Callable[[str, str], Path]) -> None:
    path = write("big.yaml", GOOD + "#" * (2 << 20) + "\n")
    result = cli("resolve", path)
    assert result.code == 2 and "are refused" in result.err
