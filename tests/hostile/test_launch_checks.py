"""Launch against a hostile recipe and a hostile machine: no escape, no injection, no leak.

The job itself is not what is tested here, so `supervise` is replaced by a stub that
returns at once: every file the launch writes and every line it prints is real.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from distrecipe.errors import LaunchError
from distrecipe.launch.rundir import default_run_dir
from distrecipe.launch.secrets import REDACTED, redact_argv, redact_env
from distrecipe.launch.supervise import Outcome
from tests.conftest import Result
from tests.hostile.inputs import recipe_text

Cli = Callable[..., Result]

TINY = (Path(__file__).parents[2] / "recipes" / "tiny-cpu.yaml").read_text()

SECRETS_ENV = {
    "DATABASE_URL": "postgres://admin:hunter2-db@db.internal:5432/prod",
    "HTTPS_PROXY": "http://proxyuser:hunter2-proxy@proxy:3128",
    "SLACK_WEBHOOK_URL": "https://hooks.example/services/T000/B000/hunter2webhook",
    "SENTRY_DSN": "https://hunter2sentry@o1.ingest.example/1",
    "PGPASSWD": "hunter2-pg",
    "SMTP_PASSWD": "hunter2-smtp",
    "GOOGLE_CREDENTIALS": "hunter2-gcp",
    "NPM_AUTH": "hunter2-npm",
    "AZURE_STORAGE_CONNECTION_STRING": "AccountName=x;AccountKey=hunter2azure",
    "DEPLOY_CERT": "-----BEGIN RSA PRIVATE KEY-----\nhunter2pem\n-----END RSA PRIVATE KEY-----",
    "INNOCENT_LOOKING": "Bearer hunter2bearer0123456789",
    "HF_HOME_MIRROR": "hf_hunter2abcdefghijklmnopqrstuv",
}
SECRETS_ARGV = ["--hf_token", "hunter2-argv-token", "--db-password=hunter2-argv-pass",
                "--api_key", "hunter2-argv-key", "--remote", "https://u:hunter2-argv-url@git.example/r"]


RECIPE_ARGS = ["--hf_token", "hunter2-recipe-token", "--db-password=hunter2-recipe-pass",
               "--remote", "https://u:hunter2-recipe-url@git.example/r", "--lr", "1e-4"]
"""Secrets in the recipe's own `launch.args` (the reference trainer gets them)."""
SET_ARGS = '--set=launch.args=["--api_key", "hunter2-set-key"]'


def _values() -> list[str]:
    found = [v for v in SECRETS_ENV.values()]
    found += ["hunter2-argv-token", "hunter2-argv-pass", "hunter2-argv-key", "hunter2-argv-url"]
    found += ["hunter2-recipe-token", "hunter2-recipe-pass", "hunter2-recipe-url", "hunter2-set-key"]
    return found


def test_redaction_by_name_and_by_value() -> None:
    env = redact_env({**SECRETS_ENV, "PATH": "/bin", "MASTER_PORT": "29500"})
    assert {k for k, v in env.items() if v != REDACTED} == {"PATH", "MASTER_PORT"}
    assert redact_argv(["train.py", *SECRETS_ARGV, "--lr", "1e-4"]) == [
        "train.py", "--hf_token", REDACTED, f"--db-password={REDACTED}", "--api_key", REDACTED,
        "--remote", REDACTED, "--lr", "1e-4"]


