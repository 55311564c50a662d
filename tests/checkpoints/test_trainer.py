"""The HF Trainer (under DeepSpeed ZeRO-2, as the tiny recipe runs it) saved at world 2 and
resumed through `distrecipe launch`, and its ZeRO weights consolidated for transformers.

The Trainer's resume (tests/programs/hf_trainer.py passes `--resume_from_checkpoint` to
`trainer.train`, as transformers' example scripts do) restores the step, optimizer,
scheduler and RNG: at world 1 (accumulation 4, the same global batch) after the
`ds_to_universal` conversion distrecipe names for the DeepSpeed state inside the
Trainer's checkpoint. The resumed steps' logged losses equal the uninterrupted run's
(`TOLERANCE`, relative). `zero_to_fp32` then writes weights `from_pretrained` loads, equal
to the model the Trainer saved beside them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.checkpoints.runs import TINY, TOLERANCE, WORLDS, distrecipe

pytestmark = pytest.mark.slow

PROGRAM = Path(__file__).resolve().parents[1] / "programs" / "hf_trainer.py"
STEPS, EVERY = 4, 2


def trainer(work: Path, name: str, world: int, *sets: str) -> tuple[dict[int, float], str]:
    """Launch the Trainer script; its logged loss per step (the restored history included) and stderr."""
    args = [arg for item in sets for arg in ("--set", item)]
    done = distrecipe("launch", TINY, *WORLDS[world], "--set", "checkpoint.dir=out", "--set",
                      f"checkpoint.every={EVERY}", *args, "--run-dir", work / name, "--", PROGRAM,
                      "--max_steps", str(STEPS), "--report_to", "none", "--logging_steps", "1", cwd=work)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    (line,) = [line for line in done.stdout.splitlines() if line.startswith('{"world"')]
    return {int(step): loss for step, loss in json.loads(line)["logged"].items()}, done.stderr


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[int, float]]:
    work = tmp_path_factory.mktemp("trainer")
    losses, _ = trainer(work, "baseline", 2)
    assert sorted(losses) == list(range(1, STEPS + 1))
    return work, losses


def agree(scenario: str, resumed: dict[int, float], baseline: dict[int, float]) -> None:
    fresh = {step: loss for step, loss in resumed.items() if step > EVERY}  # 1..EVERY: the restored history
    assert sorted(fresh) == list(range(EVERY + 1, STEPS + 1))
    worst = max(abs(fresh[s] - baseline[s]) / abs(baseline[s]) for s in fresh)
    print(f"\n{scenario}: steps {sorted(fresh)}, max relative loss difference {worst:.2e}")
    assert worst <= TOLERANCE


def test_the_trainer_resumes_at_world_1_after_the_named_conversion(saved: tuple[Path, dict[int, float]]) -> None:
    work, baseline = saved
    checkpoint = f"out/checkpoint-{EVERY}"
    check = distrecipe("checkpoint", "check", TINY, *WORLDS[1], "--checkpoint", checkpoint, "--program-kind", "hf",
                       cwd=work)
    assert check.returncode == 1 and "saved at DP 2, this job's DP is 1" in check.stdout, check
    assert "warning" not in check.stdout, "the same global batch: the Trainer skips the same samples"
    tag = work / checkpoint / f"global_step{EVERY}"
    assert f"distrecipe checkpoint convert --to universal {tag}" in check.stdout
    assert distrecipe("checkpoint", "convert", "--to", "universal", tag, cwd=work).returncode == 0
    resumed, said = trainer(work, "resume-w1", 1, f"checkpoint.resume={checkpoint}")
    assert "holding deepspeed-universal" in said
    record = json.loads((work / "resume-w1" / "run.json").read_text())
    assert f"--resume_from_checkpoint {work / checkpoint}" in " ".join(record["argv"])  # the Trainer's own flag
    agree("HF Trainer (ZeRO-2) saved at world 2, resumed at world 1 after ds_to_universal", resumed, baseline)
    # It saved step 4 again into the same output_dir at DP 1: DeepSpeed overwrote its own files
    # and left rank 1's from the world-2 save, which zero_to_fp32 would refuse. Never chosen:
    shown = distrecipe("checkpoint", "show", "out", cwd=work)
    lines = {line.split(":")[0].strip(" *"): line for line in shown.stdout.splitlines()}
    assert "stale optimizer shards of DP ranks 1 from an earlier save at DP 2" in lines[f"out/checkpoint-{STEPS}"]
    assert lines[f"out/checkpoint-{EVERY}"].startswith("* ")
    refused = distrecipe("checkpoint", "convert", "--to", "fp32", f"out/checkpoint-{STEPS}/global_step{STEPS}",
                         cwd=work)
    assert refused.returncode == 2 and "is partial" in refused.stderr and refused.stderr.count("\n") == 1


def test_another_global_batch_is_warned(saved: tuple[Path, dict[int, float]]) -> None:
    work, _ = saved
    check = distrecipe("checkpoint", "check", TINY, "--set", "batch.micro=4", "--set", "batch.global=16",
                       "--checkpoint", f"out/checkpoint-{EVERY}", "--program-kind", "hf", cwd=work)
    assert check.returncode == 0, check
    assert "warning: the checkpoint was trained at global batch 8" in check.stdout
    assert "this job's is 16" in check.stdout


def test_zero_weights_consolidate_for_from_pretrained(saved: tuple[Path, dict[int, float]]) -> None:
    import torch
    from safetensors.torch import load_file
    from transformers import LlamaForCausalLM

    work, _ = saved
    folder = work / "out" / f"checkpoint-{EVERY}"  # (step 4's was saved again at world 1: see above)
    done = distrecipe("checkpoint", "convert", "--to", "fp32", folder / f"global_step{EVERY}", "--hf-config",
                      folder / "config.json", cwd=work)
    assert done.returncode == 0, done.stderr
    written = folder / f"global_step{EVERY}_fp32"
    assert json.loads((written / "distrecipe-convert.json").read_text())["converter"] == "fp32"
    model = LlamaForCausalLM.from_pretrained(written)
    saved_by_trainer = load_file(folder / "model.safetensors")
    state = model.state_dict()
    assert set(saved_by_trainer) <= set(state)
    for name, tensor in saved_by_trainer.items():
        assert torch.equal(state[name], tensor.to(state[name].dtype)), name
