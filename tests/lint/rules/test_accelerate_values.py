"""DR330: a value Accelerate refuses, by the vocabularies probed from the installed Accelerate."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.lint.rules.conftest import findings

HEAD = "distributed_type: FSDP\nnum_processes: 8\nfsdp_config:\n  fsdp_version: {version}\n  {key}: {value}\n"


@pytest.mark.parametrize(("version", "key", "value", "takes"), [
    (2, "fsdp_reshard_after_forward", "FULL_SHARD", "true or false"),
    (1, "fsdp_sharding_strategy", "ZERO3", "one of FULL_SHARD, HYBRID_SHARD"),
    (1, "fsdp_backward_prefetch", "true", "one of BACKWARD_POST, BACKWARD_PRE, NO_PREFETCH"),
    (2, "offload_params", "maybe", "true or false"),   # the launcher adds the fsdp_ prefix
])
def test_refused_values_name_what_the_key_takes(tmp_path: Path, version: int, key: str, value: str,
                                                takes: str) -> None:
    (line, _, message), = findings(tmp_path, "a.yaml", HEAD.format(version=version, key=key, value=value), "DR330")
    shown = "True" if value == "true" else repr(value)  # YAML's true is a boolean
    assert line == 5 and f"refuses {shown}" in message and takes in message


@pytest.mark.parametrize(("version", "key", "value"), [
    (2, "fsdp_reshard_after_forward", "false"), (1, "fsdp_reshard_after_forward", "SHARD_GRAD_OP"),
    (1, "fsdp_sharding_strategy", "shard_grad_op"), (1, "fsdp_sharding_strategy", "2"),
    (2, "fsdp_sharding_strategy", "anything"),        # FSDP2 never reads it: DR332's, not a value fault
])
def test_accepted_values_pass(tmp_path: Path, version: int, key: str, value: str) -> None:
    assert findings(tmp_path, "a.yaml", HEAD.format(version=version, key=key, value=value), "DR330") == []


def test_an_unquoted_no_is_yaml_s_boolean_and_is_said_so(tmp_path: Path) -> None:
    (_, _, message), = findings(tmp_path, "a.yaml", "distributed_type: MULTI_GPU\nnum_processes: 2\nmixed_precision: no\n",
                                "DR330")
    assert "refuses False" in message and "YAML 1.1 reads an unquoted no as false: quote it" in message
