"""The HF Trainer judges DR360: it refuses exactly the ds_configs lint reports.

Random TrainingArguments beside a ds_config whose values are `"auto"` or concrete
(agreeing or not) go through `TrainingArguments` and the Trainer's own
`HfTrainerDeepSpeedConfig.trainer_config_finalize`, which raises on any mismatch;
lint must give DR360 exactly then.
"""

from __future__ import annotations

import contextlib
import json
import tempfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from distrecipe.lint.config import LintConfig
from distrecipe.lint.engine import lint

pytestmark = pytest.mark.slow  # imports transformers, accelerate and torch

training_args = pytest.importorskip("transformers.training_args")
pytest.importorskip("deepspeed")


def ds_value(real: Any, other: Any) -> st.SearchStrategy[Any]:
    return st.sampled_from(["auto", real, other])


@st.composite
def pairs(draw: st.DrawFn) -> tuple[int, dict[str, Any], dict[str, Any]]:
    world = draw(st.sampled_from([1, 2, 8]))
    args = {"per_device_train_batch_size": draw(st.integers(1, 3)),
            "gradient_accumulation_steps": draw(st.integers(1, 3)),
            "learning_rate": draw(st.sampled_from([1e-5, 2e-5])),
            "max_grad_norm": draw(st.sampled_from([1.0, 0.5])),
            "weight_decay": draw(st.sampled_from([0.0, 0.1])),
            "bf16": draw(st.booleans())}
    micro, acc = args["per_device_train_batch_size"], args["gradient_accumulation_steps"]
    ds = {
        "train_micro_batch_size_per_gpu": draw(ds_value(micro, micro + 1)),
        "gradient_accumulation_steps": draw(ds_value(acc, acc + 1)),
        "train_batch_size": draw(ds_value(world * micro * acc, world * micro * acc + 1)),
        "gradient_clipping": draw(ds_value(args["max_grad_norm"], 2.0)),
        "bf16": {"enabled": draw(ds_value(args["bf16"], not args["bf16"]))},
        "optimizer": {"type": "AdamW", "params": {
            "lr": draw(ds_value(args["learning_rate"], 3e-4)),
            "weight_decay": draw(ds_value(args["weight_decay"], 0.05)),
            "betas": draw(ds_value([0.9, 0.999], [0.9, 0.95])),
            "eps": draw(ds_value(1e-8, 1e-6))}},
        "zero_optimization": {"stage": draw(st.sampled_from([1, 2]))},
    }
    return world, {**args, "deepspeed": "ds_config.json"}, ds


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=pairs())
def test_trainer_refuses_exactly_what_dr360_reports(case: tuple[int, dict[str, Any], dict[str, Any]]) -> None:
    world, args, ds = case
    with tempfile.TemporaryDirectory() as tmp, contextlib.chdir(tmp):
        Path("ds_config.json").write_text(json.dumps(ds))
        Path("training_args.json").write_text(json.dumps({"output_dir": tmp, **args}))
        codes = {f.code for f in lint([Path(tmp)], config=LintConfig(), world=world).findings}
        with mock.patch.object(training_args.TrainingArguments, "world_size",
                               new_callable=mock.PropertyMock, return_value=world), \
                mock.patch.object(training_args, "is_torch_bf16_gpu_available", return_value=True):
            try:
                built = training_args.TrainingArguments(output_dir=tmp, report_to="none", **args)
                model = SimpleNamespace(config=SimpleNamespace(hidden_size=64))
                built.hf_deepspeed_config.trainer_config_finalize(built, model, 1000)
                accepted = True
            except ValueError as exc:
                assert "mismatch" in str(exc), exc
                accepted = False
    assert accepted == ("DR360" not in codes), (args, ds, codes)


def test_the_matched_defaults_are_training_arguments_own() -> None:
    """`engines.hf.defaults()` is read from the generated table, not restated: the Trainer's
    matched fields have exactly transformers' defaults."""
    import dataclasses

    from distrecipe.engines.hf import MATCHED, defaults

    fields = {field.name: field.default for field in dataclasses.fields(training_args.TrainingArguments)}
    assert defaults() == {key: fields[key] for key in MATCHED}
