"""`distrecipe init`: the search's winner, written with its reasons; prompts only on a terminal."""

from __future__ import annotations

import os
import pty
import select
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from distrecipe.api import load_plan
from distrecipe.job import plan_values
from distrecipe.plan.report import estimate
from distrecipe.plan.search import search
from distrecipe.translator.load import load_recipe
from tests.conftest import ROOT, Result
from tests.test_fast_path import run_probe

QWEN3 = ROOT / "tests" / "corpus" / "hf_configs" / "real" / "qwen3-8b.json"
SHAPE = ("--hidden-size", "1024", "--layers", "8", "--heads", "16", "--intermediate-size", "4096",
         "--vocab", "32000")
JOB = ("--gpus-per-node", "8", "--gpu", "a100-80gb", "--global-batch", "64", "--seq-len", "2048")


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    shutil.copyfile(QWEN3, tmp_path / "config.json")
    return tmp_path


def test_it_writes_the_searched_winner_with_its_reasons(cli: Callable[..., Result], here: Path) -> None:
    result = cli("init", "--hf-config", "config.json", "--nodes", "4", *JOB, "-o", "sub/r.yaml")
    assert result.code == 0, result.err
    text = (here / "sub" / "r.yaml").read_text()
    assert text.startswith("# Written by distrecipe init: the fastest of ")
    assert "# Runners-up (change the keys below to take one):\n#   2. " in text
    assert 'hf_config: "../config.json"  # the qwen3 family, 8.19B parameters' in text  # relative to the recipe
    assert 'gpu: "a100-80gb"  # A100 80GB: 80 GB, 312 TFLOPS dense 16-bit' in text
    assert "global: 64  # yours" in text
    plan = load_plan(here / "sub" / "r.yaml")
    # The same job given to the search as a recipe: its winner is what was written.
    (here / "job.yaml").write_text("recipe: 1\nname: r\nmodel: {hf_config: config.json}\n"
                                   "cluster: {nodes: 4, gpus_per_node: 8, gpu: a100-80gb}\nstrategy: zero\n"
                                   "batch: {global: 64, seq_len: 2048}\n")
    winner = search(load_recipe(here / "job.yaml"), 8).ranked[0]
    want = plan_values(winner.estimate.plan)
    got = plan_values(plan)
    assert got["model.hf_config"] == "../config.json"
    assert {k: v for k, v in got.items() if k != "model.hf_config"} == \
        {k: v for k, v in want.items() if k != "model.hf_config"}
    assert f"wrote sub/r.yaml: {winner.estimate.label}, the fastest of" in result.err


def test_without_a_terminal_it_names_every_missing_flag(cli: Callable[..., Result], here: Path) -> None:
    result = cli("init", "--gpu", "h100")
    assert result.code == 2 and result.err.count("\n") == 1
    assert result.err == ("distrecipe: error: init needs --hf-config (or --hidden-size, --layers, --heads, "
                          "--intermediate-size, --vocab), --gpus-per-node, --global-batch, --seq-len (no terminal "
                          "to ask on: stdin is not a TTY)\n")
    assert not list(here.glob("*.yaml"))


def test_a_shape_instead_of_a_config_and_stdout(cli: Callable[..., Result], here: Path) -> None:
    result = cli("init", *SHAPE, *JOB)
    assert result.code == 0, result.err
    assert "  hidden_size: 1024\n" in result.out and "model-8gpu" in result.out
    (here / "out.yaml").write_text(result.out)
    assert load_plan(here / "out.yaml").batch.global_ == 64


def test_a_deepspeed_script_is_searched_under_zero(cli: Callable[..., Result], here: Path) -> None:
    (here / "train.py").write_text("import deepspeed\nengine, *_ = deepspeed.initialize(model=None)\n")
    result = cli("init", *SHAPE, *JOB, "--script", "train.py")
    assert result.code == 0, result.err
    assert 'strategy: "zero"' in result.out and 'script: "train.py"  # a deepspeed program' in result.out
    conflict = cli("init", *SHAPE, *JOB, "--script", "train.py", "--engine", "accelerate")
    assert conflict.code == 2
    assert "--script train.py is a deepspeed program, which --engine accelerate cannot run" in conflict.err


