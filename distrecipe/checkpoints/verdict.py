"""Can this job load that checkpoint? The engines' own load rules, as one table.

Each `Rule` is one (checkpoint kind, what changed) pair and what the loading engine does
with it, read from its load path:

* DeepSpeed `_load_zero_checkpoint` raises "The checkpoint being loaded used a DP world
  size of N but the current world size is M" whenever optimizer states are loaded at
  another data-parallel world, at every ZeRO stage; `ds_to_universal` rewrites the
  shards per parameter (`zero/<name>/fp32.pt`, `exp_avg.pt`, ...) and the ds_config's
  `checkpoint.load_universal` makes `load_checkpoint` read them at any DP/TP/PP world.
  ZeRO-1 and ZeRO-2 share one optimizer (`DeepSpeedZeroOptimizer`) and files; ZeRO-3's
  (`DeepSpeedZeroOptimizer_Stage3`) reads per-rank model-state files the others do not write.
* torch distributed checkpoint loads into any world: `.metadata` maps every tensor's
  chunks, and `dcp.load` reads the pieces each rank's new shard needs.
* The HF Trainer restores `global_step` from `trainer_state.json` and skips
  `global_step × gradient_accumulation_steps` batches of the new per-rank data loader
  (`_init_training_state`): with another global batch the learning-rate schedule
  (counted in steps) and the data position (in samples) move; the same global batch
  split over other ranks and accumulation skips the same samples. The saved
  accumulation is in the pickled `training_args.bin`, so only torch-reading commands warn.
* verl loads `model_world_size_{W}_rank_{r}.pt` for its own W only.
* Accelerate loads whole `model`/`optimizer` files at any world; a process beyond the
  saved world finds no `random_states_{i}.pkl` and keeps its fresh random state, and a
  prepared scheduler (stepped once per process) keeps the saved world's count but not its pace.

`docs/checkpoints.md` is `markdown()` verbatim; `tests/checkpoints/` loads real
checkpoints with the engines for the rules marked as checked there.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from distrecipe.checkpoints.layout import Kind, Layout
from distrecipe.job import Plan

Outcome = Literal["resumes as is", "resumes after a conversion", "cannot"]
Loader = Literal["deepspeed", "fsdp2", "ddp", "verl"]
"""What loads the state in the new job: DeepSpeed's engine, torch (FSDP2 via DCP), plain
DDP/torch, or verl's checkpoint manager."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Job:
    """What a job about to start loads with: its engine, worlds and batch."""

    loader: Loader
    stage: int
    dp: int
    tp: int = 1
    pp: int = 1
    world: int
    micro: int | None = None
    accumulation: int | None = None
    global_batch: int | None = None
    trainer: bool = False
    """The HF Trainer drives the loop (its step and data-position bookkeeping apply)."""


@dataclass(frozen=True, slots=True)
class Rule:
    id: str
    kind: Kind
    change: str
    outcome: Outcome
    converter: str
    why: str
    checked: str = ""
    """The test that loads a real checkpoint with the engine for this rule, if one does."""


