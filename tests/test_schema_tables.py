"""The Axolotl and LLaMA-Factory key tables are what their stored schema sources say.

Every release stored under `tests/corpus/schemas/TOOL/RELEASE/` has its table
`tables/TOOL/RELEASE.json`: `scripts/schema_tables.py --check` reads the stored sources
again (with `ast`, no import) and compares; each source is the file PROVENANCE.csv names
(the git blob at its commit, the file the PyPI wheel's RECORD lists); and each table
agrees with the keys and defaults the tool's models report at run time (RUNTIME_KEYS.csv).
Lint judges a file by the release the project runs, and says when a key belongs to another.
"""

from __future__ import annotations

import csv
import hashlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

from distrecipe.engines.tables import TableEngine, release_key, releases, table_of
from distrecipe.lint.config import LintConfig
from distrecipe.lint.engine import lint

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ROOT / "tests" / "corpus" / "schemas"
TOOLS: tuple[TableEngine, ...] = ("axolotl", "llamafactory")
STORED = [(tool, folder.name) for tool in TOOLS for folder in sorted((SOURCES / tool).iterdir())
          if folder.is_dir()]
RUNTIME = [(tool, release) for tool, release in STORED if (SOURCES / tool / release / "RUNTIME_KEYS.csv").exists()]
TRANSFORMERS = "5.10.4"
"""The transformers release whose TrainingArguments rows RUNTIME_KEYS.csv holds for
LLaMA-Factory (the one installed when the rows were written, for every release)."""


def test_tables_are_what_the_script_writes() -> None:
    run = subprocess.run([sys.executable, str(ROOT / "scripts" / "schema_tables.py"), "--check"],
                         capture_output=True, text=True, cwd=ROOT, timeout=120, check=False)
    assert run.returncode == 0, run.stdout + run.stderr


@pytest.mark.parametrize("tool", TOOLS)
def test_every_stored_release_has_a_table_and_three_are_stored(tool: TableEngine) -> None:
    stored = sorted((release for name, release in STORED if name == tool), key=release_key)
    assert list(releases(tool)) == stored
    assert len(stored) >= 3


def provenance(tool: str, release: str) -> list[dict[str, str]]:
    with (SOURCES / tool / release / "PROVENANCE.csv").open(newline="") as f:
        return list(csv.DictReader(f))


@pytest.mark.parametrize(("tool", "release"), STORED)
def test_sources_are_the_files_provenance_names(tool: TableEngine, release: str) -> None:
    rows = provenance(tool, release)
    assert rows and {row["licence"] for row in rows} == {"Apache-2.0"}
    assert {row["release"] for row in rows} == {release}
    assert not [row["path"] for row in rows if "/integrations/" in row["path"]]  # another licence: never stored
    stored = {path.name for path in (SOURCES / tool / release).glob("*.py")}
    assert stored == {row["file"] for row in rows}
    found = table_of(tool, release)
    assert found["version"] == release
    for row in rows:
        data = (SOURCES / tool / release / row["file"]).read_bytes()
        blob = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
        assert re.search(rf"\bblob {blob}\b", row["notes"]), row["file"]
        assert row["commit"] or row["pypi_file"], row["file"]
        assert row["commit"] == found.get("commit", "")
        assert (row["pypi_file"], row["pypi_sha256"]) == (found.get("pypi_file", ""), found.get("pypi_sha256", ""))
        if row["pypi_file"]:  # the wheel's RECORD lists this sha256 for the file
            assert hashlib.sha256(data).hexdigest() == row["file_sha256"], row["file"]
            assert re.fullmatch(r"[0-9a-f]{64}", row["pypi_sha256"])


def runtime(tool: str, release: str) -> dict[str, dict[str, str]]:
    with (SOURCES / tool / release / "RUNTIME_KEYS.csv").open(newline="") as f:
        return {row["key"]: row for row in csv.DictReader(f)}