def test_a_trainer_script_gets_only_what_the_trainer_runs_and_launches(
        cli: Callable[..., Result], here: Path) -> None:
    """Without the kind the winner on 2 × 8 H100s is FSDP2 with a pipeline, which no Trainer runs."""
    (here / "train.py").write_text("from transformers import Trainer, TrainingArguments\n")
    job = ("--nodes", "2", "--gpus-per-node", "8", "--gpu", "h100", "--global-batch", "512", "--seq-len", "8192")
    shape = ("--hidden-size", "4096", "--layers", "36", "--heads", "32", "--intermediate-size", "12288",
             "--vocab", "151936")
    result = cli("init", *shape, *job, "--script", "train.py", "-o", "r.yaml")
    assert result.code == 0, result.err
    text = (here / "r.yaml").read_text()
    assert '  program_kind: "hf"  # read from the script' in text and "  pipeline: 1" in text
    dry = cli("launch", "r.yaml", "--dry-run", "--run-dir", here / "run")
    assert dry.code == 0, dry.err
    assert "distrecipe: program kind hf: launch.program_kind in the recipe" in dry.err


def test_an_engine_restricts_the_search(cli: Callable[..., Result], here: Path) -> None:
    result = cli("init", *SHAPE, *JOB, "--engine", "accelerate")
    assert result.code == 0, result.err
    assert 'backend: "accelerate"' in result.out and 'strategy: "zero"' not in result.out


def test_nothing_fits_is_exit_1_and_writes_nothing(cli: Callable[..., Result], here: Path) -> None:
    result = cli("init", "--hf-config", "config.json", "--gpus-per-node", "1", "--gpu", "rtx3090",
                 "--global-batch", "8", "--seq-len", "8192", "-o", "r.yaml")
    assert result.code == 1
    assert "none of the " in result.err and "fits 24GB per GPU (rtx3090)" in result.err
    assert not (here / "r.yaml").exists()


def test_host_memory_is_checked_and_named_when_it_binds(cli: Callable[..., Result], here: Path) -> None:
    """`--cpu-memory` is `cluster.cpu_memory`: without it the offloaded winner says how much host
    memory it needs, unchecked; with too little, nothing fits and the host is named as what binds."""
    config = str(ROOT / "tests" / "corpus" / "hf_configs" / "real" / "deepseek-v3.json")
    job = ("--hf-config", config, "--nodes", "4", "--gpus-per-node", "8", "--gpu", "h100", "--global-batch",
           "128", "--seq-len", "4096")
    unchecked = cli("init", *job)
    assert unchecked.code == 0, unchecked.err
    assert "host 2.68 TB per node (cluster.cpu_memory not set: not checked)" in unchecked.out
    result = cli("init", *job, "--cpu-memory", "2TB", "-o", "r.yaml")
    assert result.code == 1
    assert "per GPU (h100): host memory binds: the candidates that fit 80 GB per GPU offload" in result.err
    assert "needs host 2.68 TB per node of 2 TB" in result.err and not (here / "r.yaml").exists()
    roomy = cli("init", *job, "--cpu-memory", "3TB")
    assert roomy.code == 0 and "  cpu_memory: \"3TB\"" in roomy.out and " of 3 TB" in roomy.out


def test_an_existing_file_is_kept_without_force(cli: Callable[..., Result], here: Path) -> None:
    (here / "r.yaml").write_text("mine")
    assert cli("init", *SHAPE, *JOB, "-o", "r.yaml").code == 2
    assert (here / "r.yaml").read_text() == "mine"
    assert cli("init", *SHAPE, *JOB, "-o", "r.yaml", "--force").code == 0
    assert (here / "r.yaml").read_text().startswith("# Written by distrecipe init")


def test_a_contradicting_gpu_memory_is_the_user_s_error(cli: Callable[..., Result], here: Path) -> None:
    result = cli("init", *SHAPE, *JOB, "--gpu-memory", "40GB")
    assert result.code == 2
    assert result.err.startswith("distrecipe: error: cluster.gpu_memory 40 GB contradicts cluster.gpu a100-80gb")


def test_init_loads_no_engine(here: Path) -> None:
    assert run_probe("init", *SHAPE, *JOB, "-o", str(here / "r.yaml")) == "HEAVY:"


