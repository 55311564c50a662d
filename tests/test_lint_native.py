"""A recipe's `native:` sections are linted like the native files they are merged into,
with positions inside the recipe (`distrecipe/lint/native.py`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from distrecipe.lint.config import LintConfig
from distrecipe.lint.engine import lint

RECIPE = """recipe: 1
model: {params: 30.0e9}   # 70B: its rollout copy (70 GB per GPU over TP 2) outgrows the default share, DR370
cluster: {nodes: 4, gpus_per_node: 8, gpu_memory: 80GB}
strategy: fsdp
stage: 3
batch: {micro: 2, global: 256}
rl: {rollout_n: 4, prompts_per_step: 128}
native:
"""


def found(write: Callable[[str, str], Path], native: str) -> list[tuple[int, int, str]]:
    report = lint([write("recipe.yaml", RECIPE + native)], config=LintConfig())
    return [(f.where.line, f.where.col, f.code) for f in report.findings if f.where is not None]


def test_verl_lines_point_at_the_key_quoted_or_not_and_plus_adds(write: Callable[[str, str], Path]) -> None:
    native = ('  verl:\n'
              '    - "critic.model.fsdp_config.param_offload=True"\n'
              "    - +critic.model.new_knob=1\n"
              "    - actor_rollout_ref.actor.clip_ratioo=0.2\n")
    assert found(write, native) == [(10, 8, "DR352"), (12, 7, "DR352")]


def test_flow_style_lines_and_accelerate_keys(write: Callable[[str, str], Path]) -> None:
    """Accelerate refuses any unknown top-level key, a comment too; no `distributed_type`
    in the section is no finding (compile writes it)."""
    native = ("  verl: [trainer.total_epochs=2, trainer.no_such=1]\n"
              "  accelerate: {_comment: why, fsdp_config: {fsdp_sync_module_state: true}}\n")
    assert found(write, native) == [(9, 34, "DR352"), (10, 16, "DR341"), (10, 45, "DR349")]


def test_whole_file_rules_do_not_run_on_a_section(write: Callable[[str, str], Path]) -> None:
    """A section is not a whole ds_config: no batch size there is not DR104."""
    assert found(write, "  deepspeed: {zero_optimization: {sub_group_size: 1000000000}}\n") == []