CHECKED = "tests/checkpoints/test_faults.py"
ACCELERATE_CHECKED = "tests/checkpoints/test_accelerate.py"
VERL_CHECKED = "tests/checkpoints/test_verl.py"
RULES: tuple[Rule, ...] = (
    Rule("ds-same", "deepspeed", "nothing (same DP, TP, PP, stage)", "resumes as is", "",
         "load_checkpoint reads each rank's own shards", CHECKED),
    Rule("ds-dp", "deepspeed", "data-parallel world", "resumes after a conversion", "ds_to_universal",
         "DeepSpeed refuses optimizer shards of another DP world (\"The checkpoint being loaded used a DP "
         "world size of N but the current world size is M\"); a universal checkpoint loads at any world",
         CHECKED),
    Rule("ds-tp-pp", "deepspeed", "tensor or pipeline world", "resumes after a conversion", "ds_to_universal",
         "the model states are split per TP/PP rank; the universal checkpoint holds each parameter whole"),
    Rule("ds-stage-12", "deepspeed", "ZeRO-1 ↔ ZeRO-2", "resumes as is", "",
         "one optimizer class (DeepSpeedZeroOptimizer) and the same files at both stages"),
    Rule("ds-stage-3", "deepspeed", "to or from ZeRO-3", "cannot", "zero_to_fp32",
         "ZeRO-3 reads per-rank model-state files (zero_pp_rank_*_model_states.pt) the other stages do "
         "not write, and the other stages read mp_rank_*_model_states.pt ZeRO-3 does not (DeepSpeed "
         "finds no model states, also after ds_to_universal); only the weights carry over (zero_to_fp32), "
         "the optimizer state does not", CHECKED),
    Rule("ds-engine", "deepspeed", "engine (FSDP2, DDP, verl)", "cannot", "zero_to_fp32",
         "the optimizer shards are DeepSpeed's; zero_to_fp32 gives the full weights to start from"),
    Rule("universal", "deepspeed-universal", "any DP/TP/PP world", "resumes as is", "",
         "with checkpoint.load_universal true in the ds_config (launch sets it)", CHECKED),
    Rule("universal-engine", "deepspeed-universal", "engine (FSDP2, DDP, verl)", "cannot", "",
         "only DeepSpeed reads the universal layout"),
    Rule("dcp-any", "dcp", "any world", "resumes as is", "",
         "DCP reshards on load: .metadata maps every tensor's chunks to the new ranks", CHECKED),
    Rule("dcp-engine", "dcp", "engine (DeepSpeed)", "cannot", "dcp_to_torch_save",
         "DeepSpeed does not read a DCP folder; dcp_to_torch_save gives one torch.save file of the state"),
    Rule("hf-batch", "hf", "global batch", "resumes as is", "",
         "the Trainer restores global_step and skips global_step × accumulation batches of the new loader: "
         "the learning-rate schedule and the data position move (a warning). The same global batch "
         "split otherwise (ranks × accumulation) skips the same samples: no warning"),
    Rule("hf-same", "hf", "nothing (same batch)", "resumes as is", "",
         "the Trainer restores model, optimizer, scheduler, RNG and step"),
    Rule("accelerate-any", "accelerate", "any world", "resumes as is", "",
         "whole model and optimizer files; processes beyond the saved world keep fresh random states; a "
         "prepared scheduler, stepped once per process, then runs at the new world's pace (a warning)",
         ACCELERATE_CHECKED),
    Rule("verl-same", "verl", "nothing (same world)", "resumes as is", "",
         "each rank loads its own model/optim/extra_state shard", VERL_CHECKED),
    Rule("verl-world", "verl", "world", "cannot", "verl.model_merger",
         "verl loads model_world_size_{W}_rank_{r}.pt for its own W only; verl.model_merger gives "
         "Hugging Face weights to start from (no optimizer state)", VERL_CHECKED),
)
BY_ID = {rule.id: rule for rule in RULES}


@dataclass(frozen=True, kw_only=True, slots=True)
class Verdict:
    outcome: Outcome
    rules: tuple[str, ...]
    why: str
    converter: str = ""
    command: tuple[str, ...] = ()
    changes: str = ""
    """What the conversion writes and changes."""
    warnings: tuple[str, ...] = ()
    universal: bool = False
    """The job must load with the ds_config's `checkpoint.load_universal: true`."""

    def line(self, layout: Layout) -> str:
        text = f"checkpoint {layout.path} ({layout.describe()}): {self.outcome}: {self.why}"
        if self.command:
            text += f"; run: {shlex.join(self.command)} ({self.changes})"
        return text


def universal_command(layout: Layout) -> tuple[str, ...]:
    """`distrecipe checkpoint convert --to universal TAG`: DeepSpeed's `ds_to_universal`
    into `TAG_universal` beside it, and `latest_universal` naming it."""
    return ("distrecipe", "checkpoint", "convert", "--to", "universal", str(layout.path))


def verdict(layout: Layout, job: Job) -> Verdict:
    """What loading `layout` in `job` does, by `RULES`. A partial checkpoint is refused
    before any rule (`cannot`)."""
    if not layout.complete:
        return Verdict(outcome="cannot", rules=(), why=f"partial checkpoint: {layout.partial}")
    warnings: list[str] = []
    inner = layout.inner
    if layout.kind == "hf":
        warnings += _hf_batch(layout, job)
    if layout.kind == "accelerate":
        warnings += _accelerate_world(layout, job)
    found = _engine(inner if inner is not None else layout, job)
    if layout.kind == "hf" and inner is None and found.outcome == "resumes as is":
        found = _with(found, rules=(*found.rules, "hf-batch" if warnings else "hf-same"))
    return _with(found, warnings=(*warnings, *found.warnings))


def _with(found: Verdict, **changes: object) -> Verdict:
    from dataclasses import replace

    return replace(found, **changes)  # type: ignore[arg-type]


