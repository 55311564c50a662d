"""`launch --skypilot` (launch/skypilot.py): the task file, judged by SkyPilot's own code.

The judge is SkyPilot 0.14.1's task schema and `Task.from_yaml_config`, run by
`.venv-skypilot` (`make skypilot`; it cannot share the project's venv) in one
subprocess over every emitted file (tests/launch/skypilot_judge.py). Each file's `run`
is also executed, as a dry run, on every node it would run on: the same command with
SkyPilot's variables set, as SkyPilot sets them, must be accepted by distrecipe's
allocation reader and launchers.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from distrecipe.commands.launch import KINDS
from distrecipe.launch.skypilot import ACCELERATORS
from tests.conftest import SCRIPTS

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "recipes" / "tiny-cpu.yaml"
SEED = ROOT / "recipes" / "seed-8b-32gpu-zero2.yaml"
RECIPES = sorted((ROOT / "recipes").glob("*.yaml"))
SKY_PYTHON = ROOT / ".venv-skypilot" / "bin" / "python"
JUDGE = Path(__file__).with_name("skypilot_judge.py")
RL = ("--set", "rl.rollout_n=4", "--set", "rl.prompts_per_step=128")

Cli = Callable[..., Any]


def task(cli: Cli, recipe: str | Path, *args: str | Path) -> dict[str, Any]:
    result = cli("launch", recipe, "--skypilot", *args)
    assert result.code == 0, result.err
    loaded: dict[str, Any] = yaml.safe_load(result.out)
    return loaded


def judge(files: list[Path], home: Path) -> list[dict[str, Any]]:
    """SkyPilot's verdict on each file, from SkyPilot's own interpreter."""
    if not SKY_PYTHON.exists():
        if os.environ.get("DISTRECIPE_SKYPILOT") == "0":
            pytest.skip("DISTRECIPE_SKYPILOT=0")
        pytest.fail(f"{SKY_PYTHON} is missing: run `make skypilot` (make test builds it)")
    done = subprocess.run([str(SKY_PYTHON), str(JUDGE), *map(str, files)], capture_output=True, text=True,
                          timeout=300, env={"HOME": str(home), "PATH": os.environ.get("PATH", "/usr/bin")},
                          check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return [json.loads(line) for line in done.stdout.splitlines()]


def test_a_gpu_task(cli: Cli) -> None:
    got = task(cli, SEED, "--set", "cluster.gpu=h100", "--", "train.py", "--lr", "1e-5")
    assert got == {
        "name": "seed-8b-32gpu-zero2", "num_nodes": 4, "resources": {"accelerators": "H100:8"},
        "workdir": str(Path.cwd()), "setup": "python3 -m pip install -e '.[deepspeed]'\n",
        "run": ("python3 -m distrecipe launch recipes/seed-8b-32gpu-zero2.yaml --set cluster.gpu=h100 "
                "--target deepspeed --runs-root runs -- train.py --lr 1e-5\n"),
    }


def test_the_run_block_reads_skypilot_s_variables_through_distrecipe(cli: Cli) -> None:
    """No shell arithmetic, no variable at all: each node's distrecipe reads its rank."""
    run = task(cli, SEED)["run"]
    assert "$" not in run and run.count("\n") == 1


@pytest.mark.parametrize(("gpu", "name"), sorted(ACCELERATORS.items()))
def test_every_gpu_the_recipe_names_has_skypilot_s_name(cli: Cli, gpu: str, name: str,
                                                        tmp_path: Path) -> None:
    recipe = tmp_path / "r.yaml"  # the seed without its 80 GB, which only some of these GPUs have
    recipe.write_text(SEED.read_text().replace(", gpu_memory: 80GB", ""))
    sets = ("--set", f"cluster.gpu={gpu}", "--set", f"launch.skypilot.workdir={tmp_path}",
            "--allow-no-fit")  # the 8B seed fits only the larger of them
    assert task(cli, recipe, *sets)["resources"] == {"accelerators": f"{name}:8"}


