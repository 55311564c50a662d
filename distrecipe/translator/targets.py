"""The registry of compile targets: name → pure function Plan → files + findings.

Each engine module stays a pure `Plan → dict` function; this module only turns the
dicts into exact bytes (deterministic: fixed key order, trailing newline) and lists
the targets, so `compile --target NAME` has one place to look.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from distrecipe.findings import Finding
from distrecipe.recipe import Plan
from distrecipe.translator import accelerate, deepspeed, hf, summary, verl


@dataclass(frozen=True, slots=True)
class EmitOptions:
    hf_auto: bool = False
    """Keep "auto" where the Hugging Face Trainer fills values (DeepSpeed config)."""
    strict: bool = False
    """Refuse inexact mappings instead of reporting them."""


@dataclass(frozen=True, slots=True)
class Output:
    files: dict[str, str]
    """File name → exact text to write."""
    findings: tuple[Finding, ...] = ()


Render = Callable[[Plan, EmitOptions], Output]


def to_json(data: Any) -> str:
    """Stable JSON text: insertion order is fixed by the emitters, so bytes are too."""
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def render_deepspeed(plan: Plan, options: EmitOptions) -> Output:
    return Output(
        files={"ds_config.json": to_json(deepspeed.emit(plan, hf_auto=options.hf_auto))},
        findings=tuple(deepspeed.findings(plan)),
    )


TARGETS: dict[str, Render] = {
    "deepspeed": render_deepspeed,
    "accelerate": accelerate.render,
    "verl": verl.render,
    "hf": hf.render,
    summary.ALL: summary.render_all,
}