@pytest.mark.usefixtures("project")  # its train.py
def test_secrets_never_reach_the_run_directory_or_the_terminal(
        cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each kind of secret is planted in the environment, the program's argv, the recipe's
    `launch.args` and a `--set` of them; then the whole run directory (plan.json and the
    recipe's copy included), stdout and stderr of launches and dry runs are searched."""
    from distrecipe.commands import launch

    monkeypatch.setattr(launch, "supervise", lambda *a, **k: Outcome(exit_code=0))
    for name, value in SECRETS_ENV.items():
        monkeypatch.setenv(name, value)
    recipe = tmp_path / "tiny.yaml"
    recipe.write_text(TINY.replace("launch: {backend: deepspeed}",
                                   f"launch:\n  backend: deepspeed  # kept\n  args: {json.dumps(RECIPE_ARGS)}"))
    runs = tmp_path / "runs"
    results = [cli("launch", recipe, "--runs-root", runs, "--", "train.py", *SECRETS_ARGV),
               cli("launch", recipe, "--dry-run", "--", "train.py", *SECRETS_ARGV),
               cli("launch", recipe, "--runs-root", runs, "--run-dir", runs / "recipe-args"),
               cli("launch", recipe, "--dry-run"),
               cli("launch", recipe, "--runs-root", runs, "--run-dir", runs / "set-args", SET_ARGS),
               cli("launch", recipe, "--dry-run", SET_ARGS)]
    assert [result.code for result in results] == [0] * 6, results
    written = [p for p in runs.rglob("*") if p.is_file()]
    assert sum(p.name == "run.json" for p in written) == 3
    copy = (runs / "recipe-args" / "recipe.yaml").read_text()
    assert "# kept" in copy and '"--db-password=<redacted>"' in copy, "the copy is redacted in place"
    assert json.loads((runs / "recipe-args" / "plan.json").read_text())["recipe"]["launch"]["args"] == [
        "--hf_token", REDACTED, f"--db-password={REDACTED}", "--remote", REDACTED, "--lr", "1e-4"]
    texts = [p.read_text() for p in written] + [r.out for r in results] + [r.err for r in results]
    for secret in _values():
        for line in secret.splitlines():
            assert not any(line in text for text in texts), f"{line!r} leaked"


@pytest.mark.parametrize("name", ["../../x", "/abs/path", "a/b", "..", "a\\nb"])
def test_a_name_never_places_the_run_outside_the_runs_root(cli: Cli, tmp_path: Path, name: str) -> None:
    recipe = tmp_path / "r.yaml"
    recipe.write_text(TINY.replace("name: tiny-cpu", f'name: "{name}"'))
    result = cli("launch", recipe, "--runs-root", tmp_path / "runs", "--dry-run")
    assert result.code == 2 and "name must be a safe slug" in result.err, result
    assert result.err.startswith(f"{recipe}:5:7: error: ")


def test_slurm_ids_from_the_environment_cannot_escape_the_runs_root(tmp_path: Path) -> None:
    with pytest.raises(LaunchError, match="outside the runs root"):
        default_run_dir(tmp_path / "runs", "job", job_key="../../../escaped")


def _named(tmp_path: Path, stem: str) -> Path:
    """A recipe without `name`, so the name comes from the file's own (hostile) name."""
    recipe = tmp_path / f"{stem}.yaml"
    recipe.write_text(recipe_text().replace("name: hostile\n", ""))
    return recipe


def test_a_hostile_file_name_names_the_job_as_a_slug_and_says_so(cli: Cli, tmp_path: Path) -> None:
    """A name taken from the file is held to the schema's rule for a written one (a slug),
    as `import` does, and the note says which name the run directory and job get."""
    result = cli("launch", _named(tmp_path, "a b;touch pwned"), "--slurm")
    assert result.code == 0, result
    assert "#SBATCH --job-name=a-b-touch-pwned\n" in result.out
    assert 'note: name "a-b-touch-pwned" is derived from the file name "a b;touch pwned"' in result.err


def test_a_file_name_cannot_end_the_directive(cli: Cli, tmp_path: Path) -> None:
    result = cli("launch", _named(tmp_path, "x\n#SBATCH --wrap=touch pwned\n"), "--slurm")
    assert result.code == 0, result
    assert "#SBATCH --job-name=x-SBATCH---wrap-touch-pwned\n" in result.out
    # sbatch reads directives up to the first command; the recipe's path in the srun line
    # after it is one quoted shell word, whatever it holds.
    directives = result.out.split("\nset -euo pipefail\n", 1)[0]
    assert not any(line.startswith("#SBATCH --wrap") for line in directives.splitlines())
    lines = result.err.splitlines()  # the note, and lint's notes on the recipe: each one line
    assert len([line for line in lines if ": note: name " in line]) == 1, result.err
    assert not any(line.startswith("#SBATCH") for line in lines), result.err


def test_accelerate_yaml_and_summary_carry_a_hostile_name_as_data(cli: Cli, tmp_path: Path) -> None:
    stem = "x\ngpu_ids: 7\nmain_training_function: pwn\n# |a|`b`*c*"
    out = tmp_path / "out"
    assert cli("compile", _named(tmp_path, stem), "-t", "all", "-o", out).code == 0
    accelerate = yaml.safe_load((out / "accelerate_config.yaml").read_text())
    assert "gpu_ids" not in accelerate and "main_training_function" not in accelerate
    summary = (out / "summary.md").read_text()
    assert "\ngpu_ids" not in summary and "\n#" not in summary.split("\n", 1)[1].replace("\n## ", "")
    assert summary.startswith("# x-gpu\\_ids-7-main\\_training\\_function-pwn-a-b-c: compiled by distrecipe\n")
    # Outside a table a code span shows a backslash literally, so the path has none added.
    source = str(tmp_path / f"{stem}.yaml").replace("\n", "\\n")
    assert f"Source: ``{source}``." in summary


@pytest.mark.parametrize(("code", "want"), [
    ("import os, signal; os.kill(os.getpid(), signal.SIGKILL)", Outcome(exit_code=137, signal="SIGKILL")),
    ("import sys; sys.exit(-9)", Outcome(exit_code=137, signal="SIGKILL")),  # DeepSpeed's wrapped 247
    ("import sys; sys.exit(-11)", Outcome(exit_code=139, signal="SIGSEGV")),
    ("import sys; sys.exit(-1)", Outcome(exit_code=255)),  # a program's own 255 stays 255
    ("import sys; sys.exit(3)", Outcome(exit_code=3)),
])
def test_a_rank_killed_by_a_signal_exits_128_plus_n_and_names_it(code: str, want: Outcome) -> None:
    import os
    import sys

    from distrecipe.launch.supervise import LAUNCH_ID, new_launch_id, supervise

    launch_id = new_launch_id()
    env = {**os.environ, LAUNCH_ID: launch_id}
    assert supervise([sys.executable, "-c", code], env, launch_id=launch_id, timeout=60) == want


def test_recipe_redaction_keeps_the_text_or_withholds_it() -> None:
    """A block scalar keeps its line break; a list reached through a merge key is rewritten
    where it is written; a secret in a key, or a secret name a merge brings under `native`,
    is not rewritten in place, so the whole text is withheld rather than leak."""
    from distrecipe.launch.recipe_text import redact_override, redact_recipe_yaml

    text = "launch:\n  args:\n    - --token\n    - |\n      hunter2\n    - --lr\nname: x\n"
    assert redact_recipe_yaml(text) == (
        f'launch:\n  args:\n    - --token\n    - "{REDACTED}"\n    - --lr\nname: x\n')
    merged = "base: &b {args: [--api_key, hunter2]}\nlaunch: {<<: *b}\n"
    assert redact_recipe_yaml(merged) == f'base: &b {{args: [--api_key, "{REDACTED}"]}}\nlaunch: {{<<: *b}}\n'
    assert redact_recipe_yaml("native: {deepspeed: {hf_hunter2abcdefghijklmnopqrstuv: 1}}\n") is None
    assert redact_recipe_yaml("c: &c {api_key: hunter2}\nnative: {deepspeed: {<<: *c}}\n") is None
    # The recipe's own keys are not secret names (`micro_tokens`), nor is a comment without a value.
    kept = "batch: {micro_tokens: 4096}  # tokens per micro-batch\nnative: {hf: {hub_token: null}}\n"
    assert redact_recipe_yaml(kept) == kept
    assert redact_override("launch={<<: {args: [--token=hunter2]}}") == f'launch={{<<: {{args: ["--token={REDACTED}"]}}}}'
    assert redact_override("launch.args=[--lr, '1']") == "launch.args=[--lr, '1']"
    assert redact_override("native.deepspeed.comet.api_key=hunter2") == f'native.deepspeed.comet.api_key="{REDACTED}"'
    assert redact_override("native.hf={hub_token: hunter2}") == f'native.hf={{hub_token: "{REDACTED}"}}'


ELSEWHERE = """\
# the hub: hf_hunter2commentabcdefghijklmnop
# api_key: hunter2-comment-key
launch:
  backend: deepspeed
  args: ["--lr", "1e-4"]  # --hf_token hunter2-inline
native:
  deepspeed:
    comet: {enabled: false, api_key: hunter2-native-key, project: "https://u:hunter2-native-url@x.example/p"}
  hf: {hub_token: hunter2-hf-token}
  verl: ["+trainer.wandb_api_key=hunter2-verl-key"]
"""
"""Secrets outside `launch.args`: in comments, by name and by value under `native`."""


def test_secrets_elsewhere_in_the_recipe_reach_only_what_the_job_reads(
        cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The whole run directory and both streams are searched: the recipe's copy (which
    still loads, as the same recipe but for the redacted values) and run.json hold none;
    the job's own inputs, ds_config.json and plan.json's `native`, hold the one its
    engine reads, where it was written, and no other."""
    from distrecipe.api import load_plan
    from distrecipe.commands import launch

    monkeypatch.setattr(launch, "supervise", lambda *a, **k: Outcome(exit_code=0))
    recipe = tmp_path / "tiny.yaml"
    recipe.write_text(TINY.replace("launch: {backend: deepspeed}\n", ELSEWHERE))
    runs = tmp_path / "runs"
    sets = ["--set", "native.deepspeed.comet.experiment_key=hunter2-set-key"]
    results = [cli("launch", recipe, "--runs-root", runs, "--run-dir", runs / "r", *sets),
               cli("launch", recipe, "--dry-run", *sets)]
    assert [result.code for result in results] == [0, 0], results
    run = runs / "r"
    plan = json.loads((run / "plan.json").read_text())
    config = json.loads((run / "ds_config.json").read_text())
    assert config["comet"] == plan["recipe"]["native"]["deepspeed"]["comet"] == {
        "enabled": False, "api_key": "hunter2-native-key", "project": "https://u:hunter2-native-url@x.example/p",
        "experiment_key": "hunter2-set-key"}
    assert plan["recipe"]["native"]["hf"] == {"hub_token": "hunter2-hf-token"}
    assert plan["recipe"]["native"]["verl"] == ["+trainer.wandb_api_key=hunter2-verl-key"]
    for name in ("plan.json", "ds_config.json"):
        (run / name).unlink()
    copy = load_plan(run / "recipe.yaml")
    native = copy.recipe.native
    assert native.deepspeed["comet"] == {"enabled": False, "api_key": REDACTED, "project": REDACTED}
    assert native.hf == {"hub_token": REDACTED} and native.verl == (f"+trainer.wandb_api_key={REDACTED}",)
    assert copy.recipe.launch.args == ("--lr", "1e-4") and copy.batch.global_ == 8
    written = [p for p in run.rglob("*") if p.is_file()]
    assert sorted(p.name for p in written) == ["attempts.jsonl", "measured.json", "recipe.yaml", "run.json"]
    texts = [p.read_text() for p in written] + [r.out for r in results] + [r.err for r in results]
    assert not [text for text in texts if "hunter2" in text], texts
