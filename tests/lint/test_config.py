"""`[tool.distrecipe.lint]`: levels per code, per-path ignores, fail_on and min_severity."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from distrecipe.errors import DistrecipeError
from distrecipe.lint.config import load_config
from distrecipe.lint.formats import FORMATS
from distrecipe.lint.rules import RULES
from tests.conftest import Result

CORPUS = Path(__file__).resolve().parents[1] / "corpus" / "real" / "deepspeed"
HF_ZERO3 = CORPUS / "huggingface__accelerate__examples__deepspeed_config_templates__zero_stage3_offload_config.json"
"""Accelerate's stock ZeRO-3 template: its values `"auto"`, so a DR315 info for each."""
MISSPELT = '{"train_batch_size": 32, "zero_optimisation": {"stage": 3}, "wandb_run": "x"}\n'
"""DR317 (error: DeepSpeed runs stage 0) and DR311 (a warning: another program's key)."""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[[str], Path]:
    """A project directory with `pyproject.toml` holding `toml`, as the working directory."""
    monkeypatch.chdir(tmp_path)

    def make(toml: str) -> Path:
        (tmp_path / "pyproject.toml").write_text(toml)
        return tmp_path

    return make


def codes(result: Result) -> list[tuple[str, str]]:
    return [(f["code"], f["severity"]) for f in json.loads(result.out)["findings"]]


def test_a_misspelt_key_fails_by_default(cli: Callable[..., Result], project: Callable[[str], Path]) -> None:
    (project("") / "ds.json").write_text(MISSPELT)
    result = cli("lint", "ds.json", "--world", "8", "--format", "json")
    assert (result.code, codes(result)) == (1, [("DR317", "error"), ("DR311", "warning")])


def test_levels_per_code(cli: Callable[..., Result], project: Callable[[str], Path]) -> None:
    root = project('[tool.distrecipe.lint]\nrules = { DR317 = "warning", DR311 = { level = "off" } }\n')
    (root / "ds.json").write_text(MISSPELT)
    result = cli("lint", "ds.json", "--world", "8", "--format", "json")
    assert (result.code, codes(result)) == (0, [("DR317", "warning")])


def test_the_lint_table_wins_over_the_older_keys(cli: Callable[..., Result],
                                                 project: Callable[[str], Path]) -> None:
    root = project('[tool.distrecipe]\ndisable = ["DR311"]\nseverity = { DR317 = "info" }\n'
                   '[tool.distrecipe.lint.rules]\nDR311 = "error"\n')
    (root / "ds.json").write_text(MISSPELT)
    result = cli("lint", "ds.json", "--world", "8", "--format", "json")
    assert (result.code, codes(result)) == (1, [("DR317", "info"), ("DR311", "error")])


def test_per_path_ignores(cli: Callable[..., Result], project: Callable[[str], Path]) -> None:
    root = project('[tool.distrecipe.lint]\nper_file_ignores = { "legacy/*" = ["DR317"], "old.json" = ["*"] }\n'
                   'rules = { DR311 = { ignore = ["legacy/*"] } }\n')
    (root / "legacy").mkdir()
    for name in ("legacy/ds.json", "old.json", "new.json"):
        (root / name).write_text(MISSPELT)
    result = cli("lint", ".", "--world", "8", "--format", "json")
    found = [(f["file"], f["code"]) for f in json.loads(result.out)["findings"]]
    assert (result.code, found) == (1, [("new.json", "DR317"), ("new.json", "DR311")])


def test_fail_on_and_min_severity(cli: Callable[..., Result], project: Callable[[str], Path]) -> None:
    root = project("")
    (root / "ds.json").write_text(MISSPELT.replace("zero_optimisation", "zero_optimization"))
    assert cli("lint", "ds.json", "--world", "8").code == 0  # a warning
    assert cli("lint", "ds.json", "--world", "8", "--fail-on", "warning").code == 1
    project('[tool.distrecipe.lint]\nfail_on = "warning"\n')
    assert cli("lint", "ds.json", "--world", "8").code == 1
    assert cli("lint", "ds.json", "--world", "8", "--fail-on", "error").code == 0
    # the failing finding is printed whatever the minimum
    shown = cli("lint", "ds.json", "--world", "8", "--min-severity", "error").out.splitlines()
    assert [line.split()[2] for line in shown[:-1]] == ["DR311:"]


def test_min_severity_filters_the_zero3_templates_infos(cli: Callable[..., Result]) -> None:
    every = cli("lint", HF_ZERO3, "--ds-config-consumer", "hf", "--world", "8")
    infos = [line for line in every.out.splitlines() if " info DR315: " in line]
    assert every.code == 0 and len(infos) >= 10
    quiet = cli("lint", HF_ZERO3, "--ds-config-consumer", "hf", "--world", "8", "--min-severity", "warning")
    assert quiet.code == 0
    assert quiet.out == (f"1 file checked: 0 errors, 0 warnings, 0 infos "
                         f"({len(infos)} findings below --min-severity not shown)\n")
    data = json.loads(cli("lint", HF_ZERO3, "--ds-config-consumer", "hf", "--world", "8", "--min-severity",
                          "warning", "--format", "json").out)
    assert (data["findings"], data["hidden"]) == ([], len(infos))


