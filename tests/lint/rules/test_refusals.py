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


def test_an_absolute_deepspeed_config_file_outside_the_repository(tmp_path: Path) -> None:
    """`deepspeed_config_file: /home/.../ds_z2.json` works on the machine it was written on;
    every node of the job opens it, so it fails where the file is not (DR331, a warning)."""
    repository, shared = tmp_path / "repo", tmp_path / "home" / "shared"
    (repository / ".git").mkdir(parents=True)
    (repository / "configs").mkdir()
    shared.mkdir(parents=True)
    outside = shared / "ds_z2.json"
    outside.write_text(STRING_ACCUMULATION.replace('"8"', "8"))
    (repository / "configs" / "accelerate_config.yaml").write_text(ACCELERATE.format(ds=outside))
    [(name, line, severity, message)] = findings(repository, "DR331")
    assert (name, line, severity) == ("accelerate_config.yaml", 4, "warning")
    assert message == (f"deepspeed_config_file {outside} is an absolute path outside the repository: every node "
                       "of the job opens it, so the job fails unless that file exists at that path on each node; "
                       "keep the ds_config in the repository and name it relative to where the job is launched")
    inside = repository / "configs" / "ds_z2.json"
    inside.write_text(outside.read_text())
    (repository / "configs" / "accelerate_config.yaml").write_text(ACCELERATE.format(ds=inside))
    assert findings(repository, "DR331") == []  # the checkout is on every node
    (repository / "configs" / "accelerate_config.yaml").write_text(ACCELERATE.format(ds="configs/ds_z2.json"))
    assert findings(repository, "DR331") == []


@pytest.mark.slow  # imports accelerate and torch
def test_accelerate_refuses_the_config_on_a_node_without_the_file(tmp_path: Path) -> None:
    from distrecipe.judges import accelerate as accelerate_judge

    outside = tmp_path / "shared" / "ds_z2.json"
    outside.parent.mkdir()
    outside.write_text(STRING_ACCUMULATION.replace('"8"', "8"))
    (tmp_path / "accelerate_config.yaml").write_text(ACCELERATE.format(ds=outside))
    assert accelerate_judge.judge(tmp_path / "accelerate_config.yaml").outcome == "accepts"  # this machine
    outside.unlink()  # another node
    verdict = accelerate_judge.judge(tmp_path / "accelerate_config.yaml")
    assert verdict.outcome == "refuses" and "Expected a string path to an existing deepspeed config" in verdict.message


OFFLOAD = """\
{
  "train_batch_size": 64,
  "train_micro_batch_size_per_gpu": 4,
  "gradient_accumulation_steps": 2,
  "gradient_clipping": 1.0,
  "bf16": {"enabled": true},
  "zero_optimization": {
    "stage": 2,
    "offload_optimizer": {"device": "cpu", "pin_memory": true},
    "allgather_bucket_size": 5e8,
    "reduce_bucket_size": 5e8,
    "overlap_comm": true,
    "contiguous_gradients": true
  },
  "steps_per_print": 100
}
"""
"""ZeRO-2 with the optimizer offloaded to CPU and no optimizer section: the script brings its own."""
RAW_RUN = "deepspeed --num_gpus 8 train.py --deepspeed --deepspeed_config ds_config.json --epochs 3\n"


def test_offloading_a_client_optimizer_under_raw_deepspeed(tmp_path: Path) -> None:
    (tmp_path / "ds_config.json").write_text(OFFLOAD)
    (tmp_path / "run.sh").write_text(RAW_RUN)
    [(name, line, severity, message)] = findings(tmp_path, "DR323")
    assert (name, line, severity) == ("ds_config.json", 9, "warning")
    assert message.startswith("offload_optimizer (device cpu) with no optimizer section, read raw (--deepspeed_config "
                              "in run.sh:1): deepspeed.initialize refuses the script's own torch optimizer under "
                              "ZeRO-Offload (ZeRORuntimeException)")
    for fixed in (OFFLOAD.replace('"steps_per_print": 100', '"steps_per_print": 100,\n'
                                  '  "optimizer": {"type": "AdamW", "params": {"lr": 1e-5}}'),
                  OFFLOAD.replace('"steps_per_print": 100', '"steps_per_print": 100,\n'
                                  '  "zero_force_ds_cpu_optimizer": false')):
        (tmp_path / "ds_config.json").write_text(fixed)
        assert findings(tmp_path, "DR323") == []
    # the HF Trainer builds the optimizer and Accelerate maps it to DeepSpeedCPUAdam
    (tmp_path / "ds_config.json").write_text(OFFLOAD)
    (tmp_path / "run.sh").write_text(RAW_RUN.replace("--deepspeed --deepspeed_config", "--deepspeed")
                                     .replace("--epochs 3", "--per_device_train_batch_size 4"))
    assert findings(tmp_path, "DR323") == []


