"""Accelerate is the judge of DR343-DR345: an accelerate config beside a ds_config file.

For each generated pair (keys written beside `deepspeed_config_file`, a top-level
`mixed_precision` or none, a ds_config with or without `gradient_accumulation_steps`
and a ZeRO block), Accelerate's own path decides (`distrecipe/judges/accelerate.py`):
`accelerate launch`'s argument merge and the environment it exports, then
`DeepSpeedPlugin()` built from that environment, as every worker builds it. Accelerate stops at its first problem (the
ZeRO block is checked before the conflicting keys), so:

* refused for the missing ZeRO block  ⇔ lint reports DR345;
* refused with "will be ignored"      ⇔ lint reports DR343 (and no DR345);
* accepted, accumulation forced to 1  ⇔ lint reports DR344 (and neither of the others);
* accepted otherwise                  ⇔ lint reports none of the three.
"""

from __future__ import annotations

import contextlib
import json
import socket
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import example, given, settings
from hypothesis import strategies as st

from distrecipe.judges import accelerate as accelerate_judge
from distrecipe.lint.config import LintConfig
from distrecipe.lint.engine import lint

pytestmark = pytest.mark.slow  # imports accelerate (torch)

pytest.importorskip("accelerate")
CORPUS = Path(__file__).resolve().parent / "lint_corpus"
CODES = {"DR343", "DR344", "DR345"}

BESIDE_FILE = {
    "zero3_init_flag": True,
    "zero_stage": 2,
    "gradient_accumulation_steps": 2,
    "gradient_clipping": 1.0,
    "offload_optimizer_device": "cpu",
    "offload_param_device": "none",
    "zero3_save_16bit_model": True,
}
"""Keys an accelerate config may hold beside the file (the first is always fine)."""


def accelerate_verdict(directory: Path, config: str) -> str:
    """`refused-zero`, `refused-ignored`, `forced-accumulation` or `accepted`."""
    with contextlib.chdir(directory):
        args, env = accelerate_judge.launch_env(Path(config))
        file_config = json.loads(Path(env["ACCELERATE_DEEPSPEED_CONFIG_FILE"]).read_text())
        try:
            plugin = accelerate_judge.worker_plugin(args, env)
        except ValueError as exc:
            if "ZeRO optimization config" in str(exc):
                return "refused-zero"
            assert "will be ignored" in str(exc), exc
            return "refused-ignored"
    if "gradient_accumulation_steps" not in file_config:
        assert plugin.deepspeed_config["gradient_accumulation_steps"] == 1
        return "forced-accumulation"
    return "accepted"


def lint_verdict(directory: Path, world: int | None = None) -> str:
    found = {f.code for f in lint([directory], config=LintConfig(), world=world).findings} & CODES
    if "DR345" in found:
        return "refused-zero"
    if "DR343" in found:
        return "refused-ignored"
    return "forced-accumulation" if "DR344" in found else "accepted"


@pytest.mark.parametrize("case", sorted(p for code in sorted(CODES) for p in (CORPUS / code).iterdir()),
                         ids=lambda p: f"{p.parent.name}/{p.name}")
def test_accelerate_agrees_with_the_corpus(case: Path) -> None:
    config = next(p.name for p in case.iterdir() if p.suffix == ".yaml")
    world = next((int(line.split(":")[1]) for line in (case / "expect").read_text().splitlines()
                  if line.startswith("# world:")), None)
    assert accelerate_verdict(case, config) == lint_verdict(case, world)


def test_a_busy_port_on_this_machine_does_not_change_the_verdict(tmp_path: Path) -> None:
    """Accelerate refuses a multi-node launch whose port has a listener here; the judge
    reads the file, so another process on that port must not decide it."""
    case = CORPUS / "DR344" / "multinode-no-accumulation"
    for source in case.iterdir():
        (tmp_path / source.name).write_bytes(source.read_bytes())
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.bind(("localhost", 0))
        listener.listen()
        config = yaml.safe_load((case / "accelerate.yaml").read_text())
        config["main_process_port"] = listener.getsockname()[1]
        (tmp_path / "accelerate.yaml").write_text(yaml.safe_dump(config))
        assert accelerate_verdict(tmp_path, "accelerate.yaml") == "forced-accumulation"


