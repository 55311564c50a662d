"""verl's own `FSDPCheckpointManager` saving and loading for real on gloo CPU ranks
(tests/programs/verl_fsdp.py under torchrun), held to distrecipe's verdicts `verl-same`
and `verl-world`, and the `verl.model_merger` command the latter names run as given.

The manager itself runs on CPU (it offloads to CPU only where CUDA is, and saves no
accelerator RNG without one); two of verl's helpers around it do not, and the program
says which. Saved at world 2: loaded at world 2 the resumed losses equal the
uninterrupted run's (`TOLERANCE`); at world 1 verl fails looking for its own world's
files, as the verdict says, and the merger's Hugging Face weights load with
transformers, equal to the weights saved cast to bf16 (the merger casts every shard).
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.checkpoints.runs import TINY, TOLERANCE, WORLDS, distrecipe, torchrun
from tests.conftest import ROOT

pytestmark = pytest.mark.slow

PROGRAM = ROOT / "tests" / "programs" / "verl_fsdp.py"
STEPS, SAVE_AT = 6, 3
VERL = ["--set", "strategy=fsdp", "--set", "stage=3", "--program-kind", "verl"]


def run(work: Path, world: int, *args: str | Path) -> subprocess.CompletedProcess[str]:
    return torchrun(world, PROGRAM, "--steps", str(STEPS), "--save-at", str(SAVE_AT), *args, cwd=work)


def losses(done: subprocess.CompletedProcess[str]) -> dict[int, float]:
    assert done.returncode == 0, done.stderr[-3000:]
    return {int(step): loss for step, loss in json.loads(done.stdout.splitlines()[-1])["losses"].items()}


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[int, float]]:
    """The uninterrupted run at world 2, saving verl's checkpoint (and the whole weights) at step SAVE_AT."""
    work = tmp_path_factory.mktemp("verl")
    baseline = losses(run(work, 2, "--save", work / "ck", "--dump", work / "whole.pt"))
    assert sorted(baseline) == list(range(1, STEPS + 1)) and baseline[STEPS] < baseline[1]
    actor = work / "ck" / f"global_step_{SAVE_AT}" / "actor"
    assert sorted(path.name for path in actor.glob("*.pt")) == [
        f"{what}_world_size_2_rank_{rank}.pt" for what in ("extra_state", "model", "optim") for rank in (0, 1)]
    return work, baseline


def test_the_same_world_resumes_as_is(saved: tuple[Path, dict[int, float]]) -> None:
    work, baseline = saved
    checkpoint = work / "ck" / f"global_step_{SAVE_AT}"
    check = distrecipe("checkpoint", "check", TINY, *VERL, *WORLDS[2], "--checkpoint", checkpoint, cwd=work)
    assert check.returncode == 0, check
    assert f"checkpoint {checkpoint} (verl, step {SAVE_AT}, saved by 2 ranks, complete): resumes as is" in check.stdout
    resumed = losses(run(work, 2, "--load", checkpoint / "actor"))
    assert sorted(resumed) == list(range(SAVE_AT + 1, STEPS + 1))
    worst = max(abs(resumed[s] - baseline[s]) / abs(baseline[s]) for s in resumed)
    print(f"\nverl FSDP saved at world 2, loaded at world 2: steps {sorted(resumed)}, "
          f"max relative loss difference {worst:.2e}")
    assert worst <= TOLERANCE


def test_another_world_cannot_and_the_merger_gives_weights(saved: tuple[Path, dict[int, float]]) -> None:
    import torch
    from transformers import AutoTokenizer, LlamaForCausalLM

    work, _ = saved
    checkpoint = work / "ck" / f"global_step_{SAVE_AT}"
    check = distrecipe("checkpoint", "check", TINY, *VERL, *WORLDS[1], "--checkpoint", checkpoint, cwd=work)
    assert check.returncode == 2 and check.stderr.count("\n") == 1, check
    assert "cannot: saved at world 2, this job's is 1: verl loads model_world_size_{W}_rank_{r}.pt" in check.stderr
    # verl itself, at world 1, looks for its own world's files:
    refused = run(work, 1, "--load", checkpoint / "actor")
    assert refused.returncode != 0
    assert (f"FileNotFoundError: [Errno 2] No such file or directory: '{checkpoint / 'actor'}/"
            "model_world_size_1_rank_0.pt'") in refused.stderr
    # The conversion the verdict names, run as it is written:
    command = shlex.split(check.stderr.split("; run: ", 1)[1].split(" (writes", 1)[0])
    assert command[:3] == ["python", "-m", "verl.model_merger"]
    merged = subprocess.run([sys.executable, *command[1:]], cwd=work, capture_output=True, text=True, timeout=300)
    assert merged.returncode == 0, merged.stderr[-3000:]
    target = Path(command[command.index("--target_dir") + 1])
    model = LlamaForCausalLM.from_pretrained(target)
    whole = torch.load(work / "whole.pt")
    state = model.state_dict()
    assert set(whole) == set(state)
    for name, tensor in whole.items():
        assert state[name].dtype == torch.bfloat16 and torch.equal(state[name], tensor.to(torch.bfloat16)), name
    assert AutoTokenizer.from_pretrained(target)("t5 t6")["input_ids"] == [5, 6]
