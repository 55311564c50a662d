"""One test per crash class and promise the hostile sweeps found broken (issue 13).

Each names the input that used to crash or escape, and holds the fix to the README's
promise: exit 2 with one positioned line, nothing half-written, nothing shared.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import Result
from tests.hostile.inputs import BIG_INT, NINES, recipe_text

Cli = Callable[..., Result]


def _one_error(result: Result, where: str) -> str:
    assert result.code == 2, result
    lines = [line for line in result.err.splitlines() if ": error: " in line]
    assert len(lines) == 1 and lines[0].startswith(where), result.err
    return lines[0]


RECIPE_CRASHES = {
    # (field, YAML literal) → (line of the value, fragment of the message)
    "5,000-digit integer": (("batch", "global"), BIG_INT, "value has 5000 digits"),
    "params .nan": (("model", "params"), ".nan", "model.params must be a finite number, got nan"),
    "params 1e400": (("model", "params"), "1e400", "model.params must be a finite number, got inf"),
    "params 1e400B": (("model", "params"), '"1e400B"', "model.params must be"),
    "params 5,000 digits as a string": (("model", "params"), f'"{BIG_INT}"', "model.params must be"),
    "gpu_memory 60 nines GB": (("cluster", "gpu_memory"), f'"{NINES}GB"', "cluster.gpu_memory must be"),
    "vocab 1e308": (("model", "vocab"), "1e308", "model.vocab must be an integer from 1 to"),
    "kv_heads 1e308": (("model", "kv_heads"), "1e308", "model.kv_heads must be an integer from 1 to"),
    "hidden_size 1e308": (("model", "hidden_size"), "1e308", "model.hidden_size must be"),
    "seq_len 1.8e308": (("batch", "seq_len"), "1.7976931348623157e308", "batch.seq_len must be"),
    "gpu_memory 999 TiB string": (("cluster", "gpu_memory"), '"999999TiB"', "cluster.gpu_memory is 1.1e+18"),
    "lr inf": (("optimizer", "lr"), ".inf", "optimizer.lr must be a finite number"),
    "name with NUL": (("name",), '"a\\0b"', "name must be a safe slug"),
    "name escaping the runs root": (("name",), '"../../x"', "name must be a safe slug"),
    "name with a newline": (("name",), '"x\\n#SBATCH --wrap=touch pwned"', "name must be a safe slug"),
    "hf_config with NUL": (("model", "hf_config"), '"a\\0b"', "no file name can hold"),
    "hf_config lone surrogate": (("model", "hf_config"), '"\\ud800"', "holds a lone surrogate"),
}


@pytest.mark.parametrize("case", sorted(RECIPE_CRASHES))
@pytest.mark.parametrize("command", ["resolve", "plan", "launch"])
def test_recipe_crash_is_a_positioned_error(cli: Cli, tmp_path: Path, case: str, command: str) -> None:
    path, literal, fragment = RECIPE_CRASHES[case]
    text = recipe_text(path, literal)
    recipe = tmp_path / "r.yaml"
    recipe.write_text(text, encoding="utf-8", errors="surrogatepass")
    line = next(i for i, row in enumerate(text.splitlines(), 1) if literal in row)
    extra = ["--dry-run"] if command == "launch" else []
    message = _one_error(cli(command, recipe, *extra), f"{recipe}:{line}:")
    assert fragment in message


def test_set_with_sixty_nines_points_at_the_override(cli: Cli, tmp_path: Path) -> None:
    recipe = tmp_path / "r.yaml"
    recipe.write_text(recipe_text())
    word = f"cluster.gpu_memory={NINES}"
    message = _one_error(cli("resolve", recipe, "--set", word), f"--set {word}:1:20: error: ")
    assert "cluster.gpu_memory must be an integer from 1 to 1,125,899,906,842,624" in message


def test_huge_world_with_a_shard_group_that_does_not_divide_it_is_quick(cli: Cli, tmp_path: Path) -> None:
    """The error lists DP's divisors: found up to √DP, never by counting to DP."""
    recipe = tmp_path / "r.yaml"
    text = recipe_text(("parallel", "shard_group"), "7").replace("nodes: 4", "nodes: 1000000")
    recipe.write_text(text.replace("gpus_per_node: 8", "gpus_per_node: 1024").replace("global: 256", "global: 1024000000"))
    message = _one_error(cli("resolve", recipe), f"{recipe}:")
    assert "must divide the data-parallel world DP = 1024000000" in message


def test_verl_micro_batch_zero_is_a_finding_not_a_crash(cli: Cli, tmp_path: Path) -> None:
    source = Path(__file__).parents[1] / "lint_corpus" / "DR220" / "micro-does-not-divide" / "verl_overrides.txt"
    path = tmp_path / "verl_overrides.txt"
    path.write_text(source.read_text().replace("ppo_micro_batch_size_per_gpu=2", "ppo_micro_batch_size_per_gpu=0"))
    assert cli("lint", path).code in (0, 1)


def test_ds_config_zero_accumulation_is_a_finding_not_a_crash(cli: Cli, tmp_path: Path) -> None:
    path = tmp_path / "ds_config.json"
    path.write_text(json.dumps({"train_batch_size": 32, "gradient_accumulation_steps": 0}))
    result = cli("lint", path, "--world", "8")
    assert result.code == 1 and "gradient_accumulation_steps 0 must be a positive integer" in result.out, result


def test_negative_reduce_bucket_size_is_carried_not_crashed_on(cli: Cli, tmp_path: Path) -> None:
    """It is no hidden size (hidden² can't be −1): import carries the value as written."""
    path = tmp_path / "ds_config.json"
    path.write_text(json.dumps({"train_batch_size": 32, "train_micro_batch_size_per_gpu": 4,
                                "zero_optimization": {"stage": 2, "reduce_bucket_size": -1}}))
    result = cli("import", path, "--world", "8")
    assert result.code == 0 and "reduce_bucket_size: -1" in result.out, result
    assert "native.deepspeed" in result.err and "zero_optimization.reduce_bucket_size" in result.err