def _engine(layout: Layout, job: Job) -> Verdict:
    if layout.kind == "deepspeed":
        return _deepspeed(layout, job)
    if layout.kind == "deepspeed-universal":
        if job.loader != "deepspeed":
            return _rule("universal-engine")
        return _with(_rule("universal"), universal=True)
    if layout.kind == "dcp":
        if job.loader == "deepspeed":
            return _rule("dcp-engine", command=("distrecipe", "checkpoint", "convert", "--to", "torch",
                                                str(layout.path)))
        return _rule("dcp-any")
    if layout.kind == "verl":
        if layout.world != job.world:
            cmd = ("python", "-m", "verl.model_merger", "merge", "--backend", "fsdp", "--local_dir",
                   str(layout.path / "actor"), "--target_dir", str(layout.path / "actor" / "huggingface"))
            return _rule("verl-world", command=cmd,
                         detail=f"saved at world {layout.world}, this job's is {job.world}")
        return _rule("verl-same")
    if layout.kind == "accelerate":
        return _rule("accelerate-any")
    return _rule("hf-same")


def _deepspeed(layout: Layout, job: Job) -> Verdict:
    fp32 = ("distrecipe", "checkpoint", "convert", "--to", "fp32", str(layout.path))
    if job.loader != "deepspeed":
        return _rule("ds-engine", command=fp32, detail=f"this job loads with {job.loader}")
    if layout.stage is not None and (layout.stage == 3) != (job.stage == 3):
        return _rule("ds-stage-3", command=fp32,
                     detail=f"saved at ZeRO-{layout.stage}, this job is ZeRO-{job.stage}")
    changed = []
    if layout.dp is not None and layout.dp != job.dp:
        changed.append(("ds-dp", f"saved at DP {layout.dp}, this job's DP is {job.dp}"))
    if (layout.tp or 1) != job.tp or layout.pp != job.pp:
        changed.append(("ds-tp-pp", f"saved at TP {layout.tp or 1} × PP {layout.pp}, this job's is "
                                    f"TP {job.tp} × PP {job.pp}"))
    if not changed:
        rules = ("ds-same",) if layout.stage in (None, 3) or layout.stage == job.stage else ("ds-stage-12",)
        return Verdict(outcome="resumes as is", rules=rules, why=BY_ID[rules[0]].why)
    ids = tuple(rule for rule, _ in changed)
    detail = "; ".join(text for _, text in changed)
    return Verdict(outcome="resumes after a conversion", rules=ids,
                   why=f"{detail}: {BY_ID[ids[0]].why}", converter="ds_to_universal",
                   command=universal_command(layout),
                   changes=f"writes {layout.path.name}_universal beside it (each parameter whole, with "
                           "its optimizer moments) and latest_universal naming it; launch then sets the "
                           "ds_config's checkpoint.load_universal true",
                   universal=True)


def _rule(rule_id: str, *, command: tuple[str, ...] = (), detail: str = "") -> Verdict:
    rule = BY_ID[rule_id]
    why = f"{detail}: {rule.why}" if detail else rule.why
    changes = {"zero_to_fp32": "writes the full fp32 weights (safetensors, from_pretrained loads them); the "
                               "optimizer state and step are not carried",
               "dcp_to_torch_save": "writes one torch.save file of the whole state",
               "verl.model_merger": "writes Hugging Face weights, cast to bf16 as the merger casts every "
                                    "shard, and the tokenizer; the optimizer state is not carried"}
    return Verdict(outcome=rule.outcome, rules=(rule_id,), why=why, converter=rule.converter,
                   command=command, changes=changes.get(rule.converter, ""))


ACCELERATE_SCHEDULER = re.compile(r"^scheduler(?:_\d+)?\.bin$")


def _accelerate_world(layout: Layout, job: Job) -> list[str]:
    """What `load_state` at another world does silently (`checkpointing.load_accelerator_state`,
    `scheduler.AcceleratedScheduler.step`): a process with no `random_states_{i}.pkl` keeps
    its own state (the "Could not load random states" it logs is an info from the main
    process only, which has its file), and a prepared scheduler, stepped once per process
    per optimizer step, goes on from the saved world's count at this world's pace."""
    if layout.world is None or job.world == layout.world:
        return []
    warnings = []
    saved, now = layout.world, job.world
    if now > saved:
        warnings.append(f"saved by {saved} processes: processes {saved}..{now - 1} find no random_states "
                        "file and keep their fresh random states (Accelerate says nothing: its \"Could not "
                        "load random states\" is logged by the main process only)")
    if any(ACCELERATE_SCHEDULER.match(name) for name in layout.files):
        warnings.append(f"saved by {saved} processes, loaded by {now}: Accelerate steps a prepared scheduler "
                        "once per process for each optimizer step (unless split_batches), and scheduler.bin "
                        f"holds the count of {saved}: the learning-rate schedule goes on {now}/{saved} as "
                        "fast as before the save")
    return warnings


