"""What only torch can read: the state DeepSpeed pickles into its checkpoint files.

The model states hold the ds_config, `ds_version`, `dp_world_size` and `global_steps`;
the optimizer shards hold `zero_stage` (`runtime/engine.py` `_save_checkpoint` and
`_save_zero_checkpoint`). Loading them unpickles (`weights_only=False`, as DeepSpeed's own
`load_checkpoint` does), so only a checkpoint the user is about to load anyway is opened,
and only by `launch` and `distrecipe checkpoint`, never by `lint`.
"""

from __future__ import annotations

import contextlib
import io
from dataclasses import replace
from typing import Any

from distrecipe.checkpoints.layout import DS_MODEL, DS_OPTIM, DS_Z3_MODEL, CheckpointError, Layout


def deepen(layout: Layout) -> Layout:
    """`layout` with the stage, DP world, batch and version DeepSpeed stored inside, and an
    HF Trainer checkpoint's accumulation (its pickled TrainingArguments)."""
    if layout.kind == "hf" and "training_args.bin" in layout.files:
        args = _load_object(layout, "training_args.bin")
        steps = getattr(args, "gradient_accumulation_steps", None)
        layout = replace(layout, accumulation=steps if isinstance(steps, int) else None)
    if layout.inner is not None:
        inner = deepen(layout.inner)
        if layout.complete and not inner.complete:
            return replace(layout, inner=inner, complete=False,
                           partial=f"its {inner.kind} state is partial: {inner.partial}")
        return replace(layout, inner=inner)
    if layout.kind != "deepspeed" or not layout.complete:
        return layout
    model = next((n for n in layout.files if DS_MODEL.match(n) or DS_Z3_MODEL.match(n)), None)
    optim = next((n for n in layout.files if DS_OPTIM.match(n)), None)
    states = _load(layout, model) if model else {}
    shard = _load(layout, optim) if optim else {}
    config = states.get("ds_config") or shard.get("ds_config") or {}
    optimizer = shard.get("optimizer_state_dict") or {}
    stage = optimizer.get("zero_stage") if isinstance(optimizer, dict) else None
    dp = states.get("dp_world_size")
    batch = config.get("train_batch_size") if isinstance(config, dict) else None
    version = states.get("ds_version") or shard.get("ds_version")
    partial = layout.partial
    if isinstance(dp, int) and layout.dp is not None and dp > layout.dp:
        # The highest ranks' shards are missing: the names alone cannot show it.
        lacking = ", ".join(map(str, range(layout.dp, dp)))
        partial = "; ".join(filter(None, (partial, f"optimizer shards of DP ranks {lacking} (the model "
                                                    f"states say DP {dp})")))
    elif isinstance(dp, int) and layout.dp is not None and dp < layout.dp:
        # A save at a smaller world into a tag an earlier, larger one wrote: DeepSpeed
        # overwrites its own files and leaves the others (zero_to_fp32 then refuses the tag).
        stale = ", ".join(map(str, range(dp, layout.dp)))
        partial = "; ".join(filter(None, (partial, f"stale optimizer shards of DP ranks {stale} from an "
                                                    f"earlier save at DP {layout.dp} (the model states say "
                                                    f"DP {dp}: the tag was saved again at another world)")))
    return replace(layout, stage=int(stage) if isinstance(stage, int) else layout.stage,
                   complete=layout.complete and partial == layout.partial, partial=partial,
                   dp=dp if isinstance(dp, int) else layout.dp,
                   global_batch=batch if isinstance(batch, int) else None,
                   version=str(version) if version is not None else None)


def _load(layout: Layout, name: str) -> dict[str, Any]:
    data = _load_object(layout, name)
    return data if isinstance(data, dict) else {}


def _load_object(layout: Layout, name: str) -> object:
    import torch

    try:
        # Unpickling imports DeepSpeed, whose logger announces the accelerator on stdout: the
        # command's answer is stdout (`checkpoint show --format json`) and an error is one line.
        with contextlib.redirect_stdout(io.StringIO()):
            data = torch.load(layout.path / name, map_location="cpu", weights_only=False)
    except Exception as exc:  # an unreadable pickle is the user's file, said in one line
        raise CheckpointError(f"{layout.path / name} cannot be read by torch.load: "
                              f"{type(exc).__name__}: {exc}") from None
    loaded: object = data
    return loaded
