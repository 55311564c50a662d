"""The engines judge lint's unknown-key verdicts (DR311, DR313, DR314, DR317, DR340, DR341,
DR349, DR352).

For made-up keys (a near-miss of a real key, a foreign word, a comment key, an
`"auto"` value) put in every section of the key tables, the engine refuses the file
exactly when lint reports a refusal about that key: DeepSpeed's `DeepSpeedConfig`,
Accelerate's config loader, and Hydra composing verl's config. A misspelling the engine
ignores is an error too (DR317, DR349: the setting never applies), so those are held
to the other half: the engine accepts the file.
"""

from __future__ import annotations

import json
import random
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from distrecipe.engines.tables import table, verl_tree
from distrecipe.judges import accelerate as accelerate_judge
from distrecipe.judges import deepspeed as deepspeed_judge
from distrecipe.lint.config import LintConfig
from distrecipe.lint.engine import lint

pytestmark = pytest.mark.slow  # imports DeepSpeed, Accelerate and verl

BATCH = {"train_batch_size": 1, "train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1}


def made_up_keys(known: list[str], rng: random.Random) -> list[tuple[str, Any]]:
    """Unknown keys for a section: a near miss of a known key, a foreign word, comments, an "auto"."""
    keys: list[tuple[str, Any]] = [("frobnicate_level", 1), ("_comment", "a note"), ("// why", "a note"),
                                   ("unknown_auto_knob", "auto")]
    if known:
        near = rng.choice(known)
        keys.append((near[:-1] if len(near) > 3 else near + "x", 1))
    return [(key, value) for key, value in keys if key not in known]


def nested(path: str, leaf: dict[str, Any]) -> dict[str, Any]:
    head, _, rest = path.partition(".")
    return {head: nested(rest, leaf) if rest else leaf} if path else leaf


def findings(name: str, text: str, world: int | None = None) -> list[Any]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / name
        path.write_text(text)
        return list(lint([path], config=LintConfig(), world=world).findings)


IGNORED_MISSPELLING = frozenset({"DR317", "DR349"})
"""Errors about a key the engine accepts and ignores: the setting it meant never applies."""


def errors_about(found: list[Any], key: str) -> list[Any]:
    """Errors saying the engine refuses `key` (a misspelling it ignores is checked apart)."""
    misspelt = [f for f in found if f.code in IGNORED_MISSPELLING and repr(key) in f.message]
    return [f for f in found if f.severity == "error" and repr(key) in f.message
            and f.code not in IGNORED_MISSPELLING] + (["ignored"] if misspelt else [])


def deepspeed_cases() -> Iterator[tuple[str, str, Any]]:
    rng = random.Random(0)
    for path, section in sorted(table("deepspeed")["sections"].items()):
        for key, value in made_up_keys(sorted(section["keys"]), rng):
            yield path, key, value


@pytest.mark.parametrize(("section", "key", "value"), list(deepspeed_cases()))
def test_deepspeed_refuses_iff_lint_errs(section: str, key: str, value: Any) -> None:
    config = {**BATCH, **nested(section, {key: value})}
    refused = not deepspeed_judge.accepts(config, world=1)
    found = findings("ds_config.json", json.dumps(config), world=1)
    errors = errors_about(found, key)
    assert (bool(errors) and "ignored" not in errors) if refused else errors in ([], ["ignored"]), (
        config, [f.message for f in found])
    assert any(repr(key) in f.message for f in found), "every unknown key is reported, at some severity"


def accelerate_cases() -> Iterator[tuple[str, str, Any]]:
    rng = random.Random(1)
    for name, section in sorted(table("accelerate")["sections"].items()):
        for key, value in made_up_keys(sorted(section["keys"]), rng):
            yield name, key, value


@pytest.mark.parametrize(("section", "key", "value"), list(accelerate_cases()))
def test_accelerate_loader_refuses_iff_lint_errs(section: str, key: str, value: Any) -> None:
    pytest.importorskip("accelerate")
    config = {"compute_environment": "LOCAL_MACHINE", "distributed_type": "MULTI_GPU", "num_processes": 2,
              **nested(section, {key: value})}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "accelerate_config.yaml"
        path.write_text(json.dumps(config))
        refused = accelerate_judge.loader_refusal(path) is not None
    found = findings("accelerate_config.yaml", json.dumps(config))
    errors = errors_about(found, key)
    assert (bool(errors) and "ignored" not in errors) if refused else errors in ([], ["ignored"]), (
        config, [f.message for f in found])


def walk(node: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    yield path, node
    if isinstance(node, dict):
        for key, value in node.items():
            yield from walk(value, (*path, key))


def verl_overrides(rng: random.Random) -> Iterator[tuple[str, str]]:
    """(config name, override line): real keys, unknown keys under mappings, under scalars,
    under empty mappings, and the same with `+`."""
    for config in ("ppo_trainer", "ppo_megatron_trainer"):
        paths = list(walk(verl_tree(config)))
        roots = ("actor_rollout_ref", "data", "trainer", "algorithm", "critic", "reward_model")
        usable = [(p, n) for p, n in paths if p and p[0] in roots]
        for path, node in rng.sample(usable, 25):
            dotted = ".".join(path)
            if not isinstance(node, dict):
                yield config, f"{dotted}=1" if isinstance(node, int) and not isinstance(node, bool) else \
                    f"{dotted}=null"
            yield config, f"{dotted}.frobnicate=1"
            yield config, f"+{dotted}.frobnicate=1" if isinstance(node, dict) else f"{dotted}x=1"
        yield config, "critic.model.fsdp_config.param_offload=True"


def verl_cases() -> list[tuple[str, str]]:
    return list(verl_overrides(random.Random(2)))


@pytest.mark.parametrize(("config", "line"), verl_cases())
def test_hydra_refuses_iff_lint_errs(judge: Any, config: str, line: str) -> None:
    """Hydra's full compose runs in the session judge's Hydra context (Hydra allows one per process)."""
    # An actor_rollout_ref key makes the script read as verl whatever else it sets.
    base = "actor_rollout_ref.actor.ppo_mini_batch_size=8" if "ppo_mini_batch_size" not in line else \
        "actor_rollout_ref.rollout.n=1"
    try:
        judge.compose_named(config, [base, line])
        refused = False
    except Exception:  # "Could not override ...", or a list index that is no number
        refused = True
    script = f"python3 -m verl.trainer.main_ppo --config-name={config} \\\n    {base} \\\n    {line}\n"
    found = [f for f in findings("run.sh", script) if f.code == "DR352"]
    assert refused == bool(found), (config, line, [f.message for f in found])