def test_an_unknown_gpu_is_a_placeholder_sky_launch_refuses(cli: Cli) -> None:
    result = cli("launch", SEED, "--skypilot")
    assert yaml.safe_load(result.out)["resources"] == {"accelerators": "SET-cluster.gpu:8"}
    assert result.err == ("distrecipe: the recipe names no GPU model (cluster.gpu): resources.accelerators is "
                          "written SET-cluster.gpu:8, which sky launch refuses; set cluster.gpu or "
                          "launch.skypilot.accelerator, or pass sky launch --gpus NAME:8\n")
    named = task(cli, SEED, "--set", "launch.skypilot.accelerator=H100-MEGA", "--set", "cluster.gpu=h100")
    assert named["resources"] == {"accelerators": "H100-MEGA:8"}, "the stated name wins"


def test_cpu_ranks_ask_for_cores(cli: Cli) -> None:
    assert task(cli, TINY)["resources"] == {"cpus": "2+"}


@pytest.mark.parametrize(("target", "kind", "setup"), [
    ("torchrun", "torchrun", "python3 -m pip install -e . torch"),
    ("accelerate", "hf", "python3 -m pip install -e '.[accelerate,hf]'"),
    ("accelerate-deepspeed", "accelerate", "python3 -m pip install -e '.[accelerate,deepspeed]'"),
])
def test_setup_installs_the_launcher_s_extras(cli: Cli, target: str, kind: str, setup: str) -> None:
    got = task(cli, SEED, "--set", "strategy=fsdp" if target == "accelerate" else "stage=2", "--target", target,
               "--program-kind", kind)
    assert got["setup"] == setup + "\n"


def distrecipe_source(path: Path) -> bool:
    """Whether `path` is a source tree pip installs as distrecipe (its pyproject's name)."""
    pyproject = path / "pyproject.toml"
    return pyproject.is_file() and 'name = "distrecipe"' in pyproject.read_text()


def install_dir(setup: str, workdir: Path, home: Path) -> Path:
    """The directory the setup's `pip install -e DIR[extras]` installs from, on a node whose
    working directory is the synced workdir and whose home is `home`."""
    words = shlex.split(setup.replace("$HOME", str(home)))
    target = words[words.index("-e") + 1].split("[")[0]
    return workdir / target


