"""Strings stay strings: YAML 1.1's readings of plain scalars, where the recipe expects text."""

from __future__ import annotations

import contextlib

import pytest

from distrecipe.diff import _sizes_model
from distrecipe.errors import RecipeError
from distrecipe.launch.k8s import NodeLaunch, node_command
from distrecipe.translator.load import SetItem, recipe_from_text, split_set
from distrecipe.translator.resolve import resolve

BASE = ("recipe: 1\nmodel: {params: 1.0e9, hidden_size: 2048, layers: 16, heads: 16}\n"
        "cluster: {nodes: 1, gpus_per_node: 8, gpu_memory: 80GB}\nstrategy: zero\nstage: 2\n"
        "batch: {micro: 2, accumulation: auto, global: 64}\n")


@pytest.mark.parametrize(("written", "text"), [
    ("time: 12:00:00", "12:00:00"),     # base 60: the number 43200
    ("time: 1:00:00", "1:00:00"),
    ("time: 30", "30"),                 # a number where text is expected
    ("time: 2-00:00:00", "2-00:00:00"),
    ("time: 1-12", "1-12"),
    ("partition: no", "no"),            # the boolean false
    ("partition: on", "on"),
    ("account: 0755", "0755"),          # the octal number 493
])
def test_text_is_read_back_as_written_in_the_file_and_from_set(written: str, text: str) -> None:
    key, _, value = written.partition(": ")
    recipe = recipe_from_text(BASE + f"launch:\n  slurm: {{{written}}}\n")
    assert getattr(recipe.launch.slurm, key) == text
    again = recipe_from_text(BASE, overrides=[f"launch.slurm.{key}={value}"])
    assert getattr(again.launch.slurm, key) == text


def test_a_name_and_arguments_written_as_dates_and_numbers_stay_text() -> None:
    recipe = recipe_from_text(BASE + "name: 2024-01-01\nlaunch: {args: [--epochs, 30, --resume, no]}\n")
    assert recipe.name == "2024-01-01"
    assert recipe.launch.args == ("--epochs", "30", "--resume", "no")


def test_a_boolean_where_a_boolean_is_meant_stays_one() -> None:
    assert recipe_from_text(BASE + "activation_checkpointing: on\n").activation_checkpointing == "full"


@pytest.mark.parametrize(("written", "reading"), [
    ("batch: {micro: 010, accumulation: auto, global: 64}", "the octal number 8"),
    ("batch: {micro: 1:30, accumulation: auto, global: 64}", "the base-60 number 90"),
])
def test_a_number_yaml_reads_in_another_base_is_refused_saying_how(written: str, reading: str) -> None:
    with pytest.raises(RecipeError) as caught:
        recipe_from_text(BASE.replace("batch: {micro: 2, accumulation: auto, global: 64}", written), "r.yaml")
    assert reading in caught.value.message
    assert (caught.value.where.line, caught.value.where.col) == (6, 16)  # type: ignore[union-attr]


@pytest.mark.parametrize(("item", "split"), [
    ("batch.global=512", SetItem("batch.global", ("batch", "global"), "512")),
    ("batch.micro=", SetItem("batch.micro", ("batch", "micro"), "")),  # null
    ("launch.args=[--lr=1, x]", SetItem("launch.args", ("launch", "args"), "[--lr=1, x]")),  # the first `=`
    (" model . params\t=8e9", SetItem(" model . params\t", ("model", "params"), "8e9")),
    ("mod el.params=8e9", SetItem("mod el.params", ("mod el", "params"), "8e9")),
    ("model.params", None),
    (" =1", None),
])
def test_a_set_item_splits_at_its_first_equals_into_a_recipe_key_and_value_text(
        item: str, split: SetItem | None) -> None:
    assert split_set(item) == split


@pytest.mark.parametrize(("item", "sized"), [
    ("model.params\t=8e9", True),   # the old reader in diff kept the tab, so missed the key load sets
    ("mod el.params=8e9", False),   # and removed the inner space, so found a key load refuses
    ("model.params", False),        # and took an item without `=` as one
    (" model.params = 8e9", True),
])
def test_every_reader_of_set_reads_the_key_load_sets(item: str, sized: bool) -> None:
    assert _sizes_model([item]) is sized
    applied = None
    with contextlib.suppress(RecipeError):
        applied = recipe_from_text(BASE, overrides=[item]).model.params
    assert (applied == 8e9) is sized


def test_the_k8s_settings_stay_out_of_each_nodes_command_however_spaced() -> None:
    """The old filter wanted `launch.k8s.` at the very start of the item."""
    plan = resolve(recipe_from_text(BASE))
    items = (" launch.k8s.image=x", "launch . k8s . kind=trainjob", "batch.global=64")
    command = node_command(plan, "python3", NodeLaunch(recipe="r.yaml", overrides=items))
    assert [word for word in command if "=" in word] == ["batch.global=64"]


@pytest.mark.parametrize(("written", "key", "column"), [
    ('offload: {optimizer: nvme, nvme_path: "/nvme/\\ud800"}\n', "offload.nvme_path", 39),
    ('launch: {args: [--tag, "\\udfff"]}\n', "launch.args[1]", 24),
])
def test_a_lone_surrogate_is_refused_where_it_is_written(written: str, key: str, column: int) -> None:
    """YAML's `\\ud800` escape gives text no UTF-8 file can hold; every recipe string is
    written somewhere, so it is refused at its key instead of crashing the writer."""
    with pytest.raises(RecipeError) as caught:
        recipe_from_text(BASE + written, "r.yaml")
    assert str(caught.value).startswith(f"r.yaml:7:{column}: {key} holds a lone surrogate")