def _converse(args: list[str], cwd: Path, answers: list[tuple[str, str]]) -> tuple[int, str]:
    """Run distrecipe on a pseudo-terminal, answering each prompt when it appears."""
    leader, follower = pty.openpty()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"}
    proc = subprocess.Popen([sys.executable, "-m", "distrecipe", *args], cwd=cwd, env=env,
                            stdin=follower, stdout=follower, stderr=follower, close_fds=True)
    os.close(follower)
    seen = b""
    deadline = time.monotonic() + 120

    def read_until(text: str) -> None:
        nonlocal seen
        while text.encode() not in seen:
            assert time.monotonic() < deadline, f"no prompt {text!r} in {seen.decode(errors='replace')!r}"
            ready, _, _ = select.select([leader], [], [], 1)
            if ready:
                try:
                    seen += os.read(leader, 4096)
                except OSError:
                    raise AssertionError(f"ended before {text!r}: {seen.decode(errors='replace')!r}") from None

    for prompt, answer in answers:
        read_until(prompt)
        os.write(leader, answer.encode() + b"\n")
    while proc.poll() is None or select.select([leader], [], [], 0.2)[0]:
        assert time.monotonic() < deadline
        try:
            chunk = os.read(leader, 4096)
        except OSError:
            break
        if not chunk:
            break
        seen += chunk
    os.close(leader)
    return proc.wait(), seen.decode(errors="replace")


def test_on_a_terminal_it_asks_for_what_is_missing(here: Path) -> None:
    code, shown = _converse(["init", "--gpu", "a100-80gb", "-o", "asked.yaml"], here, [
        ("Hugging Face config.json of the model", "config.json"),
        ("nodes [1]", ""),
        ("GPUs per node", "8"),
        ("global batch (samples per optimizer step)", "64"),
        ("sequence length (tokens per sample)", "2048"),
    ])
    assert code == 0, shown
    assert "GPU model" not in shown  # given as a flag: not asked
    assert "wrote asked.yaml" in shown
    plan = load_plan(here / "asked.yaml")
    assert (plan.dims.world, plan.batch.global_, plan.recipe.batch.seq_len) == (8, 64, 2048)


def test_on_a_terminal_it_asks_for_the_shape_without_a_config(here: Path) -> None:
    code, shown = _converse(["init", *JOB, "-o", "shape.yaml"], here, [
        ("Hugging Face config.json of the model", ""),
        ("model hidden size", "1024"), ("model layers", "8"), ("model heads", "16"),
        ("model intermediate size", "4096"), ("model vocab", "32000"), ("nodes [1]", "1"),
    ])
    assert code == 0, shown
    assert load_plan(here / "shape.yaml").recipe.model.hidden_size == 1024


MIXTRAL = ROOT / "tests" / "corpus" / "hf_configs" / "reconstructed" / "mixtral-8x7b.classdefaults.json"


def test_headroom_keeps_the_winner_off_the_edge(cli: Callable[..., Result], here: Path) -> None:
    """The issue's new-user finding: Mixtral's winner on 4 × 8 A100-80GB used 76.9 of 80 GB with no
    way to ask for headroom (FSDP2, TP 2, micro 4). The torch family now takes the wide band (its
    rows are one source's), so nothing offered reaches past 80 GB at the band's top, but some
    reach past 76 GB; with 5 % kept (76 GB) nothing tight is offered, and nothing whose top
    passes 76 GB; the written recipe keeps the headroom."""
    job = ("--hf-config", str(MIXTRAL), "--nodes", "4", *JOB)
    assert cli("init", *job, "-o", "plain.yaml").code == 0
    plain = search(load_recipe(str(here / "plain.yaml"), ()), 8).ranked
    tops = [c.estimate.verdict.high for c in plain]  # type: ignore[union-attr]
    assert max(tops) <= 80e9 and any(top > 76e9 for top in tops)
    kept = cli("init", *job, "--headroom", "0.05", "-o", "r.yaml")
    assert kept.code == 0, kept.err
    text = (here / "r.yaml").read_text()
    assert "  headroom: 0.05\n" in text
    winner = estimate(load_plan(str(here / "r.yaml"), ()))
    assert winner.comfortable and winner.verdict is not None and winner.verdict.high <= 76e9
    ranked = search(load_recipe(str(here / "r.yaml"), ()), 8).ranked
    assert ranked and all(c.estimate.comfortable for c in ranked)  # nothing tight is offered
    assert all(c.estimate.verdict.high <= 76e9 for c in ranked)  # type: ignore[union-attr]
    assert not [c for c in ranked if c.estimate.need > 76e9]
    sized = cli("init", *job, "--headroom", "4GB")
    assert sized.code == 0 and "  headroom: \"4GB\"\n" in sized.out