@settings(max_examples=60, deadline=None)
@given(
    beside=st.sets(st.sampled_from(sorted(BESIDE_FILE))),
    mixed_precision=st.sampled_from([None, "absent", "no", "bf16"]),
    accumulation=st.sampled_from([None, 1, 4]),
    zero=st.sampled_from([None, {"stage": 2}, "misspelt"]),
)
@example(beside=set(), mixed_precision="absent", accumulation=4, zero={"stage": 2})
@example(beside={"zero3_init_flag"}, mixed_precision=None, accumulation=None, zero={"stage": 2})
@example(beside={"zero_stage"}, mixed_precision="no", accumulation=None, zero=None)
def test_accelerate_agrees_with_lint(beside: set[str], mixed_precision: str | None,
                                     accumulation: int | None, zero: Any) -> None:
    ds: dict[str, Any] = {"train_micro_batch_size_per_gpu": 2, "bf16": {"enabled": True}}
    if accumulation is not None:
        ds["gradient_accumulation_steps"] = accumulation
    if zero == "misspelt":
        ds["zero"] = {"stage": 2}
    elif zero is not None:
        ds["zero_optimization"] = zero
    config: dict[str, Any] = {"compute_environment": "LOCAL_MACHINE", "distributed_type": "DEEPSPEED"}
    if mixed_precision != "absent":
        config["mixed_precision"] = mixed_precision
    config["deepspeed_config"] = {"deepspeed_config_file": "ds_config.json",
                                  **{key: BESIDE_FILE[key] for key in sorted(beside)}}
    config.update(num_machines=1, num_processes=8)
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        (directory / "ds_config.json").write_text(json.dumps(ds, indent=1))
        (directory / "accelerate_config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
        assert accelerate_verdict(directory, "accelerate_config.yaml") == lint_verdict(directory)


PROBED_FSDP = ("reshard_after_forward", "sharding_strategy", "offload_params", "auto_wrap_policy",
               "backward_prefetch", "state_dict_type", "use_orig_params", "sync_module_states",
               "activation_checkpointing", "cpu_ram_efficient_loading", "forward_prefetch")
VALUES = st.sampled_from([True, False, "true", "no", "off", "1", "0", "FULL_SHARD", "full_shard",
                          "SHARD_GRAD_OP", "HYBRID_SHARD_ZERO2", "NO_PREFETCH", "BACKWARD_PRE", "backward_post",
                          "TRANSFORMER_BASED_WRAP", "no_wrap", "SHARDED_STATE_DICT", "LOCAL_STATE_DICT", "2", "4",
                          "7", "ZERO3", "maybe", "NO"])


def _dr330_and_verdict(config: dict[str, Any]) -> tuple[bool, str]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "accelerate_config.yaml"
        path.write_text(yaml.safe_dump(config))
        found = any(f.code == "DR330" for f in lint([path], config=LintConfig()).findings)
        verdict = accelerate_judge.judge(path)
    return found, f"{verdict.outcome}: {verdict.message}"


@settings(max_examples=120, deadline=None)
@given(version=st.sampled_from([1, 2]), key=st.sampled_from(PROBED_FSDP), value=VALUES)
@example(version=2, key="reshard_after_forward", value="FULL_SHARD")  # "invalid truth value"
@example(version=1, key="sharding_strategy", value="ZERO3")
def test_dr330_agrees_with_accelerate_on_fsdp_values(version: int, key: str, value: Any) -> None:
    """Accelerate's plugin refuses the value ⇔ DR330, for one FSDP key beside its version.
    `sync_module_states: false` is also refused with `cpu_ram_efficient_loading` on (its
    default): a rule of two keys, not a vocabulary, so the pair is written consistently."""
    fsdp: dict[str, Any] = {"fsdp_version": version, f"fsdp_{key}": value}
    if key == "sync_module_states":
        fsdp["fsdp_cpu_ram_efficient_loading"] = False
    config = {"compute_environment": "LOCAL_MACHINE", "distributed_type": "FSDP", "num_processes": 2,
              "num_machines": 1, "machine_rank": 0, "mixed_precision": "no", "fsdp_config": fsdp}
    found, verdict = _dr330_and_verdict(config)
    assert found == verdict.startswith("refuses"), (config, verdict)


@settings(max_examples=60, deadline=None)
@given(key=st.sampled_from(["distributed_type", "mixed_precision"]),
       value=st.sampled_from(["MULTI_GPU", "MPS", "multi_gpu", "NO", "FSDP", "bf16", "BF16", "fp32", "no", False,
                              "bogus"]))
def test_dr330_agrees_with_accelerate_on_top_level_values(key: str, value: Any) -> None:
    config: dict[str, Any] = {"compute_environment": "LOCAL_MACHINE", "distributed_type": "MULTI_GPU",
                              "num_processes": 2, "num_machines": 1, "machine_rank": 0, "mixed_precision": "no",
                              key: value}
    if config["distributed_type"] == "FSDP":
        config["fsdp_config"] = {"fsdp_version": 2}
    found, verdict = _dr330_and_verdict(config)
    if verdict.startswith("not-judgeable"):
        return
    assert found == verdict.startswith("refuses"), (config, verdict)


FSDP1_REQUESTS = [("fsdp_sharding_strategy", "HYBRID_SHARD"), ("fsdp_sharding_strategy", "SHARD_GRAD_OP"),
                  ("fsdp_backward_prefetch", "BACKWARD_PRE"), ("fsdp_backward_prefetch", "BACKWARD_POST"),
                  ("fsdp_forward_prefetch", True)]
"""An FSDP1-only key asking for something FSDP2 does not do (DR342's and DR332's keys)."""


@pytest.mark.parametrize(("key", "value"), FSDP1_REQUESTS)
def test_dr342_says_what_accelerate_does_with_an_fsdp1_key_under_fsdp2(tmp_path: Path, key: str, value: Any) -> None:
    """The installed Accelerate's FullyShardedDataParallelPlugin, built as each worker builds
    it, decides: a refusal is an error; a key it drops with a warning is DR342's warning,
    quoting it; a key it drops without a word is DR332's error (the setting never applies)."""
    config = {"compute_environment": "LOCAL_MACHINE", "distributed_type": "FSDP", "num_processes": 8,
              "num_machines": 1, "machine_rank": 0, "mixed_precision": "bf16",
              "fsdp_config": {"fsdp_version": 2, key: value}}
    path = tmp_path / "accelerate_config.yaml"
    path.write_text(yaml.safe_dump(config))
    verdict = accelerate_judge.judge(path)
    warned = accelerate_judge.plugin_warnings(path)
    found = [f for f in lint([path], config=LintConfig()).findings if f.code in ("DR342", "DR332", "DR330")]
    if verdict.outcome == "refuses":
        assert [f.severity for f in found] == ["error"], (verdict, found)
        return
    assert verdict.outcome == "accepts", verdict
    assert [(f.code, f.severity) for f in found] == ([("DR342", "warning")] if warned else [("DR332", "error")]), \
        (warned, found)
    message = found[0].message
    if warned:
        assert all(f'"{line}"' in message for line in warned), (warned, message)
        assert "warns" in message
    else:
        assert "without a warning" in message, message