@pytest.mark.slow  # imports deepspeed and torch
def test_deepspeed_refuses_a_client_optimizer_with_offload_at_initialize() -> None:
    """`DeepSpeedEngine._configure_optimizer`, DeepSpeed's own code, on the parsed config:
    a client torch optimizer under ZeRO-Offload raises ZeRORuntimeException; an optimizer
    section (DeepSpeed builds its own) or `zero_force_ds_cpu_optimizer: false` passes."""
    from unittest import mock

    import torch
    from deepspeed.runtime.engine import DeepSpeedEngine
    from deepspeed.runtime.zero.utils import ZeRORuntimeException

    from distrecipe.judges import deepspeed as deepspeed_judge

    class Passed(Exception):
        pass

    def refuses(config: dict[str, object]) -> bool:
        engine = object.__new__(DeepSpeedEngine)
        engine.__dict__.update(_config=deepspeed_judge.parse(config, 8), has_moe_layers=False,
                               client_optimizer=None)
        model = torch.nn.Linear(2, 2)
        client = None if "optimizer" in config else torch.optim.AdamW(model.parameters())
        with mock.patch.object(DeepSpeedEngine, "_check_for_duplicates", side_effect=Passed), \
                mock.patch.object(DeepSpeedEngine, "_configure_basic_optimizer",
                                  return_value=torch.optim.AdamW(model.parameters())):
            try:
                DeepSpeedEngine._configure_optimizer(engine, client, list(model.parameters()))
            except ZeRORuntimeException:
                return True
            except Passed:
                return False
        raise AssertionError("DeepSpeed neither refused nor went on")

    written = json.loads(OFFLOAD)
    assert refuses(written)
    assert not refuses({**written, "optimizer": {"type": "AdamW", "params": {"lr": 1e-5}}})
    assert not refuses({**written, "zero_force_ds_cpu_optimizer": False})


PURE_BF16 = {"train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 1,
             "bf16": {"enabled": True, "bf16_master_weights_and_grads": True, "bf16_optimizer_states": True},
             "zero_optimization": {"stage": 2}}


def _with(bf16: dict[str, object] | None = None, **zero: object) -> dict[str, object]:
    return {**PURE_BF16, "bf16": {**PURE_BF16["bf16"], **(bf16 or {})},  # type: ignore[dict-item]
            "zero_optimization": {**PURE_BF16["zero_optimization"], **zero}}  # type: ignore[dict-item]


@pytest.mark.parametrize(("config", "said"), [
    (_with(stage=0), "bf16.bf16_master_weights_and_grads needs ZeRO stage 1, 2 or 3; this file has stage 0"),
    (_with({"bf16_master_weights_and_grads": False}), "bf16.bf16_optimizer_states needs "
     "bf16_master_weights_and_grads: true"),
    (_with({"bf16_optimizer_states": False}), "bf16.bf16_master_weights_and_grads with fp32 Adam moments (no "
     "bf16_optimizer_states) needs offload_optimizer with DeepSpeedCPUAdam"),
    (_with(), None),
    (_with({"bf16_optimizer_states": False}, offload_optimizer={"device": "cpu"}), None),
])
def test_pure_bf16_deepspeed_refuses(tmp_path: Path, config: dict[str, object], said: str | None) -> None:
    (tmp_path / "ds_config.json").write_text(json.dumps(config, indent=1))
    found = findings(tmp_path, "DR324", world=8)
    assert [(name, severity, message.startswith(said or "")) for name, _, severity, message in found] == (
        [("ds_config.json", "error", True)] if said else [])


@pytest.mark.slow  # imports deepspeed and torch
def test_deepspeed_config_refuses_pure_bf16_below_stage_1() -> None:
    """`DeepSpeedConfig` (DeepSpeed's own parser) on the same files: the stage and the
    bf16_optimizer_states assertions are its; the fp32-moments case is the ZeRO optimizer's."""
    from distrecipe.judges import deepspeed as deepspeed_judge

    assert deepspeed_judge.accepts(_with(), 8)
    assert not deepspeed_judge.accepts(_with(stage=0), 8)
    assert not deepspeed_judge.accepts(_with({"bf16_master_weights_and_grads": False}), 8)
