"""DR900-DR902 on the release installed here: the judges survive an engine release.

Accelerate 1.16 dropped the private `is_cuda_available` the Accelerate judge patched, and
every Accelerate file got a false DR900. The judges now patch torch's public API or check
a private name before patching it; when one is gone, the check is a warning of its own
(DR902) naming the release, never an error against the file.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import Result

pytestmark = pytest.mark.slow  # imports torch and Accelerate

FSDP2 = """\
compute_environment: LOCAL_MACHINE
distributed_type: FSDP
mixed_precision: bf16
num_machines: 1
num_processes: 8
machine_rank: 0
main_process_port: 29500
fsdp_config:
  fsdp_version: 2
  fsdp_reshard_after_forward: true
  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP
  fsdp_transformer_layer_cls_to_wrap: LlamaDecoderLayer
  fsdp_cpu_ram_efficient_loading: true
  fsdp_sync_module_states: true
  fsdp_state_dict_type: SHARDED_STATE_DICT
"""
"""What `compile -t accelerate` writes for FSDP2: `sync_module_states` asks which accelerator
this is, the question 1.16 asks through `torch.accelerator` instead of its private helper."""

DEEPSPEED_PLUGIN = """\
compute_environment: LOCAL_MACHINE
distributed_type: DEEPSPEED
mixed_precision: bf16
num_machines: 1
num_processes: 8
deepspeed_config:
  zero_stage: 3
  gradient_accumulation_steps: 4
  offload_optimizer_device: none
  offload_param_device: none
  zero3_init_flag: true
"""


@pytest.mark.parametrize("text", [FSDP2, DEEPSPEED_PLUGIN], ids=["fsdp2", "deepspeed-plugin"])
def test_the_installed_accelerate_judges_without_a_false_refusal(
        cli: Callable[..., Result], write: Callable[[str, str], Path], text: str) -> None:
    pytest.importorskip("accelerate")
    result = cli("lint", "--engines", write("accelerate_config.yaml", text))
    assert result.code == 0, result.out + result.err
    assert "DR900" not in result.out and "DR902" not in result.out


def test_a_private_hook_gone_is_a_warning_naming_the_release_not_an_error(
        cli: Callable[..., Result], write: Callable[[str, str], Path], monkeypatch: pytest.MonkeyPatch) -> None:
    accelerate = pytest.importorskip("accelerate")
    from accelerate.utils import launch as launch_utils

    monkeypatch.delattr(launch_utils, "is_port_in_use")  # as a later release may rename it
    result = cli("lint", "--engines", write("accelerate_config.yaml", FSDP2))
    assert result.code == 0, result.out + result.err
    [line] = [line for line in result.out.splitlines() if "DR902" in line]
    assert f"warning DR902: accelerate {accelerate.__version__}: could not run this release's check " \
           "(accelerate.utils.launch has no 'is_port_in_use')" in line
    assert "DR900" not in result.out


def test_a_judge_that_crashes_on_the_release_is_a_warning_too(
        cli: Callable[..., Result], write: Callable[[str, str], Path], monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("accelerate")
    from distrecipe.judges import accelerate as judge

    def broken(*_: object, **__: object) -> object:
        raise ImportError("cannot import name 'launch_command_parser'")

    monkeypatch.setattr(judge, "launch_env", broken)
    result = cli("lint", "--engines", write("accelerate_config.yaml", FSDP2))
    assert result.code == 0, result.out + result.err
    assert "DR902" in result.out and "ImportError: cannot import name 'launch_command_parser'" in result.out