def test_setup_installs_distrecipe_from_the_synced_workdir(cli: Cli, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """No distrecipe release is on the package index: the nodes install the one this
    launch runs, from its source tree, which the workdir SkyPilot syncs holds."""
    monkeypatch.chdir(ROOT)
    text = cli("launch", SEED, "--skypilot", "--set", "cluster.gpu=h100", "--", "train.py").out
    written = yaml.safe_load(text)
    assert "distrecipe==" not in written["setup"] and "file_mounts" not in written
    assert distrecipe_source(install_dir(written["setup"], Path(written["workdir"]), tmp_path))
    (tmp_path / "task.yaml").write_text(text)
    (verdict,) = judge([tmp_path / "task.yaml"], tmp_path / "home")
    assert verdict["ok"], verdict["error"]
    assert verdict["setup"] == written["setup"] and verdict["workdir"] == str(ROOT)


def test_a_distrecipe_outside_the_workdir_is_mounted_and_installed(cli: Cli, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A project of its own (recipe and script in it) run by a distrecipe checked out
    elsewhere: SkyPilot mounts that checkout on every node and setup installs it."""
    project = tmp_path / "proj"
    project.mkdir()
    (project / "r.yaml").write_text(TINY.read_text())
    (project / "train.py").write_text(SCRIPTS["deepspeed"])
    monkeypatch.chdir(project)
    text = cli("launch", "r.yaml", "--skypilot", "--", "train.py").out
    written = yaml.safe_load(text)
    ((remote, local),) = written["file_mounts"].items()
    assert local == str(ROOT) and remote.startswith("~/")
    home = tmp_path / "node-home"
    mounted = home / remote.removeprefix("~/")
    mounted.parent.mkdir(parents=True)
    mounted.symlink_to(ROOT)  # what SkyPilot's rsync leaves on the node
    assert distrecipe_source(install_dir(written["setup"], project, home))
    (tmp_path / "task.yaml").write_text(text)
    (verdict,) = judge([tmp_path / "task.yaml"], tmp_path / "home")
    assert verdict["ok"], verdict["error"]
    assert verdict["file_mounts"] == {remote: str(ROOT)}


def test_a_stated_setup_and_workdir(cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "proj" / "cfg").mkdir(parents=True)
    setup = "  skypilot:\n    workdir: proj\n    setup: |\n      pip install -e .\n      pip install deepspeed\n"
    (tmp_path / "proj" / "cfg" / "r.yaml").write_text(
        TINY.read_text().replace("launch: {backend: deepspeed}\n", "launch:\n  backend: deepspeed\n" + setup))
    monkeypatch.chdir(tmp_path)
    got = task(cli, "proj/cfg/r.yaml", "--", "proj/train.py")
    assert got["workdir"] == str(tmp_path / "proj")
    assert got["setup"] == "pip install -e .\npip install deepspeed\n"
    assert got["run"].startswith("python3 -m distrecipe launch cfg/r.yaml ")
    assert got["run"].endswith("--target deepspeed --runs-root runs -- train.py\n"), "the nodes' own runs/"


def test_what_lies_outside_the_workdir_is_refused(cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "proj").mkdir()
    monkeypatch.chdir(tmp_path / "proj")
    result = cli("launch", TINY, "--skypilot")
    assert result.code == 2
    assert result.err == (f"distrecipe: error: the recipe {TINY} lies outside the SkyPilot workdir {tmp_path}/proj, "
                          "the one directory SkyPilot copies to the nodes; set launch.skypilot.workdir to a "
                          "directory that holds it\n")
    missing = cli("launch", TINY, "--skypilot", "--set", "launch.skypilot.workdir=nowhere")
    assert missing.code == 2 and "launch.skypilot.workdir" in missing.err and "is not a directory" in missing.err


def test_an_absolute_script_outside_the_workdir_is_the_image_s(cli: Cli) -> None:
    assert task(cli, TINY, "--", "/opt/train.py")["run"].endswith("-- /opt/train.py\n")
    assert task(cli, TINY, "--", "-m", "pkg.train")["run"].endswith("-- -m pkg.train\n")


def test_verl_gets_a_ray_head_on_node_0(cli: Cli) -> None:
    run = task(cli, SEED, *RL, "--target", "verl", "--", "trainer.total_epochs=1")["run"]
    lines = run.splitlines()
    head = lines.index('if [ "$SKYPILOT_NODE_RANK" = 0 ]; then')
    assert lines[head + 1] == "  ray start --head --port=6379 --num-gpus=8 --disable-usage-stats"
    assert '-ge 4 ]; do' in lines[head + 2]
    assert lines[head + 5].startswith("  RAY_ADDRESS=127.0.0.1:6379 python3 -m distrecipe launch ")
    assert lines[head + 5].endswith("--target verl --runs-root runs -- trainer.total_epochs=1")
    assert lines[head + 7] == '  head_ip=$(echo "$SKYPILOT_NODE_IPS" | head -n1)'
    assert 'ray start --address="$head_ip:6379" --num-gpus=8' in lines[head + 8]
    assert subprocess.run(["bash", "-n", "-c", run], check=False).returncode == 0


def test_openrlhf_needs_a_stated_setup(cli: Cli) -> None:
    """No distrecipe extra installs OpenRLHF (its wheel pins vLLM, flash-attn and Ray builds),
    so the default setup is refused; with a stated one, node 0 runs it on a Ray cluster as verl."""
    models = ("--actor.model_name_or_path", "m", "--reward.remote_url", "http://rm", "--data.prompt_dataset", "d")
    sleeping = ("--set", "rl.rollout_memory=0.4", "--set", "rl.free_rollout_memory=true")  # else it does not fit
    refused = cli("launch", SEED, *RL, *sleeping, "--target", "openrlhf", "--skypilot", "--", *models)
    assert refused.code == 2 and "distrecipe has no extra that installs openrlhf" in refused.err
    assert "set launch.skypilot.setup" in refused.err
    run = task(cli, SEED, *RL, *sleeping, "--set", "launch.skypilot.setup=pip install openrlhf==0.11.2",
               "--target", "openrlhf", "--", *models)["run"]
    lines = run.splitlines()
    assert lines[0] == "# OpenRLHF's multi-node recipe: a Ray head on node 0, the other nodes join it, and once"
    head = lines.index('if [ "$SKYPILOT_NODE_RANK" = 0 ]; then')
    assert lines[head + 5].startswith("  RAY_ADDRESS=127.0.0.1:6379 python3 -m distrecipe launch ")
    assert lines[head + 5].endswith("--target openrlhf --runs-root runs -- " + " ".join(models))


def matrix() -> list[tuple[Path, str]]:
    """Every recipe × kind SkyPilot's default setup installs: not OpenRLHF (no distrecipe
    extra installs it; `test_openrlhf_needs_a_stated_setup`)."""
    return [(recipe, kind) for recipe in RECIPES for kind in KINDS if kind != "openrlhf"]


def kind_args(recipe: Path, kind: str) -> tuple[str, ...]:
    """A launcher that serves `kind` for `recipe` (a recipe's own launcher where it can)."""
    strategy = yaml.safe_load(recipe.read_text())["strategy"]
    target = {"hf": None, "torchrun": "torchrun", "deepspeed": "deepspeed", "verl": "verl",
              "accelerate": "accelerate-deepspeed" if strategy == "zero" else "accelerate"}[kind]
    args = ("--program-kind", kind, "--allow-no-fit") + (("--target", target) if target else ())  # seed DDP
    return args + (RL if kind == "verl" else ())


def test_every_shipped_recipe_and_kind_gives_a_task_skypilot_accepts(
        cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every recipe × program kind: SkyPilot's schema and parser accept the file, read the
    plan's nodes and GPUs from it, and each node's `run` (non-verl: the one command) is
    accepted by distrecipe with SkyPilot's variables for that node (`--dry-run`)."""
    monkeypatch.chdir(ROOT)
    files: list[Path] = []
    for recipe, kind in matrix():
        result = cli("launch", recipe.relative_to(ROOT), *kind_args(recipe, kind), "--skypilot", "--", "train.py")
        assert result.code == 0, (recipe.name, kind, result.err)
        files.append(tmp_path / f"{recipe.stem}-{kind}.yaml")
        files[-1].write_text(result.out)
    control = tmp_path / "control-typo.yaml"
    control.write_text(files[0].read_text().replace("num_nodes:", "num_node:"))
    verdicts = judge([*files, control], tmp_path / "home")
    assert verdicts[-1]["ok"] is False and "did you mean 'num_nodes'" in verdicts[-1]["error"], \
        "the judge refuses a typo, or agreeing would prove nothing"
    for path, verdict in zip(files, verdicts, strict=False):
        assert verdict["ok"], (path.name, verdict["error"])
        written = yaml.safe_load(path.read_text())
        assert verdict["num_nodes"] == written["num_nodes"] and verdict["workdir"] == str(ROOT)
        if "accelerators" in written["resources"]:
            name, count = written["resources"]["accelerators"].split(":")
            assert verdict["accelerators"] == {name: int(count)}
        else:
            assert verdict["cpus"] == written["resources"]["cpus"]
    for path in files:
        run_on_every_node(cli, yaml.safe_load(path.read_text()), monkeypatch, tmp_path)


def run_on_every_node(cli: Cli, written: dict[str, Any], monkeypatch: pytest.MonkeyPatch, tmp: Path) -> None:
    nodes = written["num_nodes"]
    run = written["run"]
    if run.startswith("#"):  # verl's Ray wrapper: node 0 runs the launch, with RAY_ADDRESS
        line = next(line for line in run.splitlines() if "RAY_ADDRESS=" in line).strip()
        monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:6379")
        words, ranks = shlex.split(line.split(" ", 1)[1]), [0]
    else:
        words, ranks = shlex.split(run), list(range(nodes))
    assert words[:4] == ["python3", "-m", "distrecipe", "launch"]
    split = words.index("--") if "--" in words else len(words)
    # The node's working directory is the synced workdir: the recipes, and the program.
    workdir = tmp / "workdir"
    workdir.mkdir(exist_ok=True)
    if not (workdir / "recipes").exists():
        (workdir / "recipes").symlink_to(ROOT / "recipes")
    kind = words[words.index("--program-kind") + 1] if "--program-kind" in words else "deepspeed"
    (workdir / "train.py").write_text(SCRIPTS.get(kind, SCRIPTS["deepspeed"]), encoding="utf-8")
    monkeypatch.chdir(workdir)
    ips = "\n".join(f"10.0.0.{i + 1}" for i in range(nodes))
    for rank in ranks:
        for name, value in {"SKYPILOT_NODE_RANK": str(rank), "SKYPILOT_NODE_IPS": ips,
                            "SKYPILOT_NUM_NODES": str(nodes), "SKYPILOT_TASK_ID": "sky-test_c_1"}.items():
            monkeypatch.setenv(name, value)
        result = cli(*words[3:split], "--dry-run", "--run-dir", tmp / "node", *words[split:])
        if "accelerate" in words and "cpu" in json.dumps(written["resources"]):
            # Accelerate runs no CPU ranks: the node says so, as `launch` would without SkyPilot.
            assert result.code == 2 and "Accelerate cannot run" in result.err
            return
        assert result.code == 0, (written["name"], words, result.err)
        argv = json.loads(result.out)["argv"]
        if nodes > 1 and "deepspeed" in Path(argv[0]).name:
            assert argv[3:6] == ["--no_ssh", "--node_rank", str(rank)]
        if nodes > 1 and "torchrun" in Path(argv[0]).name:
            assert argv[argv.index("--node-rank") + 1] == str(rank)


def pinned() -> str:
    """The SkyPilot version the Makefile installs into .venv-skypilot (its lock file)."""
    lock = (ROOT / "requirements" / "skypilot.txt").read_text()
    return next(line for line in lock.splitlines() if line.startswith("skypilot==")).split("==")[1].strip()


def test_one_skypilot_version_is_pinned() -> None:
    assert f'skypilot = ["skypilot=={pinned()}"]' in (ROOT / "pyproject.toml").read_text()
    assert f'"skypilot": ("skypilot=={pinned()}",)' in (ROOT / "scripts" / "lock.py").read_text()


def test_the_judge_refuses_what_skypilot_refuses(tmp_path: Path) -> None:
    good = "name: t\nnum_nodes: 2\nresources:\n  accelerators: H100:8\nrun: echo\n"
    cases = {"typo": good.replace("num_nodes", "num_node"), "string nodes": good.replace("2", "two"),
             "resources typo": good.replace("accelerators", "acelerators")}
    files = []
    for name, text in cases.items():
        files.append(tmp_path / f"{name.replace(' ', '-')}.yaml")
        files[-1].write_text(text)
    verdicts = judge(files, tmp_path / "home")
    assert [v["ok"] for v in verdicts] == [False, False, False]
    assert {v["skypilot"] for v in verdicts} == {pinned()}, "the judge is the pinned SkyPilot"
    assert "did you mean 'num_nodes'" in verdicts[0]["error"]
    assert "'two' is not of type 'integer'" in verdicts[1]["error"]
    assert "acelerators" in verdicts[2]["error"]


def test_sys_executable_is_not_the_node_s_interpreter(cli: Cli) -> None:
    """The nodes are other machines: `run` calls their python3, never this venv's path."""
    assert sys.executable not in task(cli, TINY)["run"]
