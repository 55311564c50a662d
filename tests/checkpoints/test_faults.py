"""Faults for real on CPU: save at world 2, resume at world 1 and 2, through `distrecipe launch`.

Each engine's verdict is held to what the engine does with the same checkpoint: where
distrecipe says DeepSpeed needs a conversion or cannot load it, the reference trainer
given the checkpoint directly (`--resume`, which launch does not check) is refused by
DeepSpeed itself, with DeepSpeed's message; where it says the job resumes (as is, or
after the conversion it names), the resumed steps' losses equal the uninterrupted run's.
The reference trainer's sample order depends only on the step and the global batch, so
a resumed run at another world (accumulation making up the global batch) sees the same
samples: the losses agree to float rounding (`TOLERANCE`, relative; reduction order
differs across worlds), exactly at the same world.

One saved run per engine (a module fixture) serves every test of that engine.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from distrecipe.launch.tiny_train import KILL_IN_SAVE
from tests.checkpoints.runs import TINY, TOLERANCE, WORLDS, distrecipe
from tests.ports import free_port

pytestmark = pytest.mark.slow

STEPS, EVERY = 6, 3
ENGINES = {"zero2": ["--set", "stage=2"], "zero3": ["--set", "stage=3"],
           "fsdp2": ["--set", "strategy=fsdp", "--set", "stage=3", "--set", "launch.backend=torchrun"]}


def train(work: Path, engine: str, world: int, name: str, *sets: str, program: tuple[str, ...] = (),
          env: dict[str, str] | None = None) -> tuple[subprocess.CompletedProcess[str], Path]:
    run_dir = work / "runs" / name
    args = [arg for item in sets for arg in ("--set", item)]
    done = distrecipe("launch", TINY, *ENGINES[engine], *WORLDS[world], "--set", "checkpoint.dir=ck",
                      "--set", f"checkpoint.every={EVERY}", "--set", f"launch.master_port={free_port()}", *args,
                      "--run-dir", run_dir, "--", "-m", "distrecipe.launch.tiny_train", "--steps", str(STEPS),
                      *program, cwd=work, env=env)
    return done, run_dir


def metrics(run_dir: Path) -> dict[int, float]:
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return {record["step"]: record["loss"] for record in map(json.loads, lines)}


def agree(scenario: str, resumed: dict[int, float], baseline: dict[int, float]) -> None:
    """The resumed run trains exactly steps EVERY+1..STEPS, each with the uninterrupted loss."""
    assert sorted(resumed) == list(range(EVERY + 1, STEPS + 1)), resumed
    worst = max(abs(resumed[s] - baseline[s]) / abs(baseline[s]) for s in resumed)
    print(f"\n{scenario}: steps {sorted(resumed)}, max relative loss difference {worst:.2e}")
    assert worst <= TOLERANCE, (scenario, resumed, baseline)


@pytest.fixture(scope="module")
def saved(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path, dict[int, float]]:
    """One uninterrupted run at world 2 per engine: its losses, and checkpoints at steps 3 and 6."""
    engine: str = request.param
    work = tmp_path_factory.mktemp(engine)
    done, run_dir = train(work, engine, 2, "baseline")
    assert done.returncode == 0, done.stderr[-3000:]
    return engine, work, metrics(run_dir)


def tag(engine: str) -> str:
    return f"ck/step-{EVERY}" if engine == "fsdp2" else f"ck/global_step{EVERY}"


EVERY_ENGINE = pytest.mark.parametrize("saved", list(ENGINES), indirect=True)


def only(engine: str) -> pytest.MarkDecorator:
    """A test of one engine's checkpoint: the fixture's run of that engine alone."""
    return pytest.mark.parametrize("saved", [engine], indirect=True)


@pytest.mark.parametrize("saved", ["zero3", "fsdp2"], indirect=True)  # ZeRO-2's: the lost-rank test
def test_same_world_resumes_as_is_with_the_same_losses(saved: tuple[str, Path, dict[int, float]]) -> None:
    engine, work, baseline = saved
    done, run_dir = train(work, engine, 2, "resume-w2", f"checkpoint.resume={tag(engine)}")
    assert done.returncode == 0, done.stderr[-3000:]
    assert ": resumes as is: " in done.stderr
    record = json.loads((run_dir / "run.json").read_text())["checkpoint"]
    assert (record["verdict"], record["step"]) == ("resumes as is", EVERY)
    agree(f"{engine} saved at world 2, resumed at world 2", metrics(run_dir), baseline)


@EVERY_ENGINE
def test_another_world_gets_the_engines_verdict(saved: tuple[str, Path, dict[int, float]]) -> None:
    engine, work, baseline = saved
    check = distrecipe("checkpoint", "check", TINY, *ENGINES[engine], *WORLDS[1], "--checkpoint", tag(engine),
                       cwd=work)
    if engine == "fsdp2":  # DCP reshards: as is
        assert check.returncode == 0 and ": resumes as is: DCP reshards on load" in check.stdout, check
        resume = tag(engine)
    else:
        assert check.returncode == 1, check
        assert "resumes after a conversion: saved at DP 2, this job's DP is 1" in check.stdout
        command = f"distrecipe checkpoint convert --to universal {work / tag(engine)}"
        assert command in check.stdout
        # DeepSpeed itself, handed the checkpoint without distrecipe's check, refuses it so:
        done, _ = train(work, engine, 1, "unconverted", program=("--resume", tag(engine)))
        assert done.returncode != 0
        assert "The checkpoint being loaded used a DP world size of 2 but the current world size is 1" in done.stderr
        # launch refuses it before any rank starts, naming the conversion:
        done, run_dir = train(work, engine, 1, "refused", f"checkpoint.resume={tag(engine)}")
        assert done.returncode == 2 and command in done.stderr and not run_dir.exists()
        converted = distrecipe("checkpoint", "convert", "--to", "universal", tag(engine), cwd=work)
        assert converted.returncode == 0, converted.stderr
        record = json.loads((work / f"{tag(engine)}_universal" / "distrecipe-convert.json").read_text())
        assert record["converter"] == "universal" and "ds_to_universal" in record["command"][2]
        resume = f"{tag(engine)}_universal"
    done, run_dir = train(work, engine, 1, "resume-w1", f"checkpoint.resume={resume}")
    assert done.returncode == 0, done.stderr[-3000:]
    after = "" if engine == "fsdp2" else " after ds_to_universal"
    agree(f"{engine} saved at world 2, resumed at world 1{after}", metrics(run_dir), baseline)


@only("zero3")
def test_a_zero3_checkpoint_cannot_resume_at_zero2(saved: tuple[str, Path, dict[int, float]]) -> None:
    engine, work, _ = saved
    check = distrecipe("checkpoint", "check", TINY, *ENGINES["zero2"], *WORLDS[2], "--checkpoint", tag(engine),
                       cwd=work)
    assert check.returncode == 2 and "cannot: saved at ZeRO-3, this job is ZeRO-2" in check.stderr, check
    done, _ = train(work, "zero2", 2, "stage-change", program=("--resume", tag(engine)))
    assert done.returncode != 0 and "check_ckpt_list" in done.stderr  # DeepSpeed finds no model states


@only("zero2")  # one engine's lost rank: the marker rule is DeepSpeed's
def test_a_rank_lost_mid_save_leaves_the_previous_checkpoint_chosen(
        saved: tuple[str, Path, dict[int, float]]) -> None:
    engine, work, baseline = saved
    lost = work / "lost"
    lost.mkdir()
    # checkpoint.keep 1: the reference trainer prunes only after a save every rank finished,
    # so the killed save at step 6 leaves step 3 (the one complete checkpoint) in place.
    done, _ = train(lost, engine, 2, "killed", "checkpoint.keep=1", env={KILL_IN_SAVE: f"{STEPS}:1"})
    assert done.returncode != 0
    shown = distrecipe("checkpoint", "show", "ck", cwd=lost)
    assert shown.returncode == 0
    lines = shown.stdout.splitlines()
    assert lines[0].startswith(f"* ck/global_step{EVERY}: ") and lines[0].endswith("complete"), lines
    assert lines[1].startswith(f"  ck/global_step{STEPS}: ") and "partial" in lines[1], lines
    assert "optimizer shards of DP ranks 1 (the model states say DP 2)" in lines[1]
    refused = distrecipe("checkpoint", "check", TINY, *ENGINES[engine], *WORLDS[2], "--checkpoint",
                         f"ck/global_step{STEPS}", cwd=lost)
    assert refused.returncode == 2 and "is partial" in refused.stderr and "DP ranks 1" in refused.stderr
    done, run_dir = train(lost, engine, 2, "resume-auto", "checkpoint.resume=auto", "checkpoint.keep=1")
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads((run_dir / "run.json").read_text())["checkpoint"]["step"] == EVERY
    # The resumed save at step 6 completes (over the partial one), so keep 1 deletes step 3.
    assert f"checkpoint.keep 1: deleted {lost / 'ck' / f'global_step{EVERY}'}" in done.stderr
    assert [path.name for path in (lost / "ck").glob("global_step*")] == [f"global_step{STEPS}"]
    agree(f"{engine}: rank 1 killed mid-save at step {STEPS}, resume auto", metrics(run_dir), baseline)


@only("fsdp2")
def test_dcp_converts_to_one_file_and_back(saved: tuple[str, Path, dict[int, float]]) -> None:
    import torch

    engine, work, _ = saved
    done = distrecipe("checkpoint", "convert", "--to", "torch", tag(engine), cwd=work)
    assert done.returncode == 0, done.stderr
    single = work / f"{tag(engine)}.pt"
    state = torch.load(single, weights_only=False)
    assert {"model", "optim"} <= set(state) and state["model"]["0.weight"].shape == (256, 64)
    assert json.loads((work / f"{tag(engine)}.pt.distrecipe-convert.json").read_text())["converter"] == "torch"
    back = distrecipe("checkpoint", "convert", "--to", "dcp", single, cwd=work)
    assert back.returncode == 0, back.stderr
    shown = distrecipe("checkpoint", "show", f"{tag(engine)}_dcp", cwd=work)
    assert shown.returncode == 0 and "dcp, step 3" in shown.stdout and shown.stdout.rstrip().endswith("complete")


def test_a_failing_converter_is_one_line_and_writes_nothing(tmp_path: Path) -> None:
    """torch's own dcp_to_torch_save, given a `.metadata` that is not a pickle."""
    folder = tmp_path / "step-4"
    folder.mkdir()
    (folder / "__0_0.distcp").write_bytes(b"\0" * 16)
    (folder / ".metadata").write_bytes(b"not a pickle")
    done = distrecipe("checkpoint", "convert", "--to", "torch", folder, cwd=tmp_path)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith(f"{folder}:1:1: error: dcp_to_torch_save failed on {folder}: ")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step-4"]


