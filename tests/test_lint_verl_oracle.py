"""verl is the judge of DR220: lint flags a verl batch exactly when verl refuses it.

Random FSDP actor batches (prompts, rollout.n, mini- and micro-batch, GPUs, Ulysses
size) are written as the override lines a user keeps, linted, and handed to verl's
own `validate_config` and worker-side splitting (`distrecipe/judges/verl.py`). A rule lint
lacks, or one it invents, breaks the agreement.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from distrecipe.lint.config import LintConfig
from distrecipe.lint.engine import lint

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore:Disabled critic")]


@settings(max_examples=80, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(prompts=st.sampled_from([8, 16, 24, 32, 48, 60, 64, 96]), n=st.sampled_from([1, 2, 4]),
       mini=st.sampled_from([4, 8, 12, 16, 32]), micro=st.sampled_from([1, 2, 4]),
       gpus=st.sampled_from([2, 4, 8]), sp=st.sampled_from([1, 2]))
@example(prompts=48, n=4, mini=32, micro=2, gpus=8, sp=1)  # 1.5 mini-batches: only the workers refuse
def test_dr220_agrees_with_verl(judge: Any, prompts: int, n: int, mini: int, micro: int, gpus: int,
                                sp: int) -> None:
    actor = "actor_rollout_ref.actor"
    lines = [
        f"{actor}.strategy=fsdp2", f"data.train_batch_size={prompts}", f"actor_rollout_ref.rollout.n={n}",
        f"{actor}.ppo_mini_batch_size={mini}", f"{actor}.ppo_micro_batch_size_per_gpu={micro}",
        f"actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu={micro}",
        f"actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu={micro}",
        f"{actor}.ulysses_sequence_parallel_size={sp}", "trainer.nnodes=1", f"trainer.n_gpus_per_node={gpus}",
    ]
    if sp > 1:
        lines.append("actor_rollout_ref.model.use_remove_padding=true")
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "verl_overrides.txt").write_text("\n".join(lines) + "\n")
        report = lint([Path(tmp) / "verl_overrides.txt"], config=LintConfig())
    flagged = any(f.code == "DR220" for f in report.findings)
    event("refused" if flagged else "accepted")
    assert flagged == judge.refuses(judge.compose(lines)), [str(f) for f in report.findings]


def test_lint_engines_shares_hydra_with_the_session_judge(judge: Any, tmp_path: Path) -> None:
    """`lint --engines` starts its own verl judge while the session's holds Hydra's one
    global context: both work, and the session's still composes after lint's closes."""
    script = tmp_path / "run.sh"
    script.write_text("python3 -m verl.trainer.main_ppo \\\n    actor_rollout_ref.actor.ppo_mini_batch_size=8 \\\n"
                      "    critic.model.no_such_knob=1\n")
    report = lint([script], config=LintConfig(), engines=True)
    assert any(f.code == "DR900" and "no_such_knob" in f.message for f in report.findings), \
        [str(f) for f in report.findings]
    assert judge.compose(["actor_rollout_ref.actor.ppo_mini_batch_size=8"]).actor_rollout_ref.actor.ppo_mini_batch_size == 8


def test_the_judges_verdict_reads_a_scripts_variables_as_the_shell(judge: Any) -> None:
    """The judge reads a launch script's variables with `shell_variables`, as the import
    does: a value only running the script gives is a placeholder, and where verl reads a
    number there the script is not judgeable; a whole `$((a + b))` is one word."""
    from distrecipe.judges.verl import judge_script, script_overrides

    head = "python3 -m verl.trainer.main_ppo data.train_batch_size=$BS \\\n"
    rest = ("  actor_rollout_ref.rollout.n=4 actor_rollout_ref.actor.ppo_mini_batch_size=16 \\\n"
            "  actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2 trainer.n_gpus_per_node=8 \\\n"
            "  data.train_files=\"$HOME/d/train.parquet\" data.max_response_length=$((A + B))\n")
    straight = script_overrides("BS=64\n" + head + rest)
    assert "data.train_batch_size=64" in straight[1] and "data.train_files=UNSET_HOME/d/train.parquet" in straight[1]
    assert straight[3] == {"$((A + B))": "UNSET_data_max_response_length", "$HOME": "UNSET_HOME"}
    # An assignment inside `if` is not straight-line code: only running the script fixes BS.
    conditional = "BS=64\nif [ -n \"$BIG\" ]; then\n  BS=128\nfi\n" + head + rest
    verdict = judge_script(judge, conditional)
    assert verdict.outcome == "not-judgeable" and "$BS" in verdict.message, verdict


def test_a_script_for_another_program_or_a_removed_entry_is_a_verdict(judge: Any) -> None:
    """EasyR1's `verl.trainer.main` (its own package) is not verl's PPO entry: not judgeable,
    where the judge used to compose its `worker.*` keys and crash (InstantiationException);
    a module verl removed is refused as Python would; a typed config's own assertion that
    Hydra wraps is a refusal with the assertion's message."""
    from distrecipe.judges.verl import judge_script

    easyr1 = ("python3 -m verl.trainer.main \\\n    config=examples/config.yaml \\\n"
              "    worker.rollout.tensor_parallel_size=1 \\\n    trainer.n_gpus_per_node=1\n")
    assert judge_script(judge, easyr1).outcome == "not-judgeable"
    sft = "torchrun --nproc_per_node 8 -m verl.trainer.fsdp_sft_trainer data.train_batch_size=256\n"
    verdict = judge_script(judge, sft)
    assert (verdict.outcome, verdict.message) == ("refuses", "No module named 'verl.trainer.fsdp_sft_trainer'")
    bare = "python3 -m verl.trainer.main_ppo data.max_response_length=2048 trainer.n_gpus_per_node=1\n"
    verdict = judge_script(judge, bare)
    assert verdict.outcome == "refuses" and "ppo_micro_batch_size" in verdict.message, verdict


