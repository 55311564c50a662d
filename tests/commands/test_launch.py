"""`distrecipe launch` refuses what `plan` refuses: a plan that does not fit, a layout the
program cannot carry; and what `compile` refuses: a recipe or a config file lint rejects.
Each as positioned lines and exit 2, nothing started."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from distrecipe.api import load_plan
from distrecipe.launch.prepare import check_fit
from distrecipe.launch.rundir import RUN_RECORD, RunDir
from tests.conftest import RECIPES, Result

SEED = RECIPES / "seed-8b-32gpu-zero2.yaml"
TINY = RECIPES / "tiny-cpu.yaml"
NO_FIT = ("--set", "cluster.nodes=1", "--set", "cluster.gpus_per_node=2", "--set", "batch.global=64")
"""The seed on 2 GPUs: micro 2 needs 125.66 GB of 80 (`distrecipe plan` says no)."""
Cli = Callable[..., Result]


def at(path: Path, key: str) -> str:
    """`file:line:` of the line that states `key` (a top-level or a flow-mapping key)."""
    line = next(n for n, text in enumerate(path.read_text().splitlines(), 1) if f"{key}:" in text)
    return f"{path}:{line}:"


def test_a_plan_that_does_not_fit_is_refused_with_plan_s_figures(cli: Cli, tmp_path: Path) -> None:
    result = cli("launch", SEED, *NO_FIT, "--dry-run", "--run-dir", tmp_path / "run")
    assert result.code == 2 and result.out == ""
    assert result.err.startswith(at(SEED, "gpu_memory"))
    assert ("error: the plan does not fit: ZeRO-2 needs 125.66 GB (117.0 GiB) per GPU of 80 GB (74.5 GiB) "
            "(distrecipe plan shows what to change); --allow-no-fit launches it anyway") in result.err
    assert result.err.count("\n") == 1
    assert cli("plan", SEED, *NO_FIT).code == 1  # the same judgement


def test_a_tight_plan_warns_with_its_band_and_launches(cli: Cli, tmp_path: Path) -> None:
    """The seed's ZeRO-1 needs 84.96 GB by the plan, within DeepSpeed's band of 80 GB: only
    *does not fit* is refused; *tight* is lint's DR372 warning, at the key."""
    zero1 = RECIPES / "seed-8b-32gpu-zero1.yaml"
    result = cli("launch", zero1, "--dry-run", "--run-dir", tmp_path / "run")
    assert result.code == 0, result.err
    assert f"{at(zero1, 'gpu_memory')}51: warning DR372: tight: ZeRO-1 needs 84.96 GB per GPU (−6.8 % … +7.8 %: " \
           "79.15 GB–91.56 GB, deepspeed × eager-hf)" in result.err
    assert "does not fit" not in result.err
    assert json.loads(result.out)["argv"][0].endswith("deepspeed")
    assert cli("plan", zero1).code == 0  # the same judgement
    refused = cli("launch", zero1, "--set", "cluster.headroom=4GB", "--dry-run", "--run-dir", tmp_path / "run2")
    assert refused.code == 2
    assert "error: the plan does not fit: ZeRO-1 needs 84.96 GB (79.1 GiB) per GPU of 80 GB (74.5 GiB) less " \
           "cluster.headroom 4 GB (3.7 GiB)" in refused.err


def test_allow_no_fit_launches_it_and_says_so(cli: Cli, tmp_path: Path) -> None:
    result = cli("launch", SEED, *NO_FIT, "--allow-no-fit", "--dry-run", "--run-dir", tmp_path / "run")
    assert result.code == 0, result.err
    assert "distrecipe: --allow-no-fit: the plan does not fit (ZeRO-2 needs 125.66 GB" in result.err
    assert json.loads(result.out)["argv"][0].endswith("deepspeed")


def test_allow_no_fit_reaches_every_node_s_launch(cli: Cli, tmp_path: Path) -> None:
    result = cli("launch", SEED, *NO_FIT, "--allow-no-fit", "--slurm", "--runs-root", tmp_path)
    assert result.code == 0, result.err
    assert " --allow-no-fit" in result.out
    assert cli("launch", SEED, *NO_FIT, "--slurm", "--runs-root", tmp_path).code == 2
    k8s = cli("launch", SEED, *NO_FIT, "--allow-no-fit", "--k8s")
    assert k8s.code == 0, k8s.err
    assert "--allow-no-fit" in k8s.out


@pytest.mark.parametrize("cut", [None, ", gpu_memory: 80GB", "  hidden_size: 4096\n"])
def test_what_cannot_be_judged_is_not_refused(cli: Cli, tmp_path: Path, cut: str | None,
                                              write: Callable[[str, str], Path]) -> None:
    """CPU ranks (the tiny recipe), no GPU memory, no model shape: nothing to judge, nothing refused."""
    recipe, extra = (TINY, ()) if cut is None else (write("r.yaml", SEED.read_text().replace(cut, "")), NO_FIT)
    assert cut is None or cut not in recipe.read_text()
    result = cli("launch", recipe, *extra, "--dry-run", "--run-dir", tmp_path / "run")
    assert result.code == 0, result.err
    assert "does not fit" not in result.err


