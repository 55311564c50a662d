"""`distrecipe diff`: semantic changes with their impact (engine-view traffic), in three formats."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings

from distrecipe.commands.diff import FORMATS
from distrecipe.diff import diff
from distrecipe.engines.tables import label
from distrecipe.job import plan_values
from distrecipe.translator.load import recipe_from_text
from distrecipe.translator.resolve import resolve
from tests import diff_sweep
from tests.conftest import RECIPES, Result
from tests.strategies import recipe_documents, to_yaml

REAL = Path(__file__).parent / "corpus" / "real"
ZERO2, ZERO3 = RECIPES / "seed-8b-32gpu-zero2.yaml", RECIPES / "seed-8b-32gpu-zero3.yaml"


def test_stage_change_is_priced_as_in_the_seed(cli: Callable[..., Result]) -> None:
    result = cli("diff", ZERO2, ZERO3)
    assert result.code == 0, result.err
    lines = result.out.splitlines()
    assert lines[0] == "stage: 2 → 3"
    assert "  per-GPU model state 19.5 GB → 4 GB (−15.5 GB)" in lines
    # Traffic as the engine sends it (one view everywhere; the seed's formula is `plan`'s alone):
    # DeepSpeed ZeRO-2 all-reduces on each of the 4 micro-steps, ZeRO-3 gathers and reduces on each.
    assert "  traffic per GPU per step (engine view) 139.5 GB → 178.25 GB (+38.75 GB)" in lines


def test_native_configs_diff_key_by_key_and_are_priced_with_a_model(cli: Callable[..., Result],
                                                                     tmp_path: Path) -> None:
    for name, recipe, sets in (("old", ZERO2, []), ("new", ZERO2, ["--set", "batch.global=512", "--set", "stage=3"])):
        assert cli("compile", recipe, *sets, "-o", tmp_path / name).code == 0
    old, new = tmp_path / "old" / "ds_config.json", tmp_path / "new" / "ds_config.json"
    result = cli("diff", old, new, "--world", "32", "--nodes", "4", "--format", "markdown",
                 "--set", "model.params=8e9")
    assert result.code == 0, result.err
    default = f"({label('deepspeed')} default)"
    assert result.out.splitlines()[4:9] == [
        "| `train_batch_size` | 256 | 512 |",
        "| `gradient_accumulation_steps` | 4 | 8 |",
        "| `zero_optimization.stage` | 2 | 3 |",
        f"| `zero_optimization.stage3_prefetch_bucket_size` | 50000000 {default} | 15099494 |",
        f"| `zero_optimization.stage3_param_persistence_threshold` | 100000 {default} | 40960 |",
    ]
    assert "- per-GPU model state 19.5 GB → 4 GB (−15.5 GB)" in result.out
    unpriced = cli("diff", old, new)
    assert unpriced.out.endswith("\nimpact not priced: the model size is not given (`--set model.params=8e9`)\n")


def test_an_unstated_key_is_the_engines_default_or_not_stated(cli: Callable[..., Result]) -> None:
    """The HF Trainer's two templates: "auto" stays "auto", an lr only one side states is
    not compared with a recipe default, a key at its DeepSpeed default is no change."""
    result = cli("diff", REAL / "deepspeed" / "huggingface__transformers__tests__deepspeed__ds_config_zero2.json",
                 REAL / "deepspeed" / "huggingface__transformers__tests__deepspeed__ds_config_zero3.json")
    lines = result.out.splitlines()
    default = f"({label('deepspeed')} default)"
    for line in ("fp16.enabled: auto → true", f"bf16.enabled: auto → false {default}",
                 "optimizer.params.lr: auto → 3e-05", "zero_optimization.stage: 2 → 3",
                 "gradient_accumulation_steps: auto → not stated",
                 f"zero_optimization.offload_param.device: none {default} → cpu",
                 f"zero_optimization.stage3_param_persistence_threshold: 100000 {default} → 0"):
        assert line in lines
    assert not [line for line in lines if "stage3_max_live_parameters" in line or line.startswith("batch.")]


def test_a_value_in_neither_file_is_never_invented(cli: Callable[..., Result],
                                                   write: Callable[[str, str], Path]) -> None:
    old = write("old.json", '{"train_batch_size": 8, "optimizer": {"type": "AdamW", "params": {"lr": 1e-5}}}')
    new = write("new.json", '{"train_batch_size": 8, "zero_optimization": {"stage": 2}}')
    data = json.loads(cli("diff", old, new, "--format", "json").out)
    assert data["changes"] == [
        {"key": "optimizer.type", "old": "AdamW", "new": None, "old_source": None, "new_source": "not stated"},
        {"key": "optimizer.params.lr", "old": 1e-5, "new": None, "old_source": None, "new_source": "not stated"},
        {"key": "zero_optimization.stage", "old": 0, "new": 2,
         "old_source": f"{label('deepspeed')} default", "new_source": None},
    ]
    assert data["impact"] is None and data["unpriced"].startswith("the model size is not given")


def test_spellings_the_engine_reads_as_one_are_no_change(cli: Callable[..., Result],
                                                         write: Callable[[str, str], Path]) -> None:
    ds_old = write("a.json", '{"zero_optimization": {"stage": 3, "stage3_prefetch_bucket_size": 5e8, '
                             '"offload_param": {"device": "none"}, "overlap_comm": null}, "_comment": "x"}')
    ds_new = write("b.json", '{"zero_optimization": {"stage": 3, "prefetch_bucket_size": 500000000}, '
                             '"fp16": {"enabled": false}}')
    result = cli("diff", ds_old, ds_new)
    assert result.out == f"{ds_old} and {ds_new} describe the same job\nnote: comment keys not compared: _comment\n"
    acc_old = write("a.yaml", "distributed_type: FSDP\nfsdp_config:\n  fsdp_offload_params: true\n"
                              "  fsdp_version: 2\n  fsdp_reshard_after_forward: true\n")
    acc_new = write("b.yaml", "distributed_type: FSDP\nfsdp_config:\n  offload_params: 'true'\n  version: 2\n")
    assert cli("diff", acc_old, acc_new).out.endswith("describe the same job\n")
    flipped = write("c.yaml", "distributed_type: FSDP\nfsdp_config:\n  fsdp_version: 2\n"
                              "  fsdp_reshard_after_forward: false\n")
    assert cli("diff", acc_old, flipped).out.splitlines()[:2] == [
        f"fsdp_config.fsdp_offload_params: true → false ({label('accelerate')} default)",
        "fsdp_config.fsdp_reshard_after_forward: true → false",
    ]


def test_verl_scripts_diff_against_the_composed_config(cli: Callable[..., Result]) -> None:
    verl = REAL / "verl"
    result = cli("diff", verl / "volcengine__verl__examples__grpo_trainer__run_qwen2-7b.sh",
                 verl / "volcengine__verl__examples__grpo_trainer__run_qwen2-7b_seq_balance.sh")
    lines = result.out.splitlines()
    default = f"({label('verl')} default)"
    assert f"algorithm.adv_estimator: gae {default} → grpo" in lines
    assert f"actor_rollout_ref.actor.use_dynamic_bsz: false {default} → true" in lines
    assert "actor_rollout_ref.actor.ppo_micro_batch_size: 128 → not stated" in lines
    assert not [line for line in lines if line.startswith("actor_rollout_ref.rollout.n:")]


def test_lint_corpus_pair(cli: Callable[..., Result]) -> None:
    dr320 = Path(__file__).parent / "lint_corpus" / "DR320"
    result = cli("diff", dr320 / "stage2-offload-param" / "ds_config.json",
                 dr320 / "default-stage-offload-param" / "ds_config.json")
    default = f"({label('deepspeed')} default)"
    assert result.out.splitlines()[:7] == [
        "train_batch_size: 256 → 32",
        "train_micro_batch_size_per_gpu: 1 → 4",
        f"bf16.enabled: true → false {default}",
        f"zero_optimization.stage: 2 → 0 {default}",
        f"zero_optimization.offload_optimizer.device: cpu → none {default}",
        "zero_optimization.offload_param.device: cpu → nvme",
        "zero_optimization.offload_param.nvme_path: not stated → /local_nvme",
    ]


def test_mixed_kinds_borrow_what_the_native_side_cannot_say(cli: Callable[..., Result], tmp_path: Path) -> None:
    assert cli("compile", ZERO2, "-o", tmp_path).code == 0
    result = cli("diff", ZERO2, tmp_path / "ds_config.json", "--world", "32", "--nodes", "4", "--format", "json")
    data = json.loads(result.out)
    assert data["changes"] == [] and data["impact"] is None
    assert data["notes"][0].endswith(f"does not state model.params, model.layers, model.heads, model.kv_heads, "
                                     f"model.intermediate_size, model.vocab, model.attention, model.layer_cls, "
                                     f"cluster.device, cluster.gpu_memory, batch.seq_len, activation_checkpointing: "
                                     f"taken from {ZERO2}")
    same = cli("diff", ZERO2, tmp_path / "ds_config.json", "--world", "32", "--nodes", "4")
    assert same.out.startswith(f"{ZERO2} and {tmp_path / 'ds_config.json'} describe the same job\n")


def test_json_impact_and_determinism(cli: Callable[..., Result]) -> None:
    first = cli("diff", ZERO2, ZERO3, "--format", "json")
    assert first == cli("diff", ZERO2, ZERO3, "--format", "json")
    impact = json.loads(first.out)["impact"]
    assert impact["memory_bytes"] == [19.5e9, 4e9] and impact["traffic_bytes"] == pytest.approx([139.5e9, 178.25e9])
    assert impact["label"] == ["ZeRO-2", "ZeRO-3"]


def test_bad_side_is_one_line(cli: Callable[..., Result], write: Callable[[str, str], Path]) -> None:
    broken = write("bad.yaml", "recipe: 1\nstrategy: zero\n  stage: 2\n")
    result = cli("diff", ZERO2, broken)
    assert result.code == 2
    assert len(result.err.strip().splitlines()) == 1 and result.err.startswith(f"{broken}:3:")
    # A native side borrows the model from the other side, even when that is malformed.
    native = write("ds.json", '{"train_batch_size": 8, "zero_optimization": {"stage": 2}}')
    listed = write("list.yaml", "recipe: 1\nmodel: [1]\n")
    result = cli("diff", native, listed, "--world", "8")
    assert result.code == 2 and result.err.startswith(f"{listed}:") and "internal error" not in result.err


@settings(max_examples=40, deadline=None)
@given(a=recipe_documents(), b=recipe_documents())
def test_any_two_recipes_diff_in_every_format(a: dict[str, Any], b: dict[str, Any]) -> None:
    plans = [resolve(recipe_from_text(to_yaml(doc), f"{name}.yaml")) for name, doc in (("a", a), ("b", b))]
    result = diff(*plans)
    before, after = plan_values(plans[0]), plan_values(plans[1])
    assert {c.key for c in result.changes} == {k for k in before if k != "name" and before[k] != after.get(k)}
    assert (result.impact is None) == (not result.changes)
    for render in FORMATS.values():
        assert render(result, "a.yaml", "b.yaml").endswith("\n")
    assert diff(plans[0], plans[0]).changes == []


def test_markdown_keeps_every_hostile_key_and_value_inside_its_cell(cli: Callable[..., Result],
                                                                   tmp_path: Path) -> None:
    """A `|`, line break, backtick or emphasis in a file name, key or value is data: a
    GFM parser (markdown-it, as GitHub renders a comment) reads back exactly one row per
    change, three cells each, holding the text as it was (a line break as `\\n`)."""
    from markdown_it import MarkdownIt

    base = {"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1, "train_batch_size": 8}
    sides = []
    for stem, stage, weird, tag in (("a|`b`", 2, "a|b", "v|1\n`x`"), ("c*d*", 3, "c|d", "v|2 *b* <i>")):
        path = tmp_path / f"{stem}.json"
        path.write_text(json.dumps({**base, "zero_optimization": {"stage": stage}, "we|ird\nkey`x": weird,
                                    "tag": tag, " spaced ": stage}))
        sides.append(path)
    result = cli("diff", *sides, "--world", "8", "--format", "markdown")
    assert result.code == 0, result.err
    tokens = MarkdownIt("commonmark").enable("table").parse(result.out)

    def text(inline: Any) -> str:
        return "".join(child.content for child in inline.children)

    assert text(tokens[1]) == f"distrecipe diff: {sides[0]} → {sides[1]}"
    rows, row = [], []
    for i, token in enumerate(tokens):
        if token.type == "tr_close":
            rows.append(row)
            row = []
        elif token.type == "inline" and tokens[i - 1].type in ("th_open", "td_open"):
            row.append(text(token))
    assert rows == [["setting", "before", "after"], ["zero_optimization.stage", "2", "3"],
                    ["we|ird\\nkey`x", "a|b", "c|d"], ["tag", '"v|1\\n`x`"', "v|2 *b* <i>"], [" spaced ", "2", "3"]]


# ---- every schema field and every native key of the corpus (issue 17 §2; tests/diff_sweep.py)


def test_ignored_fields_say_why() -> None:
    from distrecipe.diff import IGNORED

    assert IGNORED and all(len(reason.split()) >= 5 for reason in IGNORED.values())
    assert set(IGNORED) <= {key for key, _ in diff_sweep.schema_fields()}


@pytest.mark.parametrize(("key", "node"), list(diff_sweep.schema_fields()), ids=lambda v: v if isinstance(v, str) else "")
def test_diff_names_every_schema_field(key: str, node: dict[str, Any], tmp_path: Path) -> None:
    """Each field changed alone (in a base recipe where it means something) is named by
    diff, dotted; a field in the ignored list never is; the format version has one value."""
    from distrecipe.diff import IGNORED

    result = diff_sweep.sweep_field(key, node, tmp_path)
    if key == "recipe":
        assert result.outcome == "unexercised" and node["const"] == 1  # no other valid value to change to
    elif key in IGNORED:
        assert result.outcome == "ignored", result
    else:
        assert result.outcome == "named", result


def _sample(files: list[tuple[Path, str]], kind: str, every: int) -> list[Path]:
    return [path for path, of in files if of == kind][::every]


FILES = list(diff_sweep.corpus_files())
KINDS = ("deepspeed", "accelerate", "hf", "verl")


@pytest.mark.parametrize("path", [p for kind in KINDS for p in _sample(FILES, kind, 6)], ids=lambda p: p.name)
def test_diff_names_every_native_key_of_a_corpus_sample(path: Path, tmp_path: Path) -> None:
    """Each key of a corpus file given another value of its type is named by diff of the
    two files; only comment keys, never compared, and nulls (no other value of their
    type) are not. A sixth of each kind's files, so it stays fast; the slow test does all."""
    results = diff_sweep.sweep_file(path, tmp_path)
    assert results and not [r for r in results if r.outcome == "missed"]


