"""Hydra's override grammar read once (`overrides.split_override`), with Hydra's own
parser as the judge, and every reader of an override line (`native.verl`, a script, an
override file, a user's argument after `--`) reading `~key` as Hydra does: a deletion."""

from __future__ import annotations

import re

import pytest

from distrecipe.engines.hydra import overrides
from distrecipe.engines.platforms import verl_overrides
from distrecipe.engines.shell import commands
from distrecipe.errors import LaunchError, RecipeError
from distrecipe.launch.handoff import merge_verl
from distrecipe.overrides import OVERRIDE_PATTERN, OverrideText, split_override
from distrecipe.recipe import recipe_values
from distrecipe.translator import verl
from distrecipe.translator.carry import native_findings
from distrecipe.translator.load import recipe_from_text
from distrecipe.translator.native import verl_pairs
from distrecipe.translator.resolve import resolve

LINES: list[tuple[str, tuple[str, str, str | None] | None]] = [
    ("a.b=1", ("", "a.b", "1")),
    ("a.b=", ("", "a.b", "")),  # Hydra: the empty string
    ("+a.c=2", ("+", "a.c", "2")),
    ("++a.b='x=y'", ("++", "a.b", "'x=y'")),  # the first `=` ends the key
    ("~a.b", ("~", "a.b", None)),  # deletes whatever a.b holds
    ("~a.b=0", ("~", "a.b", "0")),  # deletes a.b where it holds 0
    ("~a.b=", ("~", "a.b", "")),
    ("a-b.c=1", ("", "a-b.c", "1")),
    ("a.0.b=1", ("", "a.0.b", "1")),
    ("hydra/launcher=basic", ("", "hydra/launcher", "basic")),
    ("model@actor=x", ("", "model@actor", "x")),
    ("a.b", None),  # Hydra: "missing EQUAL"
    ("+a.b", None),
    ("~~a.b", None),  # one prefix at most: the old override-file reader and the schema took these
    ("+~a.b=1", None),
    ("~+a.b=1", None),
    (" a.b=1", None),
    ("a.b =1", None),
    ("0a=1", None),
    ("--config-name=x", None),
]


@pytest.mark.parametrize(("line", "split"), LINES)
def test_an_override_splits_into_prefix_key_and_value_text(
        line: str, split: tuple[str, str, str | None] | None) -> None:
    assert split_override(line) == (None if split is None else OverrideText(*split))


@pytest.mark.parametrize(("line", "split"), LINES)
def test_the_split_is_hydras(line: str, split: tuple[str, str, str | None] | None) -> None:
    """Hydra reads the line iff `split_override` does, as the same kind of override of the same key."""
    parser = pytest.importorskip("hydra.core.override_parser.overrides_parser").OverridesParser.create()
    errors = pytest.importorskip("hydra.errors")
    try:
        parsed = parser.parse_override(line)
    except errors.HydraException:
        assert split is None
        return
    assert split is not None
    kinds = {"CHANGE": "", "ADD": "+", "FORCE_ADD": "++", "DEL": "~"}
    package = "" if parsed.package is None else f"@{parsed.package}"
    assert (kinds[parsed.type.name], parsed.key_or_group + package) == split[:2]
    assert (parsed.value() is None) == (split[2] is None) or split[2] == "null"


@pytest.mark.parametrize(("line", "split"), LINES)
def test_the_recipe_schema_admits_exactly_the_lines_the_grammar_reads(
        line: str, split: tuple[str, str, str | None] | None) -> None:
    assert (re.search(OVERRIDE_PATTERN, line) is not None) == (split is not None)


