"""`distrecipe compile` reads a recipe as `lint` does: it never writes what lint rejects.

Each refusal is lint's own positioned line (`file:line:col: error CODE: ...`), exit 1 as
lint exits on the same files, and nothing is written; a code silenced for lint (inline or
in `[tool.distrecipe]`) is silenced for compile. The property test holds the two commands
to each other over generated recipes, for every target.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from distrecipe.lint.config import LintConfig
from distrecipe.lint.engine import lint
from distrecipe.translator.targets import launch_world
from tests.conftest import RECIPES, Result
from tests.emit_strategies import engine_documents, plan_of
from tests.strategies import journey_documents, to_yaml

ZERO2 = (RECIPES / "seed-8b-32gpu-zero2.yaml").read_text(encoding="utf-8")
MISSPELT = ZERO2 + "native:\n  deepspeed:\n    zero_optimization:\n      overlap_com: true\n"
LINE = len(ZERO2.splitlines()) + 4
"""The line of `overlap_com` in MISSPELT."""


def test_misspelt_native_key_is_refused_as_lint_reports_it(
        cli: Callable[..., Result], write: Callable[[str, str], Path], tmp_path: Path) -> None:
    recipe = write("r.yaml", MISSPELT)
    linted = cli("lint", recipe)
    assert linted.code == 1
    line = f"{recipe}:{LINE}:7: error DR313: 'overlap_com' is not a key of DeepSpeed"
    assert line in linted.out
    for target in ("deepspeed", "all"):
        compiled = cli("compile", recipe, "-t", target, "-o", tmp_path / "out")
        assert compiled.code == 1
        assert line in compiled.err and "did you mean 'overlap_comm'?" in compiled.err
        assert compiled.err.count("DR313") == 2  # once at the recipe, once in the summary line
        assert "distrecipe: error: nothing written: lint reports 1 error (DR313)" in compiled.err
        assert not (tmp_path / "out").exists()
    assert cli("compile", recipe).out == ""  # to stdout: nothing either


def test_strict_names_the_lint_error_not_an_inexact_mapping(
        cli: Callable[..., Result], write: Callable[[str, str], Path]) -> None:
    compiled = cli("compile", write("r.yaml", MISSPELT), "--strict")
    assert compiled.code == 1 and "DR313" in compiled.err and "cannot express" not in compiled.err


def test_a_code_silenced_in_the_recipe_is_silenced_in_what_it_compiles_to(
        cli: Callable[..., Result], write: Callable[[str, str], Path], tmp_path: Path) -> None:
    recipe = write("r.yaml", MISSPELT.replace("overlap_com: true", "overlap_com: true  # distrecipe: ignore[DR313]"))
    assert cli("lint", recipe).code == 0
    compiled = cli("compile", recipe, "-o", tmp_path / "out")
    assert compiled.code == 0, compiled.err
    assert '"overlap_com": true' in (tmp_path / "out" / "ds_config.json").read_text(encoding="utf-8")


def test_project_config_applies_to_compile(
        cli: Callable[..., Result], tmp_path: Path, monkeypatch: Any) -> None:
    """`[tool.distrecipe] disable` is read from the working directory's project, as lint reads it."""
    ddp = RECIPES / "seed-8b-32gpu-ddp.yaml"
    monkeypatch.chdir(tmp_path)
    refused = cli("compile", ddp)
    assert refused.code == 1 and f"{ddp}:16:51: error DR370: DDP needs" in refused.err
    (tmp_path / "pyproject.toml").write_text('[tool.distrecipe]\ndisable = ["DR370"]\n', encoding="utf-8")
    written = cli("compile", ddp)
    assert written.code == 0 and '"train_batch_size"' in written.out and "DR370" not in written.err


def test_error_in_a_written_file_is_placed_in_the_output(
        cli: Callable[..., Result], write: Callable[[str, str], Path], tmp_path: Path) -> None:
    """A whole-file rule on the written ds_config (DR310: an "auto" raw DeepSpeed reads; not
    run on the recipe's section) names the file compile would write, at its line."""
    recipe = write("r.yaml", ZERO2 + "native:\n  deepspeed:\n    zero_optimization:\n"
                                     "      stage3_max_live_parameters: \"auto\"\n")
    compiled = cli("compile", recipe, "-o", tmp_path / "out")
    assert compiled.code == 1, compiled.err
    assert f"{tmp_path / 'out' / 'ds_config.json'}:26:35: error DR310: \"auto\" at zero_optimization." in compiled.err
    assert "nothing written: lint reports 1 error (DR310)" in compiled.err
    assert not (tmp_path / "out").exists()