def _hf_batch(layout: Layout, job: Job) -> list[str]:
    """The Trainer's warning: the saved global batch (per-device × ranks × accumulation, the
    last from `training_args.bin`, so only where it was read) against this job's. The
    Trainer skips `step × accumulation` batches of the new per-rank loader, which is the
    same number of samples whenever the global batch is the same, whatever the split."""
    if layout.per_device_batch is None or layout.accumulation is None or job.global_batch is None:
        return []
    saved = layout.per_device_batch * (layout.world or 1) * layout.accumulation
    if saved == job.global_batch:
        return []
    return [f"the checkpoint was trained at global batch {saved} (per-device {layout.per_device_batch} × "
            f"{layout.world or 1} ranks × accumulation {layout.accumulation}), this job's is "
            f"{job.global_batch}: "
            f"the Trainer resumes at step {layout.step} and skips step × accumulation batches of the new "
            f"loader, so the learning-rate schedule (in steps) and the data position (now sample "
            f"{(layout.step or 0) * job.global_batch}, was {(layout.step or 0) * saved}) move"]


BACKEND_KINDS = {"accelerate": "accelerate", "accelerate-deepspeed": "accelerate", "verl": "verl",
                 "torchrun": "torchrun", "openrlhf": "openrlhf"}
"""The program kind a backend implies where the recipe states none (DeepSpeed's otherwise):
what `lint` and `checkpoint check` judge with, before `launch` reads the script."""


def stated_kind(plan: Plan) -> str:
    kind = plan.recipe.launch.program_kind
    return kind if kind != "auto" else BACKEND_KINDS.get(plan.backend, "deepspeed")


def job_of(plan: Plan, kind: str) -> Job:
    """The `Job` a plan launched as program kind `kind` loads with."""
    strategy = plan.recipe.strategy
    loader: Loader
    if kind == "verl":
        loader = "verl"
    elif strategy in ("zero", "megatron"):
        loader = "deepspeed"
    elif strategy == "fsdp":
        loader = "fsdp2"
    else:
        loader = "ddp"
    batch = plan.resolved_batch
    return Job(loader=loader, stage=plan.stage, dp=plan.dims.dp, tp=plan.dims.tensor, pp=plan.dims.pipeline,
               world=plan.dims.world, micro=batch.micro if batch else None,
               accumulation=batch.accumulation if batch else None,
               global_batch=batch.global_ if batch else None, trainer=kind == "hf")


def markdown() -> str:
    """`docs/checkpoints.md`: the rules as the verdict table."""
    lines = [
        "# Checkpoints: which job can load which checkpoint",
        "",
        "Generated from `distrecipe/checkpoints/verdict.py` (`RULES`); a test checks this page is",
        "current. `launch`, `lint RECIPE` and `distrecipe checkpoint check` give these verdicts before any",
        "rank starts; `distrecipe checkpoint convert` runs the converter. *checked* names the test that",
        "loads a real checkpoint with the engine on CPU for that rule; the others are read from the",
        "engine's load path.",
        "",
        "| engine | what changed | verdict | converter | why | checked |",
        "|---|---|---|---|---|---|",
    ]
    for rule in RULES:
        lines.append(f"| {rule.kind} | {rule.change} | {rule.outcome} | {rule.converter or '—'} | "
                     f"{rule.why.replace('|', '/')} | {'`' + rule.checked + '`' if rule.checked else '—'} |")
    lines += ["", "Markers: a checkpoint is chosen only when its engine's marker is there (DeepSpeed's",
              "`latest`, `.metadata`, `trainer_state.json`, every `random_states_N.pkl`, verl's",
              "`latest_checkpointed_iteration.txt`); `lint` reads file names and JSON only (no torch:",
              "`.pt` and `.metadata` are pickles), `launch` and `checkpoint` also open DeepSpeed's model",
              "states for the stage and batch stored inside.", ""]
    return "\n".join(lines)


def resolve_resume(resume: str, directory: str | None, cwd: Path,
                   refine: Callable[[Layout], Layout] | None = None) -> Path | None:
    """The checkpoint `checkpoint.resume` means: None for `none` or for `auto` with nothing
    complete yet, else the path (`auto`: the latest complete one in `dir`)."""
    from distrecipe.checkpoints.layout import latest_complete

    if resume == "none":
        return None
    if resume == "auto":
        if directory is None:
            return None
        found = latest_complete(cwd / directory, refine)
        return found.path if found is not None else None
    return cwd / resume
