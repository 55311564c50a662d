"""The command line as a user meets it: outputs, determinism, overrides, schema."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import jsonschema
import yaml

from tests.conftest import RECIPES, ROOT, Result

SEED_ZERO2 = RECIPES / "seed-8b-32gpu-zero2.yaml"


def test_compile_writes_ds_config(cli: Callable[..., Result], tmp_path: Path) -> None:
    result = cli("compile", SEED_ZERO2, "--target", "deepspeed", "-o", tmp_path / "out")
    assert result.code == 0, result.err
    config = json.loads((tmp_path / "out" / "ds_config.json").read_text())
    assert (config["train_batch_size"], config["train_micro_batch_size_per_gpu"],
            config["gradient_accumulation_steps"]) == (256, 2, 4)
    assert config["zero_optimization"]["stage"] == 2
    assert config["bf16"] == {"enabled": True}
    assert config["optimizer"] == {"type": "AdamW", "params": {
        "lr": 1e-5, "weight_decay": 0.1, "betas": [0.9, 0.95], "eps": 1e-8}}
    assert not [p for p in (tmp_path / "out").iterdir() if p.name.startswith(".")], "temp files left"


def test_same_recipe_gives_byte_identical_files(cli: Callable[..., Result], tmp_path: Path) -> None:
    written = 0
    for recipe in sorted(RECIPES.glob("*.yaml")):  # the ddp seed does not fit: refused, alike; zero1 is tight
        first = cli("compile", recipe, "-o", tmp_path / "a")
        second = cli("compile", recipe, "-o", tmp_path / "b")
        assert first.code == second.code and first.err.replace("/b/", "/a/") == second.err.replace("/b/", "/a/")
        if first.code == 0:
            written += 1
            assert (tmp_path / "a" / "ds_config.json").read_bytes() == (tmp_path / "b" / "ds_config.json").read_bytes()
    assert written == 5


def test_overrides_apply_before_validation(cli: Callable[..., Result]) -> None:
    result = cli("compile", SEED_ZERO2, "--set", "batch.global=512", "--set", "stage=3")
    assert result.code == 0, result.err
    config = json.loads(result.out)
    assert config["train_batch_size"] == 512 and config["gradient_accumulation_steps"] == 8
    assert config["zero_optimization"]["stage"] == 3
    assert config["zero_optimization"]["stage3_param_persistence_threshold"] == 40960


def test_hf_auto_keeps_auto_only_where_the_trainer_fills(cli: Callable[..., Result]) -> None:
    result = cli("compile", RECIPES / "seed-8b-32gpu-zero3.yaml", "--hf-auto")
    config = json.loads(result.out)
    assert config["train_batch_size"] == "auto"
    assert config["zero_optimization"]["stage"] == 3, "nested auto would silently mean stage 0"
    assert config["zero_optimization"]["stage3_prefetch_bucket_size"] == "auto"


def test_resolve_json_gives_value_and_provenance(cli: Callable[..., Result]) -> None:
    result = cli("resolve", SEED_ZERO2, "--format", "json")
    assert result.code == 0, result.err
    data = json.loads(result.out)
    assert data["batch.accumulation"] == {"value": 4, "from": "global / (micro × DP) = 256 / (2 × 32)"}
    assert data["parallel.dp"]["value"] == 32


def test_resolve_text_lists_every_value(cli: Callable[..., Result]) -> None:
    result = cli("resolve", SEED_ZERO2)
    assert result.code == 0
    assert any(line.split()[:2] == ["batch.global", "256"] for line in result.out.splitlines())


def test_schema_is_valid_and_validates_the_shipped_recipes(cli: Callable[..., Result]) -> None:
    result = cli("schema")
    schema = json.loads(result.out)
    jsonschema.Draft202012Validator.check_schema(schema)
    for recipe in RECIPES.glob("*.yaml"):
        jsonschema.Draft202012Validator(schema).validate(yaml.safe_load(recipe.read_text()))


def test_usage_errors_exit_2(cli: Callable[..., Result]) -> None:
    assert cli("compile").code == 2
    assert cli("compile", SEED_ZERO2, "--target", "nope").code == 2


def test_console_script_runs_as_a_module() -> None:
    done = subprocess.run([sys.executable, "-m", "distrecipe", "--version"], capture_output=True,
                          text=True, cwd=ROOT, check=False)
    assert done.returncode == 0 and "distrecipe" in done.stdout


def test_a_recipe_without_name_is_named_by_its_file_made_a_slug(cli: Callable[..., Result], tmp_path: Path) -> None:
    """As `import` does: `My Run.yaml` names the run `My-Run`, and says so; a file name
    that is a slug already needs no note."""
    text = (RECIPES / "tiny-cpu.yaml").read_text().replace("name: tiny-cpu\n", "")
    (tmp_path / "My Run.yaml").write_text(text)
    (tmp_path / "plain.yaml").write_text(text)
    compiled = cli("compile", tmp_path / "My Run.yaml", "-t", "hf", "-o", tmp_path / "out")
    assert compiled.code == 0, compiled.err
    note = 'name "My-Run" is derived from the file name "My Run", made a slug as a name must be'
    assert f"{tmp_path / 'My Run.yaml'}: note: {note}: write `name:` in the recipe to choose another" in compiled.err
    resolved = json.loads(cli("resolve", tmp_path / "My Run.yaml", "--format", "json").out)
    assert resolved["name"] == {"value": "My-Run", "from": note}
    plain = cli("resolve", tmp_path / "plain.yaml", "--format", "json")
    assert json.loads(plain.out)["name"] == {"value": "plain", "from": "the recipe file's name"}
    assert "note" not in plain.err