@settings(max_examples=int(os.environ.get("COMPILE_LINT_EXAMPLES", "40")), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(doc=st.one_of(engine_documents(rl=True), journey_documents(rl=True)),
       target=st.sampled_from(["all", "deepspeed", "accelerate", "verl", "hf"]))
def test_compile_and_lint_agree(cli: Callable[..., Result], doc: dict[str, Any], target: str) -> None:
    """Every file compile writes lints clean at the world that reads it; a recipe lint
    rejects is refused by compile (non-zero, nothing written), naming lint's code and position."""
    with tempfile.TemporaryDirectory() as tmp:
        recipe = Path(tmp) / "recipe.yaml"
        recipe.write_text(to_yaml(doc), encoding="utf-8")
        out = Path(tmp) / "out"
        recipe_errors = [f for f in lint([recipe], config=LintConfig()).findings if f.severity == "error"]
        compiled = cli("compile", recipe, "-t", target, "-o", out)
        event(f"exit {compiled.code}" + (", lint of the recipe: error" if recipe_errors else ""))
        if compiled.code == 0:
            assert not recipe_errors, compiled.err
            report = lint([out], config=LintConfig(), world=launch_world(plan_of(doc)))
            assert not report.unusable
            assert [str(f) for f in report.findings if f.severity == "error"] == []
            return
        assert compiled.code in (1, 2), compiled.err
        assert not out.exists()
        for finding in recipe_errors:
            assert finding.code in compiled.err and str(finding.where) in compiled.err, compiled.err


def test_a_key_the_stated_release_lacks_is_never_written(
        cli: Callable[..., Result], write: Callable[[str, str], Path], tmp_path: Path) -> None:
    """`managed_gradient_accumulation` came with DeepSpeed 0.19.4: a project on 0.19.3 gets
    compile's refusal naming both releases, and no file; on 0.19.4 the file is written."""
    recipe = write("r.yaml", ZERO2 + "native:\n  deepspeed:\n    managed_gradient_accumulation: true\n")
    out = tmp_path / "out"
    refused = cli("compile", recipe, "-o", out, "--engine-version", "deepspeed=0.19.3")
    assert refused.code == 1, refused.out + refused.err
    assert "error DR317: 'managed_gradient_accumulation' is not a key of DeepSpeed 0.19.3's top level (a key " \
           "of DeepSpeed ≥ 0.19.4; the project runs 0.19.3 (--engine-version)): silently ignored, so the " \
           "setting never applies" in refused.out + refused.err
    assert not out.exists()
    written = cli("compile", recipe, "-o", out, "--engine-version", "deepspeed=0.19.4")
    assert written.code == 0, written.out + written.err
    assert '"managed_gradient_accumulation": true' in (out / "ds_config.json").read_text()


def test_quiet_hides_info_findings_and_keeps_warnings_and_errors(cli: Callable[..., Result],
                                                                 write: Callable[[str, str], Path],
                                                                 tmp_path: Path) -> None:
    """An HF template (`--hf-auto`) gets an info line per "auto" the Trainer fills (DR315)."""
    seed = RECIPES / "seed-8b-32gpu-zero3.yaml"
    loud = cli("compile", seed, "--hf-auto", "-o", tmp_path / "loud")
    assert loud.code == 0, loud.err
    assert loud.err.count(" info DR315: ") >= 10 and " info DR371: " in loud.err and " info DR234: " in loud.err
    for flag in ("--quiet", "-q"):
        quiet = cli("compile", seed, "--hf-auto", flag, "-o", tmp_path / flag)
        assert quiet.code == 0, quiet.err
        assert " info " not in quiet.err
        assert [line for line in quiet.err.splitlines() if " warning " in line] == [
            line for line in loud.err.splitlines() if " warning " in line] != []
        assert (tmp_path / flag / "ds_config.json").read_bytes() == (tmp_path / "loud" / "ds_config.json").read_bytes()
    refused = cli("compile", write("r.yaml", MISSPELT), "-q", "-o", tmp_path / "refused")
    assert refused.code == 1
    assert f"r.yaml:{LINE}:7: error DR313: 'overlap_com' is not a key of DeepSpeed" in refused.err
    assert "distrecipe: error: nothing written: lint reports 1 error (DR313)" in refused.err