def test_run_json_records_what_was_judged(tmp_path: Path) -> None:
    plan = load_plan(str(SEED), NO_FIT[1::2])
    said: list[str] = []
    fit = check_fit(plan, allow_no_fit=True, say=said.append)
    record = RunDir(tmp_path / "run")
    record.start(plan=plan, recipe_text=SEED.read_text(), files={}, argv=("true",), env={}, cwd=str(tmp_path),
                 fit=fit)
    got = json.loads((tmp_path / "run" / RUN_RECORD).read_text())["fit"]
    assert got == {"fits": False, "verdict": "does not fit", "needed_bytes": pytest.approx(125.66e9, rel=1e-3),
                   "gpu_memory_bytes": 80_000_000_000, "allow_no_fit": True}
    assert len(said) == 1
    assert check_fit(load_plan(str(SEED), ()), allow_no_fit=False, say=said.append)["fits"] is True


def test_the_searched_fsdp2_context_parallel_is_refused_for_a_trainer_script(
        cli: Cli, tmp_path: Path, write: Callable[[str, str], Path]) -> None:
    """The issue's case: FSDP2, context parallel 4, micro 1 × accumulation 128 on 16 GPUs under
    torchrun with an HF Trainer script ran DP 16, global 2,048 instead of 512."""
    best = tmp_path / "best.yaml"
    text = SEED.read_text().replace("cluster: {nodes: 4,", "cluster: {nodes: 2, gpu: h100,")
    text = text.replace("strategy: zero\nstage: 2", "strategy: fsdp\nstage: 3\nparallel: {sequence: 4}")
    text = text.replace("batch: {micro: 2, accumulation: auto, global: 256", "batch: {micro: 1, accumulation: 128, "
                        "global: 512")
    best.write_text(text)
    assert cli("plan", best).code == 0  # it fits: only the program refuses it
    script = write("train.py", "from transformers import Trainer, TrainingArguments\n")
    result = cli("launch", best, "--dry-run", "--run-dir", tmp_path / "run", "--", script)
    assert result.code == 2 and result.out == ""
    assert result.err.startswith(at(best, "parallel"))
    assert ("error: program kind hf cannot run this recipe: parallel.sequence 4: the HF Trainer takes tensor "
            "and context parallelism only from `accelerate launch`'s parallelism_config") in result.err
    assert "it would run DP 16, global 1 × 128 × 16 = 2048, not 512; change parallel.sequence" in result.err
    accelerate = cli("launch", best, "--target", "accelerate", "--dry-run", "--run-dir", tmp_path / "run2",
                     "--", script)
    assert accelerate.code == 0, accelerate.err  # parallelism_config carries it


def test_ulysses_for_a_plain_torchrun_script_is_refused_at_its_key(
        cli: Cli, tmp_path: Path, write: Callable[[str, str], Path]) -> None:
    script = write("train.py", "import torch\n")
    result = cli("launch", SEED, "--set", "parallel.sequence=2", "--target", "torchrun", "--dry-run",
                 "--run-dir", tmp_path / "run", "--", script)
    assert result.code == 2
    assert result.err.startswith("--set parallel.sequence=2:1:")
    assert "program kind torchrun cannot run this recipe: parallel.sequence 2: a torchrun program (no " \
           "deepspeed.initialize) builds no DeepSpeed Ulysses or AutoTP groups" in result.err


def test_a_torchrun_script_is_told_to_checkpoint_its_own_blocks(
        cli: Cli, tmp_path: Path, write: Callable[[str, str], Path]) -> None:
    script = write("train.py", "import torch\n")
    result = cli("launch", SEED, "--set", "strategy=fsdp", "--set", "stage=3", "--target", "torchrun",
                 "--dry-run", "--run-dir", tmp_path / "run", "--", script)
    assert result.code == 0, result.err
    assert "warning DR222: torchrun: not carried" in result.err
    assert "activation_checkpointing full: the program reads it from the plan (DISTRECIPE_PLAN)" in result.err


MISSPELT = TINY.read_text() + "native:\n  deepspeed:\n    zero_optimization:\n      overlap_com: true\n"


@pytest.mark.parametrize("mode", [("--dry-run",), ("--slurm",), ("--k8s",), ()], ids=lambda m: m[0] if m else "run")
def test_a_recipe_lint_rejects_is_not_launched(cli: Cli, tmp_path: Path, write: Callable[[str, str], Path],
                                               mode: tuple[str, ...]) -> None:
    """compile writes nothing for it; launch starts nothing, on every platform's path."""
    recipe = write("r.yaml", MISSPELT)
    result = cli("launch", recipe, *mode, "--runs-root", tmp_path / "runs")
    assert result.code == 2 and result.out == ""
    line = len(MISSPELT.splitlines())
    assert f"{recipe}:{line}:7: error DR313: 'overlap_com' is not a key of DeepSpeed" in result.err
    assert "distrecipe: error: nothing launched: lint reports 1 error (DR313)" in result.err
    assert not (tmp_path / "runs").exists()
    assert cli("compile", recipe).code == 1  # the same judgement