@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS)
def test_diff_names_every_native_key_of_the_corpus(kind: str, tmp_path: Path) -> None:
    results = [r for path in _sample(FILES, kind, 1) for r in diff_sweep.sweep_file(path, tmp_path)]
    assert len([r for r in results if r.outcome == "named"]) > 100
    assert [r for r in results if r.outcome == "missed"] == []


@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS)
def test_a_native_change_against_its_imported_recipe_is_never_silent(kind: str, tmp_path: Path) -> None:
    """The mixed path: the file imported as a recipe, against the changed file. Every
    change is named, reported in the recipe's vocabulary, or refused (exit 2): never the
    same job."""
    results = [r for path in _sample(FILES, kind, 1)
               for r in diff_sweep.sweep_file(path, tmp_path, via_recipe=True)]
    assert [r for r in results if r.outcome == "missed"] == []


def test_a_field_the_native_side_maps_is_its_default_never_borrowed(cli: Callable[..., Result],
                                                                    write: Callable[[str, str], Path]) -> None:
    """An Accelerate YAML that leaves FSDP's offload out means none; a recipe that offloads
    differs from it (it was once filled from the recipe: the same job)."""
    yaml_text = "distributed_type: FSDP\nnum_processes: 8\nmixed_precision: bf16\nfsdp_config:\n  fsdp_version: 2\n"
    offloaded = write("on.yaml", yaml_text + "  fsdp_offload_params: true\n")
    plain = write("off.yaml", yaml_text)
    imported = cli("import", offloaded)
    assert imported.code == 0, imported.err
    recipe = write("recipe.yaml", imported.out)
    result = cli("diff", recipe, plain)
    assert result.code == 0, result.err
    assert "offload.params: cpu → none" in result.out.splitlines()
    assert cli("diff", recipe, offloaded).out.startswith(f"{recipe} and {offloaded} describe the same job")


