"""OpenRLHF's rules against OpenRLHF: DR410/DR411 exactly where its entry module's parser
exits, DR412 exactly where DeepSpeed refuses the ds_config its strategy writes from the
parsed arguments (or train_ppo_ray's rollout assertion fails)."""

from __future__ import annotations

from pathlib import Path

import pytest

from distrecipe.engines.openrlhf import command
from distrecipe.lint.config import LintConfig
from distrecipe.lint.engine import lint
from tests import openrlhf_judge

CORPUS = Path(__file__).resolve().parents[2] / "lint_corpus"
PARSER_CODES = {"DR410", "DR411"}

MODELS = "--actor.model_name_or_path m --reward.remote_url http://rm "
"""What every run names (train_ppo_ray's checks read the reward model's path)."""
SCRIPTS = {
    "grouped-ok": "python3 -m openrlhf.cli.train_ppo_ray " + MODELS + "--actor.num_gpus_per_node 8 --critic.num_gpus_per_node 8 "
                  "--train.batch_size 128 --train.micro_batch_size 4 --rollout.n_samples_per_prompt 4\n",
    "prefix": "python3 -m openrlhf.cli.train_ppo_ray " + MODELS + "--train.batch 128 --actor.num_gpus_per_node 8 "
              "--critic.num_gpus_per_node 8\n",
    "ambiguous-prefix": "python3 -m openrlhf.cli.train_ppo_ray " + MODELS + "--train.micro 4\n",
    "bare-flag": "python3 -m openrlhf.cli.train_ppo_ray " + MODELS + "--train.colocate_all --vllm.enable_sleep "
                 "--actor.num_gpus_per_node 8 --critic.num_gpus_per_node 8\n",
    "sft": "deepspeed --module openrlhf.cli.train_sft --max_len 2048 --train_batch_size 256 --micro_batch 2\n",
    "sft-grouped": "deepspeed --module openrlhf.cli.train_sft --data.max_len 2048 --train.batch_size 256\n",
    "ray-submit": "ray job submit --address=http://127.0.0.1:8265 -- python3 -m openrlhf.cli.train_ppo_ray "
                  f"{MODELS}--actor.num_nodes 2 --actor.num_gpus_per_node 8 --critic.num_gpus_per_node 8 "
                  "--critic.num_nodes 2 --train.batch_size 96 --train.micro_batch_size 4\n",
    "equals": "python3 -m openrlhf.cli.train_ppo_ray " + MODELS + "--train.batch_size=100 --train.micro_batch_size=4 "
              "--actor.num_gpus_per_node=8 --critic.num_gpus_per_node=8\n",
    **{name: f"python3 -m openrlhf.cli.train_ppo_ray {MODELS}--actor.num_gpus_per_node 8 {rest}\n" for name, rest in (
        ("group-one-sample", "--algo.advantage.estimator rloo"),
        ("group-eight-samples", "--algo.advantage.estimator dr_grpo --rollout.n_samples_per_prompt 8"),
        ("packing-no-vllm", "--ds.packing_samples"),
        ("packing-vllm", "--ds.packing_samples --vllm.num_engines 4"),
        ("ring-no-vllm", "--ds.ring_attn_size 2"),
        ("dynamic-batch-no-vllm", "--train.dynamic_batch_enable"),
        ("partial-rollout", "--train.partial_rollout_enable"),
        ("partial-rollout-async", "--train.partial_rollout_enable --train.async_enable"),
        ("filtering-one-sample", "--algo.dynamic_filtering_enable"),
        ("filtering", "--algo.dynamic_filtering_enable --rollout.n_samples_per_prompt 4"),
        ("oversampling", "--rollout.vllm_generate_batch_size 2048"),
        ("oversampling-async", "--rollout.vllm_generate_batch_size 2048 --train.async_enable"))},
}
CASES = [(name, text) for name, text in SCRIPTS.items()] + [
    (f"{case.parent.name}/{case.name}", next(p for p in sorted(case.iterdir()) if p.suffix == ".sh").read_text())
    for code in ("DR410", "DR411", "DR412") for case in sorted((CORPUS / code).iterdir())]


def _argv(text: str, path: Path) -> tuple[str, list[str]]:
    found = command(text, str(path))
    assert found is not None
    module, words = found
    return module, [word.value or "" for word in words]


@pytest.mark.parametrize(("name", "text"), CASES, ids=[c[0] for c in CASES])
def test_lint_refuses_exactly_what_openrlhf_refuses(name: str, text: str, tmp_path: Path) -> None:
    path = tmp_path / "run.sh"
    path.write_text(text)
    report = lint([path], config=LintConfig())
    assert not report.unusable
    codes = {f.code for f in report.findings}
    module, argv = _argv(text, path)
    refused = openrlhf_judge.refusal(module, argv)
    assert bool(codes & PARSER_CODES) == (refused is not None), (refused, [f.message for f in report.findings])
    if refused is None:
        args = openrlhf_judge.parser(module).parse_args(argv)
        stops = openrlhf_judge.validation(module, argv) or openrlhf_judge.deepspeed_refusal(module, args)
        assert bool(codes & {"DR412", "DR413"}) == (stops is not None), (stops, [f.message for f in report.findings])


def test_a_flat_option_names_its_grouped_successor(tmp_path: Path) -> None:
    path = tmp_path / "run.sh"
    path.write_text("python3 -m openrlhf.cli.train_ppo_ray \\\n  --micro_train_batch_size 8\n")
    [finding] = lint([path], config=LintConfig()).findings
    assert (finding.code, finding.where.line if finding.where else 0, finding.where.col if finding.where else 0) \
        == ("DR410", 2, 3)
    assert "removed in OpenRLHF 0.10.2 (last in 0.10.1)" in finding.message
    assert finding.message.endswith("now --train.micro_batch_size")
    older = lint([path], config=LintConfig(engines=(("openrlhf", "0.9.10", "--engine-version"),)))
    assert older.findings == []


def test_a_file_forced_to_the_kind_without_a_command_says_so(tmp_path: Path) -> None:
    path = tmp_path / "sft.yaml"
    path.write_text("model_name_or_path: m\n")
    report = lint([path], config=LintConfig(), kind="openrlhf")
    assert [(f.code, f.where.line if f.where else 0, f.message) for f in report.findings] == [
        ("DR410", 1, "no OpenRLHF command line here (`python -m openrlhf.cli.train_*` with its options)")]


def test_import_refuses_the_entries_other_than_the_rl_job_at_the_module(tmp_path: Path) -> None:
    """train_ppo_ray is imported (`translator.importers.openrlhf`); SFT, DPO, RM are only linted."""
    from distrecipe.translator.importers import NotImportable
    from distrecipe.translator.importers.registry import import_document, read_native

    path = tmp_path / "run.sh"
    path.write_text("deepspeed --module openrlhf.cli.train_sft --max_len 2048 --train_batch_size 256\n")
    kind, doc = read_native(path)
    with pytest.raises(NotImportable, match=r"^.*run\.sh:1:\d+: openrlhf\.cli\.train_sft: import reads "
                                            r"openrlhf\.cli\.train_ppo_ray's RL job"):
        import_document(kind, doc, None)
