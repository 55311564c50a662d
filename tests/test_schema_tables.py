"""The Axolotl and LLaMA-Factory key tables are what their stored schema sources say.

`scripts/schema_tables.py --check` reads the stored sources again (with `ast`, no import)
and compares; each source is the exact blob PROVENANCE.csv names; and the tables agree
with the keys and defaults the tools' models report at run time (RUNTIME_KEYS.csv).
"""

from __future__ import annotations

import csv
import hashlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

from distrecipe.engines.tables import table

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ROOT / "tests" / "corpus" / "schemas"


def test_tables_are_what_the_script_writes() -> None:
    run = subprocess.run([sys.executable, str(ROOT / "scripts" / "schema_tables.py"), "--check"],
                         capture_output=True, text=True, cwd=ROOT, timeout=120, check=False)
    assert run.returncode == 0, run.stdout + run.stderr


@pytest.mark.parametrize("tool", ["axolotl", "llamafactory"])
def test_sources_are_the_blobs_provenance_names(tool: str) -> None:
    with (SOURCES / tool / "PROVENANCE.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert rows and {row["licence"] for row in rows} == {"Apache-2.0"}
    for row in rows:
        data = (SOURCES / tool / row["file"]).read_bytes()
        blob = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
        assert re.search(rf"\bblob {blob}\b", row["notes"]), row["file"]
        assert row["commit"] == table(tool)["commit"]  # type: ignore[arg-type]


def runtime(tool: str) -> dict[str, dict[str, str]]:
    with (SOURCES / tool / "RUNTIME_KEYS.csv").open(newline="") as f:
        return {row["key"]: row for row in csv.DictReader(f)}


def test_axolotl_keys_and_defaults_match_the_model_at_run_time() -> None:
    keys = {name: entry for name, entry in table("axolotl")["keys"].items() if "alias_of" not in entry}
    found = runtime("axolotl")
    assert set(keys) == set(found)
    assert {name for name, entry in keys.items()
            if "default" in entry and repr(entry["default"])[:80] != found[name]["default"]} == set()
    assert {name for name, entry in keys.items() if entry["declared_in"] != found[name]["model"]} == set()


def test_llamafactory_keys_and_defaults_match_the_parser_at_run_time() -> None:
    keys = table("llamafactory")["keys"]
    found = {name: row for name, row in runtime("llamafactory").items() if row["source"].startswith("src/")}
    assert set(keys) == set(found)
    assert {name for name, entry in keys.items()
            if "default" in entry and repr(entry["default"])[:80] != found[name]["default"]} == set()
    transformers = {name for name, row in runtime("llamafactory").items() if not row["source"].startswith("src/")}
    hf = table("hf")
    assert transformers - set(keys) == set(hf["training_arguments"]) | set(hf["seq2seq_arguments"])