PREFIXED_KEYS = ["trainer.val_before_train", "trainer.total_epochs", "actor_rollout_ref.rollout.n",
                 "actor_rollout_ref.actor.optim.lr", "trainer.no_such_key", "data.filter_accuracy",
                 "actor_rollout_ref.rollout.val_temperature", "max_turns", "retriever.topk"]


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(prefix=st.sampled_from(["", "+", "++", "~"]), key=st.sampled_from(PREFIXED_KEYS))
@example(prefix="+", key="trainer.val_before_train")  # TinyZero's and Logic-RL's refusal
@example(prefix="", key="max_turns")                  # Search-R1's new top-level key
def test_hydra_prefixes_are_judged_as_hydra_judges_them(judge: Any, prefix: str, key: str) -> None:
    """Hydra refuses `+key` on a key the composed config has, `key` on one it lacks and
    `~key` on one it lacks; lint reports exactly those (DR355, DR352)."""
    from omegaconf import OmegaConf

    value = "" if prefix == "~" else "=1"
    line = f"{prefix}{key}{value}"
    try:
        cfg = judge.compose_named("ppo_trainer", ["algorithm.adv_estimator=grpo", line])
        refused = False
    except Exception:  # Hydra's override errors have no common base below Exception
        refused = True
    else:
        assert OmegaConf.select(cfg, key) is None or prefix != "~"
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "run.sh"
        path.write_text(f"python3 -m verl.trainer.main_ppo data.train_batch_size=64 trainer.n_gpus_per_node=8 {line}\n")
        codes = {f.code for f in lint([path], config=LintConfig()).findings}
    assert bool(codes & {"DR352", "DR355"}) == refused, (line, codes)


MICRO_KEYS = {"actor": "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu",
              "rollout": "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu",
              "ref": "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu"}


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(written=st.sets(st.sampled_from(sorted(MICRO_KEYS))), kl_loss=st.booleans(), dynamic=st.booleans(),
       script=st.booleans())
@example(written={"actor", "ref"}, kl_loss=False, dynamic=False, script=True)  # no log_prob micro-batch
@example(written={"actor", "rollout"}, kl_loss=True, dynamic=False, script=False)  # the ref needs one too
def test_dr357_agrees_with_verl_on_unset_micro_batches(judge: Any, written: set[str], kl_loss: bool,
                                                       dynamic: bool, script: bool) -> None:
    """verl refuses a config that sizes a micro-batch nowhere (`validate_config`'s "Please set
    at least one of ..." for the rollout's and, with a reference policy, the ref's
    log-prob pass; the actor's own check for its update) ⇔ lint reports DR357."""
    lines = ["data.train_batch_size=64", "actor_rollout_ref.rollout.n=2",
             "actor_rollout_ref.actor.ppo_mini_batch_size=16", "trainer.nnodes=1", "trainer.n_gpus_per_node=8",
             f"actor_rollout_ref.actor.use_kl_loss={str(kl_loss).lower()}",
             f"actor_rollout_ref.actor.use_dynamic_bsz={str(dynamic).lower()}"]
    lines += [f"{MICRO_KEYS[name]}=2" for name in sorted(written)]
    with tempfile.TemporaryDirectory() as tmp:
        if script:
            path = Path(tmp) / "run_grpo.sh"
            path.write_text("set -x\npython3 -m verl.trainer.main_ppo \\\n    algorithm.adv_estimator=grpo \\\n"
                            + "".join(f"    {line} \\\n" for line in lines) + "    trainer.total_epochs=1\n")
        else:
            path = Path(tmp) / "verl_overrides.txt"
            path.write_text("\n".join(lines) + "\n")
        report = lint([path], config=LintConfig())
    flagged = [f for f in report.findings if f.code == "DR357"]
    try:
        judge.validate(judge.compose(lines))
        refused = ""
    except (AssertionError, ValueError) as exc:
        refused = str(exc)
    except Exception as exc:  # a typed config's own assertion, wrapped by Hydra's instantiation
        refused = str(exc.__cause__ or exc.__context__ or exc)
    unset = "Please set at least one" in refused
    event("refused" if unset else "accepted")
    assert bool(flagged) == unset, (refused, [str(f) for f in report.findings])
    if unset:
        assert any(refused.split("]")[0] + "]" in f.message for f in flagged), (refused, flagged)