@pytest.mark.parametrize(("toml", "message", "line", "col"), [
    ('[tool.distrecipe.lint]\nfail-on = "warning"\n', "[tool.distrecipe.lint] unknown key 'fail-on'; "
     "did you mean 'fail_on'?", 2, 1),
    ('[tool.distrecipe.lint]\nmin_severity = "debug"\n', "[tool.distrecipe] lint.min_severity: 'debug' is "
     "not one of error, warning, info", 2, 16),
    ('[tool.distrecipe.lint]\nrules = { DR317 = "fatal" }\n', "[tool.distrecipe] lint.rules.DR317: 'fatal' "
     "is not one of error, warning, info, off", 2, 19),
    ('[tool.distrecipe.lint.rules]\nDR999 = "off"\n', "[tool.distrecipe] lint.rules: 'DR999' is not one of", 2, 9),
    ('[tool.distrecipe.lint]\nper_file_ignores = { "a/*" = "DR311" }\n',
     "[tool.distrecipe] lint.per_file_ignores.a/* must be a list of strings, got 'DR311'", 2, 30),
    ('[tool.distrecipe]\nlint = 3\n', "[tool.distrecipe] lint must be a table", 2, 8),
    ('[tool.distrecipe]\nengines = { deepspeed = "latest" }\n', "[tool.distrecipe] engines: deepspeed: a release "
     'number such as "1.15" or "0.19.8", not \'latest\'', 2, 25),
    ('[tool.distrecipe.engines]\ndeepspeed = "0.19"\nnosuch = "1.0"\n', "[tool.distrecipe] engines: unknown engine "
     "'nosuch': one of accelerate, axolotl, deepspeed, hf, llama-factory", 3, 10),
    ('[tool.distrecipe]\nengines = "0.19"\n', "[tool.distrecipe] engines must be a table of engine = \"release\"",
     2, 11),
    ('[tool.distrecipe]\ntransformers = "4.46"\nengines = { transformers = "4.50" }\n',
     "[tool.distrecipe] transformers = '4.46' and engines.transformers = '4.50' disagree", 2, 16),
])
def test_a_malformed_setting_is_one_positioned_error(tmp_path: Path, toml: str, message: str, line: int,
                                                    col: int) -> None:
    (tmp_path / "pyproject.toml").write_text(toml)
    with pytest.raises(DistrecipeError) as caught:
        load_config(tmp_path / "pyproject.toml", frozenset(RULES), frozenset(FORMATS))
    assert caught.value.message.startswith(message)
    assert caught.value.where is not None
    assert (caught.value.where.line, caught.value.where.col) == (line, col)


def test_explain_shows_the_default_and_the_projects_level(cli: Callable[..., Result],
                                                          project: Callable[[str], Path]) -> None:
    project('[tool.distrecipe.lint]\nrules = { DR371 = "off" }\n')
    shown = cli("explain", "DR371").out
    assert shown.startswith("DR371 (zero3-where-zero2-fits; info by default; lint: recipe)")
    assert "Level: info by default." in shown and 'rules = { DR371 = "error" }' in shown
    assert shown.rstrip().endswith("pyproject.toml) sets it to off.")


def test_the_release_a_project_states_judges_with_a_note_when_it_has_no_table(
        cli: Callable[..., Result], project: Callable[[str], Path]) -> None:
    """`[tool.distrecipe] engines` picks the table; `--engine-version` wins over it."""
    root = project('[tool.distrecipe]\nengines = { accelerate = "1.14.5" }\n')
    (root / "accelerate_config.yaml").write_text(
        "distributed_type: FSDP\nnum_processes: 8\nfsdp_config:\n  fsdp_version: 2\n"
        "  fsdp_activation_checkpointing_offload: true\n")
    stated = cli("lint", "accelerate_config.yaml")
    assert stated.code == 1
    assert stated.err.splitlines() == [
        "distrecipe: note: Accelerate 1.14.5 ([tool.distrecipe] engines) has no table of its own: judged by "
        "Accelerate 1.14.0's, the nearest older release with one"]
    assert "(a key of Accelerate ≥ 1.15.0; the project runs 1.14.5 ([tool.distrecipe] engines))" in stated.out
    overridden = cli("lint", "--engine-version", "accelerate=1.15.0", "accelerate_config.yaml")
    assert (overridden.code, overridden.err) == (0, "")