def test_a_script_and_an_override_file_read_the_same_overrides() -> None:
    """The old override-file reader wanted `=` after every key, so it missed `~key`."""
    lines = ["trainer.nnodes=1", "~trainer.val_generations_to_log", "+trainer.extra=2", "++data.seed=3",
             "~trainer.logger=console"]
    script = "python3 -m verl.trainer.main_ppo \\\n  " + " \\\n  ".join(lines) + "\n"

    def read(text: str, file: str) -> list[tuple[str, str, str | None]]:
        return [(item.prefix, item.key, item.value) for item in overrides(text, file)]

    expected = [tuple(split) for line in lines if (split := split_override(line)) is not None]
    assert read(script, "run.sh") == read("\n".join(lines) + "\n", "verl_overrides.txt") == expected
    (item,) = [item for item in overrides("\n".join(lines), "o.txt") if item.prefix == "~" and item.value is None]
    assert (item.key_at.line, item.key_at.col) == (2, 2)


RL = """recipe: 1
model: {}
cluster: {nodes: 1, gpus_per_node: 8}
strategy: fsdp
batch: {micro: 2, accumulation: 4}
rl: {rollout_n: 4, prompts_per_step: 16}
native:
  verl:
"""


def test_every_reader_of_native_verl_reads_a_deletion_alike() -> None:
    """`~key` deletes `key`. Before one grammar, the schema refused `~key`, `recipe_values`
    listed `native.verl.~key`, the conflict check looked up `~key` (so it never matched a
    decided key), and carry named `key`."""
    lines = ["~trainer.val_generations_to_log", "~trainer.logger=console", "+trainer.extra=1"]
    plan = resolve(recipe_from_text(RL + "".join(f"    - {line}\n" for line in lines)))
    assert {key: value for key, value in recipe_values(plan.recipe).items() if key.startswith("native.")} == {
        "native.verl.trainer.val_generations_to_log": None, "native.verl.trainer.logger": None,
        "native.verl.trainer.extra": "1"}
    assert list(verl_pairs(plan.recipe.native.verl)) == [
        ("~", "trainer.val_generations_to_log", None), ("~", "trainer.logger", "console"),
        ("+", "trainer.extra", 1)]
    (named,) = native_findings(plan, ("hf",), "hf")
    assert named.message.endswith("(native.verl: trainer.val_generations_to_log, trainer.logger, trainer.extra)")
    written = verl.overrides_text(plan).splitlines()
    assert written[-3:] == lines  # a bare deletion is written back bare
    assert "val_generations_to_log" not in verl.nested(plan)["trainer"]
    assert verl.nested(plan)["trainer"]["extra"] == 1


@pytest.mark.parametrize("line", ["~trainer.nnodes", "~trainer.nnodes=1", "~actor_rollout_ref.rollout.n=4"])
def test_deleting_a_key_the_recipe_decides_is_refused(line: str) -> None:
    """Even where the value named is the recipe's: the key is deleted, not set."""
    with pytest.raises(RecipeError, match="contradicts the recipe's"):
        resolve(recipe_from_text(RL + f"    - {line}\n"))


def test_a_users_deletion_of_an_emitted_key_is_an_override() -> None:
    """The old launch reader skipped `~key` (no `=`), so verl silently lost the recipe's
    value, and read `~key=1` as setting the key to 1."""
    emitted = ["trainer.nnodes=1", "data.seed=3"]
    for word in ("~trainer.nnodes", "~trainer.nnodes=1"):
        with pytest.raises(LaunchError, match=r"program argument ~trainer\.nnodes \(deletes it\) contradicts"):
            merge_verl(emitted, [word], allow_override=False)
        merged = merge_verl(emitted, [word], allow_override=True)
        assert merged.args == ("data.seed=3", word)
        assert [(o.argument, o.recipe, o.given) for o in merged.overridden] == [
            ("~trainer.nnodes", "1", "(deletes it)")]
    assert merge_verl(emitted, ["+trainer.nnodes=1"], allow_override=False).args == ("data.seed=3", "+trainer.nnodes=1")


def test_a_platform_jobs_verl_command_reads_no_count_from_a_deletion() -> None:
    (words,) = commands("python3 -m verl.trainer.main_ppo ~trainer.nnodes=2 ++trainer.n_gpus_per_node=8\n", "j.sh")
    found = verl_overrides(words)
    assert found is not None and sorted(found) == ["trainer.n_gpus_per_node"]
    assert found["trainer.n_gpus_per_node"].value == "8"