@pytest.mark.parametrize("release", [release for tool, release in RUNTIME if tool == "axolotl"])
def test_axolotl_keys_and_defaults_match_the_model_at_run_time(release: str) -> None:
    keys = {name: entry for name, entry in table_of("axolotl", release)["keys"].items() if "alias_of" not in entry}
    found = runtime("axolotl", release)
    assert set(keys) == set(found)
    assert {name for name, entry in keys.items()
            if "default" in entry and repr(entry["default"])[:80] != found[name]["default"]} == set()
    assert {name for name, entry in keys.items() if entry["declared_in"] != found[name]["model"]} == set()


@pytest.mark.parametrize("release", [release for tool, release in RUNTIME if tool == "llamafactory"])
def test_llamafactory_keys_and_defaults_match_the_parser_at_run_time(release: str) -> None:
    keys = table_of("llamafactory", release)["keys"]
    found = {name: row for name, row in runtime("llamafactory", release).items() if row["source"].startswith("src/")}
    assert set(keys) == set(found)
    assert {name for name, entry in keys.items()
            if "default" in entry and repr(entry["default"])[:80] != found[name]["default"]} == set()
    transformers = {name for name, row in runtime("llamafactory", release).items()
                    if not row["source"].startswith("src/")}
    assert {row["commit"] for name, row in runtime("llamafactory", release).items() if name in transformers} == {
        f"transformers {TRANSFORMERS} (installed)"}
    hf = table_of("hf", TRANSFORMERS)
    assert transformers - set(keys) == set(hf["training_arguments"]) | set(hf["seq2seq_arguments"])


def findings(tmp_path: Path, name: str, text: str, engine: TableEngine, release: str) -> list[tuple[str, str]]:
    """lint's findings on one file, with `engine` at `release` (`[tool.distrecipe] engines`)."""
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    report = lint([path], config=LintConfig(engines=((engine, release, "test"),)))
    assert not report.unusable, report.unusable
    return [(f.code, f.message) for f in report.findings]


AXOLOTL = """\
base_model: meta-llama/Llama-3.2-1B
micro_batch_size: 2
num_epochs: 1
learning_rate: 2.0e-5
fp8_config:
  recipe: rowwise
"""


def test_an_axolotl_key_of_a_later_release_is_named_as_such(tmp_path: Path) -> None:
    """`fp8_config` came with Axolotl 0.19.0 (`schemas/fp8.py`): 0.18.0 drops it, and it is
    that, not a misspelt `fsdp_config`."""
    assert "fp8_config" not in table_of("axolotl", "0.18.0")["keys"]
    assert findings(tmp_path, "train.yaml", AXOLOTL, "axolotl", "0.18.0") == [
        ("DR380", "'fp8_config' is not a key of Axolotl 0.18.0 @067b021c's config: dropped without a word; "
                  "a key of Axolotl ≥ 0.19.0; the project runs 0.18.0 (test)")]
    assert findings(tmp_path, "train.yaml", AXOLOTL, "axolotl", "0.19.0") == []


LLAMAFACTORY = """\
model_name_or_path: Qwen/Qwen3-4B
stage: sft
finetuning_type: full
per_device_train_batch_size: 1
ray_run_name: qwen3-sft
"""


def test_a_llamafactory_key_a_later_release_removed_is_named_as_such(tmp_path: Path) -> None:
    """`ray_run_name` (RayArguments) is gone from LLaMA-Factory 0.9.5's training parser."""
    assert "ray_run_name" in table_of("llamafactory", "0.9.4")["keys"]
    assert findings(tmp_path, "train.yaml", LLAMAFACTORY, "llamafactory", "0.9.4") == []
    [(code, message)] = findings(tmp_path, "train.yaml", LLAMAFACTORY, "llamafactory", "0.9.5")
    assert code == "DR385"
    assert message.startswith("'ray_run_name' is no argument of LLaMA-Factory 0.9.5 @7af90952's training parser")
    assert message.endswith("; removed in LLaMA-Factory 0.9.5 (last in 0.9.4); the project runs 0.9.5 (test)")
