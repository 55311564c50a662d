"""`launch --slurm`'s sbatch lines an admin accepts (launch/slurm.py); the real cluster in tests/slurm.

Nothing only the cluster's owners know is assumed: CPUs are a placeholder until stated
(or `--exclusive`), memory is asked only when stated, the job starts in an absolute
`--chdir` and names every path absolutely. `launch.slurm.time` is SLURM's text as
written, whatever YAML 1.1 makes of `12:00:00`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "recipes" / "tiny-cpu.yaml"
SEED = ROOT / "recipes" / "seed-8b-32gpu-zero2.yaml"
TIMES = ["12:00:00", "1:00:00", "30", "2-00:00:00", "1-12", "0:30:00", "00:10:00", "default"]
SET = ("--partition", "debug", "--account", "default")

Cli = Callable[..., Any]


def sbatch(out: str) -> list[str]:
    return [line.removeprefix("#SBATCH ") for line in out.splitlines() if line.startswith("#SBATCH ")]


@pytest.mark.parametrize("time", TIMES)
def test_every_slurm_time_form_works_on_the_command_line(cli: Cli, time: str) -> None:
    result = cli("launch", TINY, "--slurm", *SET, "--cpus-per-task", "2", "--time", time)
    assert result.code == 0, result.err
    lines = sbatch(result.out)
    assert (f"--time={time}" in lines) == (time != "default")
    assert not any(line.startswith("--time") for line in lines) or time != "default"
    srun = result.out.splitlines()[-1]
    assert f"--set launch.slurm.time={time}" in srun, "each node's launch reads it back the same way"


@pytest.mark.parametrize("time", TIMES)
@pytest.mark.parametrize("style", ["block", "flow"])
def test_every_slurm_time_form_works_in_the_recipe(cli: Cli, write: Any, time: str, style: str) -> None:
    body = TINY.read_text().replace("launch: {backend: deepspeed}\n", "")
    if style == "block":
        body += f"launch:\n  backend: deepspeed\n  slurm:\n    time: {time}   # as SLURM writes it\n"
    else:
        body += f"launch: {{backend: deepspeed, slurm: {{time: {time}, partition: debug}}}}\n"
    result = cli("launch", write("r.yaml", body), "--slurm", *SET, "--cpus-per-task", "2")
    assert result.code == 0, result.err
    assert (f"--time={time}" in sbatch(result.out)) == (time != "default")


@pytest.mark.parametrize(("written", "shown"), [
    ("yes", "'yes'"), ("1.5", "'1.5'"), ("2024-01-01", "'2024-01-01'"), ("0x1e", "'0x1e'"), ("soon", "'soon'"),
    ("12:00:00:00", "'12:00:00:00'"),
])
def test_a_time_that_is_not_slurm_s_is_refused_as_written(cli: Cli, write: Any, written: str, shown: str) -> None:
    message = ("launch.slurm.time must be a SLURM time limit such as 2-00:00:00, 12:00:00 or 30, or default, "
               f"got {shown}")
    result = cli("launch", TINY, "--slurm", "--time", written)
    assert (result.code, result.err) == (2, f"--set launch.slurm.time={written}:1:19: error: {message}\n")
    recipe = write("r.yaml", TINY.read_text().replace("launch: {backend: deepspeed}",
                                                      f"launch: {{slurm: {{time: {written}}}}}"))
    result = cli("launch", recipe, "--slurm")
    assert (result.code, result.err) == (2, f"{recipe}:14:24: error: {message}\n")


def test_no_cpu_count_is_assumed(cli: Cli) -> None:
    result = cli("launch", SEED, "--slurm", *SET, "--time", "1:00:00")
    lines = sbatch(result.out)
    assert "--cpus-per-task=SET-launch.slurm.cpus_per_task" in lines
    assert not any(line.startswith("--mem") or line == "--exclusive" for line in lines)
    assert "echo 'distrecipe: set launch.slurm.cpus_per_task (or pass" in result.out
    assert "srun --ntasks-per-node=1 --kill-on-bad-exit=1 " in result.out


def test_exclusive_takes_the_whole_node_and_its_memory(cli: Cli) -> None:
    result = cli("launch", SEED, "--slurm", *SET, "--time", "1:00:00", "--exclusive", "--mem", "0")
    assert result.code == 0, result.err
    lines = sbatch(result.out)
    assert {"--exclusive", "--mem=0", "--gpus-per-node=8"} <= set(lines)
    assert not any(line.startswith("--cpus-per-task") for line in lines), "the whole node's CPUs"
    assert "exit 2" not in result.out, "nothing left unset"
    assert "--set launch.slurm.mem=0 --set launch.slurm.exclusive=true" in result.out.splitlines()[-1]


@pytest.mark.parametrize(("mem", "line"), [("512G", "--mem=512G"), ("64000", "--mem=64000"),
                                           ("default", None)])
def test_memory_as_slurm_writes_it(cli: Cli, mem: str, line: str | None) -> None:
    result = cli("launch", SEED, "--slurm", *SET, "--time", "1:00:00", "--cpus-per-task", "96", "--mem", mem)
    assert result.code == 0, result.err
    mems = [entry for entry in sbatch(result.out) if entry.startswith("--mem")]
    assert mems == ([line] if line else [])
    assert "srun --ntasks-per-node=1 --cpus-per-task=96 --kill-on-bad-exit=1 " in result.out


def test_bad_memory_and_cpus_are_refused(cli: Cli) -> None:
    bad = cli("launch", SEED, "--slurm", "--mem", "lots")
    assert bad.code == 2 and "launch.slurm.mem must be" in bad.err
    bad = cli("launch", SEED, "--slurm", "--set", "launch.slurm.cpus_per_task=none")
    assert bad.code == 2 and "launch.slurm.cpus_per_task" in bad.err


def test_every_path_is_absolute_and_the_job_starts_where_it_was_written(
        cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "recipe.yaml").write_text(TINY.read_text())
    result = cli("launch", "recipe.yaml", "--slurm", *SET, "--time", "5", "--cpus-per-task", "2",
                 "--runs-root", "out", "--", "train.py", "--data", "d.json")
    assert result.code == 0, result.err
    lines = sbatch(result.out)
    assert f"--chdir={tmp_path}" in lines
    assert f"--output={tmp_path}/out/tiny-cpu-slurm%j.out" in lines
    srun = result.out.splitlines()[-1]
    assert f" -m distrecipe launch {tmp_path}/recipe.yaml " in srun
    assert srun.endswith(f"--runs-root {tmp_path}/out -- {tmp_path}/train.py --data d.json")


def test_a_module_and_verl_overrides_are_no_paths(cli: Cli) -> None:
    result = cli("launch", TINY, "--slurm", *SET, "--time", "5", "--cpus-per-task", "2", "--", "-m", "pkg.train")
    assert result.out.splitlines()[-1].endswith("-- -m pkg.train")
    rl = ("--set", "rl.rollout_n=4", "--set", "rl.prompts_per_step=128", "--set", "strategy=fsdp")
    result = cli("launch", SEED, "--slurm", *SET, "--time", "5", "--cpus-per-task", "8", *rl, "--target", "verl",
                 "--", "trainer.total_epochs=1")
    assert result.code == 0, result.err
    assert result.out.splitlines()[-1].endswith("-- trainer.total_epochs=1")


RL_SETS = ("--set", "rl.rollout_n=4", "--set", "rl.prompts_per_step=128", "--set", "strategy=fsdp",
           "--target", "verl")


def test_verl_waits_for_its_ray_workers_with_the_resolved_ray(cli: Cli) -> None:
    """The Ray cluster is started and awaited with the `ray` beside distrecipe's interpreter
    (`launch.spec.executable`), polling `ray status` for every node, never a fixed sleep."""
    from distrecipe.launch.spec import executable

    result = cli("launch", SEED, "--slurm", *SET, "--time", "5", "--cpus-per-task", "8", *RL_SETS,
                 "--", "trainer.total_epochs=1")
    assert result.code == 0, result.err
    ray = executable("ray")
    assert Path(ray).is_absolute()
    script = result.out
    assert "sleep 10" not in script
    assert f"ray={ray}" in script.splitlines()
    assert '"$ray" start --head' in script and '"$ray" start --address=' in script
    assert '"$ray" status --address="$head_ip:6379"' in script
    assert "wait_for_ray_nodes 1" in script and "wait_for_ray_nodes 4" in script
    assert script.index("wait_for_ray_nodes 4") < script.index("RAY_ADDRESS=")


FAKE_RAY = """#!/bin/bash
# A Ray stand-in: `start` records the node it runs on (and blocks as --block does);
# `status` lists the recorded nodes as `ray status` does.
case "$1" in
  start)
    case " $FAKE_RAY_DEAD " in *" $SRUN_HOST "*) echo "ray: cannot reach the head" >&2; exit 1;; esac
    touch "$FAKE_RAY_DIR/$SRUN_HOST"
    exec sleep 60;;
  status)
    echo "======== Autoscaler status: 2026-01-01 00:00:00 ========"
    echo "Node status"
    echo "---------------------------------------------------------------"
    echo "Active:"
    for node in "$FAKE_RAY_DIR"/*; do [ -e "$node" ] && echo " 1 node_$(basename "$node")"; done
    echo "Idle:"
    echo " (no idle nodes)"
    echo "Pending:"
    echo " (no pending nodes)"
    exit 0;;
esac
exit 2
"""
FAKE_SRUN = """#!/bin/bash
# srun stand-in: runs the command on "the node" -w names (SRUN_HOST), here.
host=local
while [ $# -gt 0 ]; do
  case "$1" in
    -w) host=$2; shift 2;;
    -*) shift;;
    *) break;;
  esac
done
SRUN_HOST=$host exec "$@"
"""
FAKE_HOSTNAME = '#!/bin/bash\necho "10.0.0.${SRUN_HOST#n}"\n'
FAKE_SCONTROL = '#!/bin/bash\necho "$3" | tr , "\\n"\n'


OPENRLHF = ("launch.backend=openrlhf", "strategy=zero")
"""rl-tiny-2x2 as OpenRLHF's (which runs ZeRO only)."""
SLEEPING = ("--set", "rl.rollout_memory=0.4", "--set", "rl.free_rollout_memory=true")
"""vLLM's share of an OpenRLHF job that fits: OpenRLHF's default, 0.95 kept through training,
does not (`tests/plan/test_rollout.py`), and launch refuses it."""


def run_fake_cluster(tmp_path: Path, *, dead: str = "", wait: int = 20,
                     overrides: tuple[str, ...] = ()) -> tuple[int, str]:
    """The verl (or, with `OPENRLHF`, OpenRLHF) sbatch script of a 3-node recipe, run by bash
    with srun, scontrol, hostname and ray standing in for the cluster's; the training itself
    is `echo LAUNCHED`."""
    import os
    import signal
    import subprocess

    from distrecipe.launch.slurm import batch_script
    from distrecipe.translator.load import load_recipe
    from distrecipe.translator.resolve import resolve

    bin_dir, state = tmp_path / "bin", tmp_path / "ray-nodes"
    bin_dir.mkdir()
    state.mkdir()
    for name, text in (("srun", FAKE_SRUN), ("hostname", FAKE_HOSTNAME), ("scontrol", FAKE_SCONTROL),
                       ("ray", FAKE_RAY)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    recipe = load_recipe(ROOT / "tests" / "launch" / "rl-tiny-2x2.yaml",
                         ["cluster.nodes=3", "batch.global=18", "rl.prompts_per_step=18", "launch.slurm.partition=p", "launch.slurm.account=a",
                          "launch.slurm.time=5", "launch.slurm.cpus_per_task=4", *overrides])
    script = batch_script(resolve(recipe), ["echo", "LAUNCHED"], runs_root=tmp_path, chdir=tmp_path,
                          ray=str(bin_dir / "ray"))
    (tmp_path / "job.sbatch").write_text(script)
    log = tmp_path / "job.log"
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "SLURM_JOB_NODELIST": "n1,n2,n3", "FAKE_RAY_DIR": str(state),
           "FAKE_RAY_DEAD": dead, "DISTRECIPE_RAY_WAIT": str(wait)}
    with log.open("w") as out:
        job = subprocess.Popen(["bash", str(tmp_path / "job.sbatch")], cwd=tmp_path, env=env, stdout=out,
                               stderr=subprocess.STDOUT, start_new_session=True)
    try:
        code = job.wait(timeout=120)
    finally:
        os.killpg(job.pid, signal.SIGTERM)  # the blocking `ray start`s this job left behind
    return code, log.read_text()


@pytest.mark.parametrize("overrides", [(), OPENRLHF], ids=["verl", "openrlhf"])
def test_the_ray_script_launches_once_every_ray_node_has_joined(tmp_path: Path, overrides: tuple[str, ...]) -> None:
    code, log = run_fake_cluster(tmp_path, overrides=overrides)
    assert (code, log.strip().splitlines()[-1]) == (0, "LAUNCHED"), log


def test_the_verl_script_stops_naming_the_nodes_that_never_joined(tmp_path: Path) -> None:
    code, log = run_fake_cluster(tmp_path, dead="n3", wait=3)
    assert code == 1, log
    assert "LAUNCHED" not in log
    assert "distrecipe: 2 of 3 Ray node(s) joined the head at 10.0.0.1:6379 within 3 s" in log, log


def test_a_ray_command_left_to_the_nodes_path_is_refused() -> None:
    from distrecipe.errors import LaunchError
    from distrecipe.launch.slurm import batch_script
    from distrecipe.translator.load import load_recipe
    from distrecipe.translator.resolve import resolve

    plan = resolve(load_recipe(ROOT / "tests" / "launch" / "rl-tiny-2x2.yaml"))
    with pytest.raises(LaunchError, match="Ray's `ray` command is neither beside"):
        batch_script(plan, ["echo"], runs_root=ROOT, chdir=ROOT, ray="ray")


def test_a_trl_grpo_script_gets_the_recipe_s_group_on_every_node(cli: Cli, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The sbatch script's srun runs `distrecipe launch` on each node with the recipe's rl,
    and that launch hands the TRL script `--num_generations` itself (`launch.handoff`)."""
    monkeypatch.chdir(tmp_path)
    program = ROOT / "tests" / "programs" / "trl_grpo.py"
    rl = ("--set", "rl.rollout_n=4", "--set", "rl.prompts_per_step=4")
    result = cli("launch", TINY, "--slurm", *SET, "--time", "5", "--cpus-per-task", "2", *rl, "--", program)
    assert result.code == 0, result.err
    srun = result.out.splitlines()[-1].split()
    node = srun[srun.index("launch") + 1:]
    assert node[1:5] == list(rl) and node[-2:] == ["--", str(program)]
    cut = node.index("--")
    result = cli("launch", *node[:cut], "--dry-run", *node[cut:])
    assert result.code == 0, result.err
    words = json.loads(result.out)["shell"].split()
    assert words[words.index(str(program)):][-4:] == ["--num_generations", "4", "--generation_batch_size", "16"]
    # 4 prompts × 4 = 16 completions a generation: 4 micro-steps of micro 2 × 2 ranks
    assert words[words.index("--per_device_train_batch_size") + 1] == "2"


OPENRLHF_USER = ("--actor.model_name_or_path", "/models/qwen", "--reward.remote_url", "http://rm:5000",
                 "--data.prompt_dataset", "/data/prompts.jsonl")


def test_openrlhf_gets_verl_s_ray_cluster_and_launches_on_its_head(cli: Cli) -> None:
    """The same Ray head and workers as verl's (one builder), then `distrecipe launch --target
    openrlhf` on the head with the user's options as given (no path made absolute)."""
    sets = ("--set", "rl.rollout_n=4", "--set", "rl.prompts_per_step=128", *SLEEPING)
    verl = cli("launch", SEED, "--slurm", *SET, "--time", "5", "--cpus-per-task", "8", *sets, "--set",
               "strategy=fsdp", "--target", "verl")
    ours = cli("launch", SEED, "--slurm", *SET, "--time", "5", "--cpus-per-task", "8", *sets, "--target",
               "openrlhf", "--", *OPENRLHF_USER)
    assert (verl.code, ours.code) == (0, 0), ours.err
    last = ours.out.splitlines()[-1]
    assert last.startswith('RAY_ADDRESS="$head_ip:6379" srun --overlap --nodes=1 --ntasks=1 -w "$head" ')
    assert last.endswith("--target openrlhf --runs-root " + str(Path("runs").resolve()) + " -- "
                         + " ".join(OPENRLHF_USER))
    shared = [line for line in ours.out.splitlines()[:-1] if not line.startswith("#")]
    assert shared == [line for line in verl.out.splitlines()[:-1] if not line.startswith("#")], \
        "verl's Ray cluster, line for line"
    assert "# OpenRLHF's multi-node recipe: a Ray head on the first node, workers on the others," in ours.out


@pytest.mark.parametrize(("user", "message"), [
    (OPENRLHF_USER[:4], "needs --data.prompt_dataset after `--`"),
    ((*OPENRLHF_USER, "--train.batch_size", "64"), "--train.batch_size 64 contradicts the recipe's 256 "
                                                   "(batch.global)"),
], ids=["missing-prompts", "contradiction"])
def test_what_each_node_would_refuse_is_refused_before_the_job_is_queued(
        cli: Cli, user: tuple[str, ...], message: str) -> None:
    refused = cli("launch", SEED, "--slurm", *SET, "--time", "5", "--cpus-per-task", "8", "--set", "rl.rollout_n=4",
                  "--set", "rl.prompts_per_step=128", *SLEEPING, "--target", "openrlhf", "--", *user)
    assert (refused.code, refused.out) == (2, ""), "no sbatch script"
    [line] = [line for line in refused.err.splitlines() if line.startswith("distrecipe: error: ")]
    assert message in line