def test_accelerate_merges_an_fsdp_model_for_from_pretrained(tmp_path: Path) -> None:
    """Accelerate's FSDP `save_state` layout (`pytorch_model_fsdp_0` a model-only DCP folder,
    `optimizer_0` the optimizer's, written here by torch's own `torch_save_to_dcp`), merged
    by Accelerate's merge-weights into weights transformers loads, equal to the model saved."""
    import torch
    from torch.distributed.checkpoint.format_utils import torch_save_to_dcp
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                         num_key_value_heads=4, vocab_size=128, max_position_embeddings=64)
    torch.manual_seed(0)
    model = LlamaForCausalLM(config)
    folder = tmp_path / "checkpoints" / "checkpoint_3"
    folder.mkdir(parents=True)
    torch.save({"model": model.state_dict()}, tmp_path / "whole.pt")
    torch_save_to_dcp(tmp_path / "whole.pt", folder / "pytorch_model_fsdp_0")
    torch.save({"optimizer": torch.optim.AdamW(model.parameters()).state_dict()}, tmp_path / "optim.pt")
    torch_save_to_dcp(tmp_path / "optim.pt", folder / "optimizer_0")
    for name in ("random_states_0.pkl", "random_states_1.pkl"):
        (folder / name).write_bytes(b"")
    config.save_pretrained(tmp_path / "config")
    done = distrecipe("checkpoint", "convert", "--to", "merged", folder, "--hf-config",
                      tmp_path / "config" / "config.json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    merged = LlamaForCausalLM.from_pretrained(folder.with_name("checkpoint_3_merged"))
    for name, tensor in model.state_dict().items():
        assert torch.equal(merged.state_dict()[name], tensor), name