def test_a_stated_value_the_import_drops_is_named(cli: Callable[..., Result],
                                                  write: Callable[[str, str], Path]) -> None:
    base = {"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 1, "zero_optimization": {"stage": 2}}
    plain = write("a.json", json.dumps(base))
    imported = cli("import", plain, "--world", "8")
    recipe = write("recipe.yaml", imported.out)
    odd = write("b.json", json.dumps({**base, "bf16": {"enabled": "sometimes"}}))
    result = cli("diff", recipe, odd, "--world", "8")
    assert result.code == 0, result.err
    lines = result.out.splitlines()
    assert lines[0] == f"{recipe} and {odd} differ in nothing compared, but a stated value was not compared " \
                       "(notes below)"
    assert f"note: {odd}: bf16.enabled = 'sometimes' disagrees with the imported precision and is not carried: " \
           "check the recipe's precision" in lines
    assert json.loads(cli("diff", recipe, odd, "--world", "8", "--format", "json").out)["same_job"] is False
    markdown = cli("diff", recipe, odd, "--world", "8", "--format", "markdown").out
    assert "No semantic change" not in markdown and "_Note: " in markdown and "bf16.enabled" in markdown
    assert json.loads(cli("diff", recipe, plain, "--world", "8", "--format", "json").out)["same_job"] is True


def test_a_value_at_its_sides_own_default_is_no_change(cli: Callable[..., Result],
                                                      write: Callable[[str, str], Path]) -> None:
    """DeepSpeed turns `overlap_comm` on by itself at ZeRO-3 only (`OVERLAP_COMM_STAGE`): stating
    it there, or stating stage 2's false at stage 2, says nothing the stage did not."""
    default = f"({label('deepspeed')} default)"
    stage2 = write("s2.json", '{"train_batch_size": 8, "zero_optimization": {"stage": 2}}')
    stage2_off = write("s2off.json", '{"train_batch_size": 8, "zero_optimization": {"stage": 2, "overlap_comm": false}}')
    stage3 = write("s3.json", '{"train_batch_size": 8, "zero_optimization": {"stage": 3}}')
    stage3_on = write("s3on.json", '{"train_batch_size": 8, "zero_optimization": {"stage": 3, "overlap_comm": true}}')
    stage3_off = write("s3off.json", '{"train_batch_size": 8, "zero_optimization": {"stage": 3, "overlap_comm": false}}')
    for old, new in ((stage2, stage3_on), (stage2_off, stage3_on), (stage2_off, stage3), (stage3_on, stage2)):
        lines = cli("diff", old, new).out.splitlines()
        assert [line for line in lines if line.startswith("zero_optimization.")] == [
            f"zero_optimization.stage: {json.loads(old.read_text())['zero_optimization']['stage']} → "
            f"{json.loads(new.read_text())['zero_optimization']['stage']}"], (old.name, new.name, lines)
    assert cli("diff", stage3, stage3_on).out.endswith("describe the same job\n")
    assert cli("diff", stage3_on, stage3, "--exit-code").code == 0
    # A value against its side's default is a change, with the default DeepSpeed derives:
    assert f"zero_optimization.overlap_comm: false → true {default}" in cli("diff", stage3_off, stage3).out
    assert f"zero_optimization.overlap_comm: true {default} → false" in cli("diff", stage3, stage3_off).out
    assert f"zero_optimization.overlap_comm: false {default} → true" in cli(
        "diff", stage2, write("s2on.json", '{"train_batch_size": 8, "zero_optimization": {"stage": 2, '
                                           '"overlap_comm": true}}')).out


def test_a_native_value_its_job_has_anyway_is_no_change(cli: Callable[..., Result],
                                                        write: Callable[[str, str], Path]) -> None:
    """`native.deepspeed.zero_optimization.overlap_comm: true` where the ds_config says true anyway
    (distrecipe writes it on at every stage) is no change; one that turns it off is."""
    native = "native:\n  deepspeed:\n    zero_optimization:\n      overlap_comm: {}\n"
    on = write("on.yaml", ZERO3.read_text() + native.format("true"))
    result = cli("diff", ZERO2, on)
    assert "overlap_comm" not in result.out and result.out.startswith("stage: 2 → 3\n")
    assert cli("diff", ZERO3, on, "--exit-code").out.endswith("describe the same job\n")
    off = write("off.yaml", ZERO3.read_text() + native.format("false"))
    changed = cli("diff", ZERO3, off, "--exit-code")
    assert changed.code == 1
    assert changed.out.startswith("native.deepspeed.zero_optimization.overlap_comm: unset → false\n")


FSDP_ONE_GPU = """recipe: 1
model: {params: 7B, hidden_size: 4096, layers: 32, heads: 32, vocab: 32000}
cluster: {nodes: 1, gpus_per_node: 1, gpu: a100-80gb}
strategy: fsdp
batch: {micro: 1, global: 1, seq_len: 1024}
optimizer: {name: adamw, master_weights: bf16, state_dtype: bf16}
"""


@pytest.mark.parametrize(("old", "new", "first"), [
    ("fsdp_version: 1\n", "fsdp_version: 2\n", "fsdp_version: 1 → 2"),
    ("fsdp_version: 1\n", "", "fsdp_version: 1 → 2"),  # unset is FSDP2, what every target writes
    ("", "native:\n  hf: {fsdp_config: {version: 1}}\n", "fsdp_version: 2 → 1"),  # the Trainer's key is the field
])
def test_which_fsdp_is_a_change_with_its_impact(cli: Callable[..., Result], tmp_path: Path, old: str, new: str,
                                                first: str) -> None:
    """On one rank FSDP1 runs NO_SHARD (nothing gathered for a bf16 model): the diff names the
    field and prices what it moves."""
    paths = []
    for name, extra in (("old", old), ("new", new)):
        paths.append(tmp_path / f"{name}.yaml")
        paths[-1].write_text(FSDP_ONE_GPU + extra, encoding="utf-8")
    result = cli("diff", *paths, "--exit-code")
    assert result.code == 1, result.err
    lines = result.out.splitlines()
    assert lines[0] == first
    verdicts = next(line for line in lines if "fits" in line and "→" in line and "FSDP" in line)
    assert ("FSDP1 (NO_SHARD: one rank" in verdicts.split("→")[0]) is (first == "fsdp_version: 1 → 2")