def test_a_code_silenced_for_lint_is_silenced_for_launch(cli: Cli, tmp_path: Path,
                                                         write: Callable[[str, str], Path]) -> None:
    recipe = write("r.yaml", MISSPELT.replace("overlap_com: true", "overlap_com: true  # distrecipe: ignore[DR313]"))
    result = cli("launch", recipe, "--dry-run", "--run-dir", tmp_path / "run")
    assert result.code == 0, result.err
    assert json.loads(result.out)["argv"][0].endswith("deepspeed")


def test_an_error_in_a_config_the_job_reads_is_not_launched(cli: Cli, tmp_path: Path,
                                                            write: Callable[[str, str], Path]) -> None:
    """A whole-file rule on the ds_config (DR310: an "auto" raw DeepSpeed reads) is run on
    the files the job reads, as compile runs it on what it writes."""
    recipe = write("r.yaml", TINY.read_text() + "native:\n  deepspeed:\n    zero_optimization:\n"
                                                "      stage3_max_live_parameters: \"auto\"\n")
    result = cli("launch", recipe, "--dry-run", "--run-dir", tmp_path / "run")
    assert result.code == 2 and result.out == ""
    assert "error DR310: \"auto\" at zero_optimization.stage3_max_live_parameters" in result.err
    assert "nothing launched: lint reports 1 error (DR310)" in result.err
    assert cli("compile", recipe, "-o", tmp_path / "out").code == 1


def test_launch_does_not_name_what_it_carries_itself_as_lost(cli: Cli, tmp_path: Path) -> None:
    """`launch.*` is not in the ds_config (compile names it, DR234), but launch's own argv
    and environment carry it: launch does not report it lost."""
    compiled = cli("compile", TINY)
    assert compiled.code == 0 and "DR234" in compiled.err and "launch.backend deepspeed" in compiled.err
    launched = cli("launch", TINY, "--dry-run", "--run-dir", tmp_path / "run")
    assert launched.code == 0, launched.err
    assert "launch.backend" not in launched.err and "DR234" not in launched.err


def test_a_program_file_that_does_not_exist_is_refused_before_anything_starts(
        cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A misspelt script would start every rank, each failing alike: refused first, dry run too."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text("print('training')\n", encoding="utf-8")
    for extra in (("--dry-run",), ()):
        result = cli("launch", TINY, *extra, "--run-dir", tmp_path / "run", "--", "trian.py", "--lr", "1e-5")
        assert result.code == 2 and result.out == ""
        assert result.err == ("distrecipe: error: the program trian.py (after --) does not exist; "
                              "did you mean 'train.py'?\n")
        assert not (tmp_path / "run").exists(), "nothing written, nothing started"
    (tmp_path / "pkg").mkdir()
    result = cli("launch", TINY, "--dry-run", "--run-dir", tmp_path / "run", "--", "pkg")
    assert result.code == 2
    assert result.err == "distrecipe: error: the program pkg (after --) is a directory without a __main__.py\n"


def test_a_recipe_s_missing_script_is_refused_at_its_key(cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         write: Callable[[str, str], Path]) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "train.py").write_text("print('training')\n", encoding="utf-8")
    recipe = write("r.yaml", TINY.read_text().replace("launch: {backend: deepspeed}",
                                                      "launch: {backend: deepspeed, script: scripts/trian.py}"))
    result = cli("launch", recipe, "--dry-run", "--run-dir", tmp_path / "run")
    assert result.code == 2
    assert result.err == (f"{at(recipe, 'script')}38: error: launch.script scripts/trian.py does not exist; "
                          "did you mean 'scripts/train.py'?\n")


def test_what_is_no_file_here_is_not_refused(cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             write: Callable[[str, str], Path]) -> None:
    """A module (`-m`) is found by the job's interpreter; a platform's file runs the script on
    its nodes (from an image, a synced workdir), whose own `distrecipe launch` checks it there."""
    monkeypatch.chdir(tmp_path)
    module = cli("launch", TINY, "--dry-run", "--run-dir", tmp_path / "run", "--", "-m", "pkg.train")
    assert module.code == 0, module.err
    assert json.loads(module.out)["argv"][-4:-2] == ["--module", "pkg.train"]
    recipe = write("seed.yaml", SEED.read_text())
    for platform in (("--k8s",), ("--skypilot",)):
        result = cli("launch", recipe.name, *platform, "--", "train.py")
        assert result.code == 0, result.err