@pytest.mark.parametrize("value", ['"\\ud800"', '"a\\u0000b"', '"missing.json"', '"' + "x" * 5000 + '"'])
def test_training_arguments_deepspeed_reference_is_positioned(cli: Cli, tmp_path: Path, value: str) -> None:
    path = tmp_path / "args.json"
    path.write_text('{\n  "output_dir": "out",\n  "deepspeed": ' + value + "\n}\n")
    message = _one_error(cli("import", path, "--world", "8"), f"{path}:3:16: error: deepspeed ")
    assert "which is not a regular file" in message


def test_json_with_a_5000_digit_number_points_at_it(cli: Cli, tmp_path: Path) -> None:
    path = tmp_path / "ds_config.json"
    path.write_text('{\n  "train_batch_size": 8,\n  "steps_per_print": ' + BIG_INT + "\n}\n")
    _one_error(cli("lint", path), f"{path}:3:22: error: invalid JSON: Exceeds the limit (4300 digits)")


@pytest.mark.parametrize(("body", "where", "fragment"), [
    ("world = 0", "2:9", "world must be an integer from 1 to"),
    ('world = "8"', "2:9", "got '8'"),
    (f"world = {BIG_INT}", "1:1", "more digits than any setting needs"),
    ("format = 'xml'", "2:10", "'xml' is not one of"),
    ("wrold = 8", "2:1", "unknown key 'wrold'; did you mean 'world'?"),
    ("world = [", "2:10", "invalid TOML"),
])
def test_pyproject_errors_are_positioned(cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                         body: str, where: str, fragment: str) -> None:
    (tmp_path / "pyproject.toml").write_text(f"[tool.distrecipe]\n{body}\n")
    (tmp_path / "r.yaml").write_text(recipe_text())
    monkeypatch.chdir(tmp_path)
    message = _one_error(cli("lint", "r.yaml"), f"{tmp_path / 'pyproject.toml'}:{where}: error: ")
    assert fragment in message


def test_directory_input_is_one_distrecipe_line(cli: Cli, tmp_path: Path) -> None:
    result = cli("resolve", tmp_path)
    assert result.code == 2 and len(result.err.splitlines()) == 1, result
    assert "Usage:" not in result.err and ": error: " in result.err


def test_compile_all_or_nothing_when_a_target_is_a_directory(cli: Cli, tmp_path: Path) -> None:
    """One destination in the way: exit 2 and the other files are not replaced."""
    recipe = tmp_path / "r.yaml"
    recipe.write_text(recipe_text())
    out = tmp_path / "out"
    assert cli("compile", recipe, "-t", "all", "-o", out).code == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    (out / "ds_config.json").unlink()
    (out / "ds_config.json").mkdir()
    recipe.write_text(recipe_text(("stage",), "2"))
    message = _one_error(cli("compile", recipe, "-t", "all", "-o", out), "distrecipe: error: ")
    assert "a directory is in the way" in message
    after = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    assert after == {k: v for k, v in before.items() if k != "ds_config.json"}


def test_compile_never_creates_the_output_directory_on_failure(cli: Cli, tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    recipe = tmp_path / "r.yaml"
    recipe.write_text(recipe_text())
    assert cli("compile", recipe, "-t", "all", "-o", blocker / "out").code == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file", "r.yaml"]


def test_compile_replaces_a_planted_symlink_instead_of_writing_through_it(cli: Cli, tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("precious")
    out = tmp_path / "out"
    out.mkdir()
    (out / "ds_config.json").symlink_to(victim)
    recipe = tmp_path / "r.yaml"
    recipe.write_text(recipe_text())
    assert cli("compile", recipe, "-o", out).code == 0
    assert victim.read_text() == "precious"
    assert not (out / "ds_config.json").is_symlink()
    assert [p.name for p in out.iterdir()] == ["ds_config.json"], "no temporary is left behind"


def test_crash_report_is_private_per_user_and_per_run(cli: Cli, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from distrecipe.commands import resolve

    def boom(**_: object) -> int:
        raise RuntimeError("a bug")

    monkeypatch.setattr(resolve, "resolve_recipe", boom)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    victim = tmp_path / "victim"
    victim.write_text("precious")
    first, second = cli("resolve", "x.yaml"), cli("resolve", "x.yaml")
    assert first.code == second.code == 3
    logs = sorted((tmp_path / "cache" / "distrecipe").iterdir())
    assert len(logs) == 2 and all(log.name.startswith(f"crash-{os.getpid()}-") for log in logs)
    assert all(stat.S_IMODE(log.stat().st_mode) == 0o600 for log in logs)
    assert "RuntimeError: a bug" in logs[0].read_text()
    assert str(logs[0]) in first.err and victim.read_text() == "precious"


def test_verl_script_whose_prompts_per_step_is_not_a_number_is_refused_in_place(cli: Cli, tmp_path: Path) -> None:
    """It imported without `rl` and the verl emitter then asserted (the sweep planted U+202E)."""
    source = Path(__file__).parent.parent / "lint_corpus" / "DR220" / "prompts-not-divisible" / "run_grpo.sh"
    path = tmp_path / "run_grpo.sh"
    path.write_text(source.read_text().replace("data.train_batch_size=90", "data.train_batch_size=\u202eevil"))
    result = cli("import", path, "--world", "8")
    assert result.code == 2 and f"{path}:6:" in result.err and "data.train_batch_size" in result.err, result
