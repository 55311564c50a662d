"""SkyPilot task files as `sky launch` reads them before it asks any cloud.

`sky launch task.yaml` loads each document with `Task.from_yaml_config` (through
`dag_utils.load_chain_dag_from_yaml`), which, in this order:

1. turns the keys and non-null values of `envs` and `secrets` into strings (`MAX_JOBS: 4`
   is `"4"`), drops the top-level keys whose value is null, and validates the task with
   SkyPilot's task schema (a Draft 7 validator with SkyPilot's `case_insensitive_enum` and
   `case_sensitive_enum` keywords: `sky/utils/validator.py`);
2. refuses an `envs` value left null ("Environment variable 'HF_TOKEN' is None. Please
   set a value for it in task YAML or with --env flag": `sky/task.py`, SkyPilot 0.14.1),
   which the schema itself admits, for `--env` to fill at launch;
3. hands `resources` to `Resources.from_yaml_config`, which renames the aliases (`gpus` is
   `accelerators`; both at once is refused) in it and in each `any_of`/`ordered` choice,
   sets `hooks` aside and validates the rest with the resources schema.

The schemas and the aliases are the table `tables/skypilot/RELEASE.json`, copied from the
installed SkyPilot by `scripts/skypilot_tables.py` (SkyPilot lives in a venv of its own).
`refusals` applies all three steps and reports every refusal, where SkyPilot stops at
the first.
"""

from __future__ import annotations

import copy
import difflib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from distrecipe.source import KeyPath

NULL_ENV = ("Environment variable {key!r} is None. Please set a value for it in task YAML or with --env "
            "flag. To set it to be empty, use an empty string ({key}: \"\" in task YAML or --env {key}=\"\" "
            "in CLI).")
"""`Task.from_yaml_config`'s refusal of an env left null (SkyPilot 0.14.1, `sky/task.py`)."""


@dataclass(frozen=True, slots=True)
class Refusal:
    """One thing `sky launch` refuses: where (a key path of the task) and SkyPilot's words."""

    path: KeyPath
    message: str
    key: bool = False
    """The refusal is about the key itself (an unknown or misspelt field, an env's name)."""


@cache
def table() -> dict[str, Any]:
    """The newest stored SkyPilot table (SkyPilot is pinned to one release: pyproject's extra)."""
    folder = resources.files("distrecipe.engines.tables").joinpath("skypilot")
    names = sorted((entry.name for entry in folder.iterdir() if entry.name.endswith(".json")),
                   key=lambda name: tuple(int(part) for part in name.removesuffix(".json").split(".")
                                          if part.isdigit()))
    data: dict[str, Any] = json.loads(folder.joinpath(names[-1]).read_text(encoding="utf-8"))
    return data


def label() -> str:
    return f"SkyPilot {table()['version']}"


def task_keys() -> frozenset[str]:
    """A task's top-level keys (the task schema's properties)."""
    return frozenset(table()["task"]["properties"])


def refusals(data: dict[str, Any]) -> list[Refusal]:
    """What `sky launch` refuses in one task document (see the module's docstring)."""
    config = {key: value for key, value in data.items() if value is not None}
    for field in ("envs", "secrets"):
        value = config.get(field)
        if isinstance(value, dict):
            config[field] = {str(k): None if v is None else _text(v) for k, v in value.items()}
        elif field == "secrets" and isinstance(value, list):
            config[field] = [_text(item) for item in value]
    found = list(_schema_refusals(table()["task"], config, (), "task"))
    envs = config.get("envs")
    if isinstance(envs, dict):
        found += [Refusal(("envs", key), NULL_ENV.format(key=key), key=True)
                  for key, value in envs.items() if value is None]
    if isinstance(config.get("resources"), dict):
        found += _resources(copy.deepcopy(config["resources"]))
    return found


def _text(value: Any) -> str:
    """`str(value)` as SkyPilot writes it (Python's: `True`, `4`, `0.5`)."""
    return str(value)


def _resources(config: dict[str, Any]) -> list[Refusal]:
    found = []
    aliases: dict[str, str] = table()["resource_aliases"]
    choices = [(key, index, item) for key in ("any_of", "ordered") if isinstance(config.get(key), list)
               for index, item in enumerate(config[key]) if isinstance(item, dict)]
    for prefix, section in [((), config), *(((key, index), item) for key, index, item in choices)]:
        for alias, canonical in aliases.items():
            if alias in section and canonical in section:
                found.append(Refusal(("resources", *prefix, alias),
                                     f"Cannot specify both {alias} and {canonical} in config.", key=True))
            elif alias in section:
                section[canonical] = section.pop(alias)
    config.pop("hooks", None)
    config = {key: value for key, value in config.items() if value is not None}
    return found + list(_schema_refusals(table()["resources"], config, ("resources",), "resources"))


def _schema_refusals(schema: dict[str, Any], config: dict[str, Any], prefix: KeyPath,
                     what: str) -> Iterator[Refusal]:
    """Every error of SkyPilot's validator, worded as `common_utils.validate_schema` words
    the first (an unknown field gets its did-you-mean; a branch of `anyOf`/`oneOf` its
    deepest error), each at its key path under `prefix`."""
    import jsonschema

    errors = sorted(_validator()(schema).iter_errors(config), key=lambda e: [str(p) for p in e.absolute_path])
    for error in errors:
        path = (*prefix, *error.absolute_path)
        if error.validator == "additionalProperties" and isinstance(error.instance, dict):
            known = sorted((error.schema.get("properties") or {}) if isinstance(error.schema, dict) else {})
            patterns = (error.schema.get("patternProperties") or {}) if isinstance(error.schema, dict) else {}
            for field in error.instance:
                if field in known or any(_matches(pattern, str(field)) for pattern in patterns):
                    continue
                if tuple(error.schema_path) == ("properties", "envs", "additionalProperties"):
                    said = (f"Invalid {what} YAML: The `envs` field contains invalid keys: {field!r} does "
                            f"not match any of the regexes: {', '.join(map(repr, patterns))}")
                else:
                    close = difflib.get_close_matches(str(field), known, 1)
                    said = (f"Invalid {what} YAML: Instead of {field!r}, did you mean {close[0]!r}?" if close
                            else f"Invalid {what} YAML: Found unsupported field {field!r}.")
                yield Refusal((*path, field), said, key=True)
            continue
        best = jsonschema.exceptions.best_match([error])
        where = (*prefix, *best.absolute_path)
        message = best.message.replace("type 'object'", "type 'dict'")
        yield Refusal(where, f"Invalid {what} YAML: {message}")


def _matches(pattern: str, text: str) -> bool:
    import re

    return re.search(pattern, text) is not None


@cache
def _validator() -> Any:
    """SkyPilot's validator class: Draft 7 with its two enum keywords (`sky/utils/validator.py`)."""
    import jsonschema

    def case_insensitive_enum(validator: Any, enums: list[str], instance: Any, schema: Any) -> Iterator[Any]:
        if not isinstance(instance, str) or instance.lower() not in [enum.lower() for enum in enums]:
            yield jsonschema.ValidationError(f"{instance!r} is not one of {enums!r}")

    def case_sensitive_enum(validator: Any, enums: list[str], instance: Any, schema: Any) -> Iterator[Any]:
        if instance not in enums:
            yield jsonschema.ValidationError(f"{instance!r} is not one of {enums!r}")

    return jsonschema.validators.extend(jsonschema.Draft7Validator, validators={  # type: ignore[no-untyped-call]
        "case_insensitive_enum": case_insensitive_enum, "case_sensitive_enum": case_sensitive_enum})
