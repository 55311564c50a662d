"""One rank of the equivalence-by-training check (run by torchrun, two CPU ranks).

The same recipe, overridden into DDP, DeepSpeed ZeRO-1/2/3 and FSDP2 with reshard
false/true, is resolved, emitted and trained in the same two processes one after the
other (starting torch and a process group once instead of six times). Each variant
goes through the trainer's launch contract: the resolved plan as the run directory
holds it (`plan_json`) and, for ZeRO, the ds_config the DeepSpeed emitter writes.
Rank 0 writes {variant: [step records]} to the path given as the only argument.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch.distributed as dist

from distrecipe.launch import tiny_train
from distrecipe.launch.rundir import plan_json
from distrecipe.translator import deepspeed
from distrecipe.translator.load import load_recipe
from distrecipe.translator.resolve import resolve

RECIPE = Path(__file__).resolve().parent.parent / "recipes" / "tiny-cpu.yaml"
CLIP = "grad_clip=0.3"
"""Below the first steps' gradient norm (≈0.8), so every engine's clipping is exercised."""
VARIANTS = {
    "ddp": ("strategy=ddp", "stage=0", CLIP),
    "zero1": ("strategy=zero", "stage=1", CLIP),
    "zero2": ("strategy=zero", "stage=2", CLIP),
    "zero3": ("strategy=zero", "stage=3", CLIP),
    "fsdp2-reshard-false": ("strategy=fsdp", "stage=2", CLIP),
    "fsdp2-reshard-true": ("strategy=fsdp", "stage=3", CLIP),
    # The control: all but no learning. The variants must agree with each other and
    # differ from this, or "they agree" would only mean "nothing trained".
    "control-no-learning": ("strategy=ddp", "stage=0", CLIP, "optimizer.lr=1e-9"),
    # The shipped demo recipe unchanged, for the run through `distrecipe launch`.
    "demo": (),
}


def main(out: Path) -> None:
    curves: dict[str, list[dict[str, object]]] = {}
    for name, overrides in VARIANTS.items():
        plan = resolve(load_recipe(RECIPE, overrides))
        ds_config = deepspeed.emit(plan) if plan.recipe.strategy == "zero" else None
        settings = tiny_train.TrainSettings.from_plan(json.loads(plan_json(plan)), steps=10,
                                                      deepspeed=ds_config is not None)
        if not dist.is_initialized():
            tiny_train.init_process_group(settings)
        curves[name] = tiny_train.train(settings, ds_config=ds_config, emit=lambda record: None)
    if dist.get_rank() == 0:
        out.write_text(json.dumps(curves))
    dist.destroy_process_group()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
    tiny_train.exit_without_teardown(0)
