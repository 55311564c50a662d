"""OpenRLHF's own verdict on a command line, from its package installed alone in `.openrlhf`
(`make openrlhf`: its wheel pins vLLM, flash-attn and Ray builds that cannot install here).

`parser(module)` is the argparse parser the entry module builds under `__main__`, built by
running exactly those statements (`scripts/engine_tables.openrlhf_parser`, which also
writes the tables); `ds_config` is what OpenRLHF's strategy hands DeepSpeed: its own
`get_train_ds_config` (loaded from its file with this venv's DeepSpeed and torch) with the
batch keys its `DeepspeedStrategy` sets.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import os
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
HOME = ROOT / ".openrlhf"
PACKAGE = HOME / "openrlhf"


def require() -> None:
    """Fail (or skip with DISTRECIPE_OPENRLHF=0) where `.openrlhf` was not built."""
    if not PACKAGE.is_dir():
        if os.environ.get("DISTRECIPE_OPENRLHF") == "0":
            pytest.skip("DISTRECIPE_OPENRLHF=0")
        pytest.fail(f"{HOME} is missing: run `make openrlhf` (make test builds it)")


def _load(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@cache
def _tables() -> ModuleType:
    return _load("engine_tables", ROOT / "scripts" / "engine_tables.py")


def parser(module: str) -> Any:
    require()
    path = PACKAGE / "cli" / f"{module.rsplit('.', 1)[-1]}.py"
    return _tables().openrlhf_parser(path)


def refusal(module: str, argv: list[str]) -> str | None:
    """argparse's error for `python -m MODULE ARGV`, or None when it parses."""
    said = io.StringIO()
    try:
        with contextlib.redirect_stderr(said):
            parser(module).parse_args(argv)
    except SystemExit:
        return said.getvalue().strip().splitlines()[-1]
    return None


@cache
def _ds_utils() -> ModuleType:
    require()
    return _load("openrlhf_deepspeed_utils", PACKAGE / "utils" / "deepspeed" / "deepspeed_utils.py")


def ds_config(train_batch: int, micro: int, ring: int = 1, tp: int = 1, stage: int = 2,
              universal: bool = False) -> dict[str, Any]:
    """The ds_config `DeepspeedStrategy.get_ds_train_config` builds (no dynamic batch);
    `universal`: `--ds.use_universal_ckpt`."""
    config: dict[str, Any] = _ds_utils().get_train_ds_config(offload=False, stage=stage,
                                                             tensor_parallel_size=tp,
                                                             use_ds_universal_ckpt=universal)
    config["train_micro_batch_size_per_gpu"] = micro
    config["train_batch_size"] = train_batch * ring * tp
    return config


def deepspeed_refusal(module: str, args: Any) -> str | None:
    """What stops `openrlhf.cli.train_ppo_ray` after parsing `args` (its parsed namespace):
    DeepSpeed's refusal of the actor's (and the GAE critic's) ds_config as OpenRLHF
    builds it, or train_ppo_ray's own assertion that the rollout holds a sample batch
    per actor rank. None for the other entries, and for dynamic batches."""
    import warnings

    from distrecipe.judges import deepspeed as deepspeed_judge

    if module != "openrlhf.cli.train_ppo_ray":
        return None
    value = vars(args).get
    if value("train.dynamic_batch_enable"):
        return None
    groups = [("actor.num_nodes", "actor.num_gpus_per_node")]
    if value("algo.advantage.estimator") == "gae":
        groups.append(("critic.num_nodes", "critic.num_gpus_per_node"))
    ring, tp = value("ds.ring_attn_size"), value("ds.tensor_parallel_size")
    for nodes, gpus in groups:
        config = ds_config(value("train.batch_size"), value("train.micro_batch_size"), ring, tp)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                deepspeed_judge.parse(config, value(nodes) * value(gpus))
        except deepspeed_judge.refusals() as error:
            return str(error)
    samples = value("rollout.n_samples_per_prompt") * value("rollout.batch_size") // value("rollout.micro_batch_size")
    if samples < value("actor.num_nodes") * value("actor.num_gpus_per_node") // ring // tp:
        return "The number of sample batches must be greater than or equal to the effective number of actor processes."
    return None


def verdict(module: str, argv: list[str]) -> str | None:
    """Why OpenRLHF stops `python -m MODULE ARGV` before training, or None: its parser, its
    `__main__` block's own checks, DeepSpeed on the ds_config it builds."""
    return (refusal(module, argv) or validation(module, argv)
            or deepspeed_refusal(module, parser(module).parse_args(argv)))


def validation(module: str, argv: list[str]) -> str | None:
    """What the entry module's own `__main__` block refuses before it trains: the block run
    as written (its parse, `hierarchize`, every assertion), all but the run itself
    (`train(args)`) and ModelScope's hub patch; the assertion's message, or argparse's."""
    return _main(module, argv)[1]


def main_args(module: str, argv: list[str]) -> Any:
    """The namespace the entry module's `__main__` block hands `train(args)`: grouped, its own
    defaults derived (the critic's checkpoint from the estimator and the reward model)."""
    namespace, refused = _main(module, argv)
    assert refused is None, refused
    return namespace["args"]


def _main(module: str, argv: list[str]) -> tuple[dict[str, Any], str | None]:
    """The `__main__` block run as `validation` says: its namespace, and its refusal or None."""
    import argparse
    import ast
    import sys

    require()
    path = PACKAGE / "cli" / f"{module.rsplit('.', 1)[-1]}.py"
    tree = ast.parse(path.read_text(encoding="utf-8"))
    stdlib = [node for node in tree.body if isinstance(node, ast.Import | ast.ImportFrom)
              and all(name.split(".")[0] in sys.stdlib_module_names
                      for name in ([a.name for a in node.names] if isinstance(node, ast.Import)
                                   else [node.module or ""]))]
    main = next(node for node in tree.body if isinstance(node, ast.If) and "__main__" in ast.unparse(node.test))
    body: list[ast.stmt] = list(stdlib)
    for statement in main.body:
        text = ast.unparse(statement)
        if "hierarchize" in text and isinstance(statement, ast.ImportFrom):
            continue  # loaded from its file below: openrlhf.utils imports torch and the trainers
        if text.startswith("train(") or "patch_hub" in text:
            continue
        if "parse_args()" in text:
            statement = ast.parse(text.replace("parse_args()", "parse_args(ARGV)")).body[0]
        body.append(statement)
    namespace: dict[str, Any] = {"argparse": argparse, "ARGV": argv,
                                 "hierarchize": _load("openrlhf_config", PACKAGE / "utils" / "config.py").hierarchize}
    said = io.StringIO()
    try:
        with contextlib.redirect_stderr(said), contextlib.redirect_stdout(io.StringIO()):
            exec(compile(ast.Module(body, []), str(path), "exec"), namespace)
    except SystemExit:
        return namespace, said.getvalue().strip().splitlines()[-1]
    except AssertionError as error:
        return namespace, str(error) or "assertion"
    except (TypeError, AttributeError) as error:  # an option left unset (`None > 0`, `None.split`)
        return namespace, f"{type(error).__name__}: {error}"
    return namespace, None
