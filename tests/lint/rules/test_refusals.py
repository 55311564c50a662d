"""Refusals lint missed: configs an engine refuses at start-up, on the booked cluster.

Each case is a realistic file (modelled on what public repositories keep), linted as a
user lints it, and where an engine can judge it in-process the engine's verdict is
checked beside lint's: Accelerate's own `_prepare_deepspeed` and loader
(`distrecipe/judges/accelerate.py`), DeepSpeed's config parser and engine, the HF
Trainer's fill, the Kubernetes judges of `tests/k8s`.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import pytest

from distrecipe.lint.config import LintConfig
from distrecipe.lint.engine import lint

ACCELERATE = """\
compute_environment: LOCAL_MACHINE
debug: false
deepspeed_config:
  deepspeed_config_file: {ds}
  zero3_init_flag: false
distributed_type: DEEPSPEED
downcast_bf16: 'no'
machine_rank: 0
main_training_function: main
num_machines: 1
num_processes: 8
rdzv_backend: static
same_network: true
use_cpu: false
"""
STRING_ACCUMULATION = """\
{
  "train_micro_batch_size_per_gpu": 4,
  "gradient_accumulation_steps": "8",
  "gradient_clipping": 1.0,
  "bf16": {"enabled": true},
  "zero_optimization": {
    "stage": 2,
    "overlap_comm": true,
    "contiguous_gradients": true,
    "reduce_bucket_size": 5e8
  }
}
"""


def findings(directory: Path, code: str, **options: object) -> list[tuple[str, int, str, str]]:
    report = lint([directory], config=LintConfig(), **options)  # type: ignore[arg-type]
    assert not report.unusable, report.unusable
    return [(Path(f.where.file).name, f.where.line, f.severity, f.message) for f in report.findings
            if f.code == code and f.where]


def test_a_number_written_as_a_string_is_refused_by_accelerates_fill(tmp_path: Path) -> None:
    (tmp_path / "ds_config.json").write_text(STRING_ACCUMULATION)
    (tmp_path / "accelerate_config.yaml").write_text(ACCELERATE.format(ds="ds_config.json"))
    [(name, line, severity, message)] = findings(tmp_path, "DR316")
    assert (name, line, severity) == ("ds_config.json", 3, "error")
    assert message.startswith('gradient_accumulation_steps is the string "8", not a number: Accelerate '
                              "(used by accelerate_config.yaml) multiplies it in accelerator.prepare")
    assert "TypeError" in message
    (tmp_path / "ds_config.json").write_text(STRING_ACCUMULATION.replace('"8"', "8"))
    assert findings(tmp_path, "DR316") == []


@pytest.mark.slow  # imports accelerate, deepspeed and torch
def test_accelerate_and_deepspeed_refuse_the_string(tmp_path: Path) -> None:
    from distrecipe.judges import accelerate as accelerate_judge
    from distrecipe.judges import deepspeed as deepspeed_judge

    (tmp_path / "accelerate_config.yaml").write_text(ACCELERATE.format(ds="ds_config.json"))
    for text, refused in ((STRING_ACCUMULATION, True), (STRING_ACCUMULATION.replace('"8"', "8"), False)):
        (tmp_path / "ds_config.json").write_text(text)
        with contextlib.chdir(tmp_path):
            args, env = accelerate_judge.launch_env(Path("accelerate_config.yaml"))
            plugin = accelerate_judge.worker_plugin(args, env)
            try:
                accelerate_judge.prepared_config(args, env, plugin)
            except TypeError:
                accelerate_refuses = True
            else:
                accelerate_refuses = False
        assert accelerate_refuses == refused
        assert deepspeed_judge.accepts(json.loads(text), 8) == (not refused)  # raw DeepSpeed: the same
