"""Write the SkyPilot task table lint judges task files with, from the installed SkyPilot.

    .venv-skypilot/bin/python scripts/skypilot_tables.py           # (re)write tables/skypilot/RELEASE.json
    .venv-skypilot/bin/python scripts/skypilot_tables.py --check   # exit 1 when the stored table differs

SkyPilot pins click<8.2, which the project's venv cannot hold, so it lives in its own
venv (`make skypilot`) and this script runs under that interpreter, with HOME set to a
scratch directory (importing sky writes `~/.sky/`). What `sky launch` checks of a task
file before it asks any cloud is copied from SkyPilot's own objects, never transcribed:

* `task`: `sky.utils.schemas.get_task_schema()`, the JSON Schema `Task.from_yaml_config`
  validates the whole file with (SkyPilot's validator: Draft 7 with its
  `case_insensitive_enum` and `case_sensitive_enum` keywords, `sky/utils/validator.py`);
* `resources`: `get_resources_schema()`, which `Resources.from_yaml_config` validates the
  `resources` section with, after renaming the aliases in
* `resource_aliases`: `sky.resources.RESOURCE_CONFIG_ALIASES` (`gpus` → `accelerators`).

What the schemas admit and `Task.from_yaml_config` still refuses (an `envs` value left
null) is stated beside the reader that applies the table (`distrecipe.engines.skypilot`).
Output is sorted, indented JSON ending in a newline: the same SkyPilot gives the same bytes.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TABLES = ROOT / "distrecipe" / "engines" / "tables" / "skypilot"


def build() -> dict[str, Any]:
    import sky
    from sky import resources
    from sky.utils import schemas

    return {
        "version": sky.__version__,
        "source": "sky/utils/schemas.py (get_task_schema, get_resources_schema), "
                  "sky/resources.py (RESOURCE_CONFIG_ALIASES)",
        "task": schemas.get_task_schema(),
        "resources": schemas.get_resources_schema(),
        "resource_aliases": dict(resources.RESOURCE_CONFIG_ALIASES),
    }


def render(table: dict[str, Any]) -> str:
    return json.dumps(table, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--check", action="store_true", help="compare with the stored table, write nothing")
    args = parser.parse_args(argv)
    table = build()
    path = TABLES / f"{table['version']}.json"
    text = render(table)
    if args.check:
        if not path.is_file():
            print(f"{path.relative_to(ROOT)} is missing: SkyPilot {table['version']} has no table",
                  file=sys.stderr)
            return 1
        if path.read_text(encoding="utf-8") != text:
            stored = json.loads(path.read_text(encoding="utf-8"))
            changed = sorted(key for key in set(stored) | set(table) if stored.get(key) != table.get(key))
            print(f"{path.relative_to(ROOT)} differs from SkyPilot {table['version']} in: "
                  f"{', '.join(changed)}", file=sys.stderr)
            return 1
        return 0
    TABLES.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
