"""Plan → OpenRLHF's command line (`python3 -m openrlhf.cli.train_ppo_ray ...`, grouped
options of OpenRLHF ≥ 0.10.2), as `openrlhf_train.sh`.

OpenRLHF is configured by command line only and builds its ds_config from it: the
recipe's global batch is `--train.batch_size` (sequences per optimizer step) with
`--train.micro_batch_size`, and DeepSpeed derives the accumulation over the actor's
`num_nodes × num_gpus_per_node` ranks (`engines.openrlhf.ds_violation` is its assertion).
`rl.prompts_per_step` prompts of `rl.rollout_n` samples each are one rollout, so one
rollout is one optimizer step, as in verl. Every model group (actor, reference, critic,
reward) is placed on all the recipe's GPUs and colocated with vLLM (`--train.colocate_all`,
one engine per GPU), `rl.rollout_memory` is vLLM's `--vllm.gpu_memory_utilization` and
`rl.free_rollout_memory` its sleep mode. `checkpoint` is `--ckpt.*` (`saving`): OpenRLHF
resumes only from `--ckpt.path/_actor`. The models and data are the user's: the script
leaves `$ACTOR`, `$REWARD` and `$PROMPTS` to the shell. OpenRLHF runs ZeRO only, in bf16 or
fp16; anything else is refused (DR208), and what the line cannot hold is named.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import replace

from distrecipe.engines.openrlhf import ACTOR_CHECKPOINTS, PPO_ENTRY
from distrecipe.findings import Finding
from distrecipe.job import Plan
from distrecipe.output import one_line
from distrecipe.translator import carry
from distrecipe.translator.codes import finding
from distrecipe.translator.equivalence import refuse_errors
from distrecipe.translator.targets import EmitOptions, Output

TARGET = "openrlhf"
SCRIPT_FILE = "openrlhf_train.sh"
ENTRY = PPO_ENTRY
USER = ("--actor.model_name_or_path", "$ACTOR"), ("--reward.model_name_or_path", "$REWARD"), \
    ("--data.prompt_dataset", "$PROMPTS")
"""What only the user can say: the models and the prompts, left to the shell."""
STANDS_IN: dict[str, tuple[str, ...]] = {
    "--reward.model_name_or_path": ("--reward.remote_url", "--train.agent_func_path")}
"""Options that take a `USER` option's place: train_ppo_ray scores with a remote reward or an
agent function instead of a reward model (its `__main__` block sets `reward.remote_url`)."""


def findings(plan: Plan, *, launched: bool = False) -> list[Finding]:
    """What OpenRLHF's command line cannot hold of the recipe: what it refuses, and each
    stated field its column of the carry table does not carry (`translator.carry`)."""
    r = plan.recipe
    found: list[Finding] = []
    if r.rl is None:
        found.append(finding("DR208", TARGET, "train_ppo_ray needs rl.rollout_n and rl.prompts_per_step"))
    if r.rl is not None and r.rl.rollout_mode == "server":
        found.append(finding("DR208", TARGET, "rl.rollout_mode server: OpenRLHF's separate vLLM engines "
                                              "(no --train.colocate_all) need GPUs the recipe's cluster does "
                                              "not count"))
    if r.strategy != "zero":
        found.append(finding("DR208", TARGET, f"OpenRLHF's trainers run DeepSpeed ZeRO, not {r.strategy}"))
    if plan.precision not in ("bf16", "fp16"):
        found.append(finding("DR208", TARGET, f"--ds.param_dtype takes bf16 or fp16, not {plan.precision}"))
    if plan.dims.tensor > 1 or plan.dims.pipeline > 1 or plan.dims.sequence > 1:
        found.append(finding("DR208", TARGET, "tensor, pipeline or sequence parallelism (OpenRLHF's own "
                                              "--ds.tensor_parallel_size and ring attention are not mapped)"))
    if r.checkpoint is not None and (refused := resume_refusal(r.checkpoint.dir, r.checkpoint.resume)):
        found.append(replace(finding("DR208", TARGET, refused),
                             where=r.at("checkpoint.resume", "checkpoint.dir", "checkpoint")))
    schedule = r.schedule
    if schedule is not None and schedule.min_lr_ratio is not None and schedule.decay != "cosine":
        found.append(finding("DR225", TARGET, f"schedule.min_lr_ratio {schedule.min_lr_ratio}: "
                                              "--actor.min_lr_ratio is cosine_with_min_lr's floor; "
                                              f"{SCHEDULERS[schedule.decay]} has none"))
    if r.optimizer is not None and r.optimizer.name != "adamw":
        written = carry.as_written("optimizer.name")
        found.append(finding("DR222", TARGET, f"optimizer.name {r.optimizer.name}{written}: OpenRLHF builds "
                                              "its own AdamW"))
    return found + carry.findings(plan, ("openrlhf",), TARGET, launched=launched)


def decided(plan: Plan) -> list[tuple[str, str | None, str]]:
    """The options the recipe decides, in order: (option, value or None for a switch, the
    recipe key that decides it), which `launch` checks a user's own options against."""
    r = plan.recipe
    rl = r.rl
    assert rl is not None
    nodes, gpus = plan.dims.nodes, plan.dims.gpus_per_node
    out: list[tuple[str, str | None, str]] = []
    for group in ("actor", "ref", "critic", "reward"):
        out += [(f"--{group}.num_nodes", str(nodes), "cluster.nodes"),
                (f"--{group}.num_gpus_per_node", str(gpus), "cluster.gpus_per_node")]
    out += [("--train.colocate_all", None, "rl.rollout_mode"),
            ("--vllm.num_engines", str(plan.dims.world), "cluster.nodes × cluster.gpus_per_node"),
            ("--vllm.tensor_parallel_size", "1", "one vLLM engine per GPU")]
    if rl.rollout_memory is not None:
        out.append(("--vllm.gpu_memory_utilization", f"{rl.rollout_memory:g}", "rl.rollout_memory"))
    if rl.free_rollout_memory:
        out.append(("--vllm.enable_sleep", None, "rl.free_rollout_memory"))
    out += [("--train.batch_size", str(plan.batch.global_), "batch.global"),
            ("--train.micro_batch_size", str(plan.batch.micro), "batch.micro"),
            ("--rollout.batch_size", str(rl.prompts_per_step), "rl.prompts_per_step"),
            ("--rollout.n_samples_per_prompt", str(rl.rollout_n), "rl.rollout_n"),
            ("--ds.zero_stage", str(plan.stage), "stage"), ("--ds.param_dtype", plan.precision, "precision")]
    if r.optimizer is not None and r.optimizer.lr is not None:
        out.append(("--actor.adam.lr", f"{r.optimizer.lr:g}", "optimizer.lr"))
    if r.grad_clip is not None:
        out.append(("--actor.max_norm", f"{r.grad_clip:g}", "grad_clip"))
    return out + adam(plan) + scheduling(plan) + saving(plan)


def adam(plan: Plan) -> list[tuple[str, str | None, str]]:
    """The actor's AdamW beyond its learning rate: OpenRLHF hands `--actor.adam.betas`, `.eps`
    and `.weight_decay` to DeepSpeed's AdamW (`DeepspeedStrategy`'s `optim_dict`)."""
    optimizer = plan.recipe.optimizer
    if optimizer is None:
        return []
    out: list[tuple[str, str | None, str]] = []
    if optimizer.betas is not None:
        betas = " ".join(f"{beta:g}" for beta in optimizer.betas)
        out.append(("--actor.adam.betas", betas, "optimizer.betas"))
    if optimizer.eps is not None:
        out.append(("--actor.adam.eps", f"{optimizer.eps:g}", "optimizer.eps"))
    if optimizer.weight_decay is not None:
        out.append(("--actor.adam.weight_decay", f"{optimizer.weight_decay:g}", "optimizer.weight_decay"))
    return out


SCHEDULERS = {"constant": "constant_with_warmup", "linear": "linear", "cosine": "cosine_with_min_lr"}
"""`schedule.decay` → `--actor.lr_scheduler`, a name OpenRLHF hands transformers' `get_scheduler`
with its warmup (`constant` would ignore it) and, for `cosine_with_min_lr`, the floor."""


def scheduling(plan: Plan) -> list[tuple[str, str | None, str]]:
    """The actor's schedule: `--actor.lr_scheduler` for the decay, `--actor.lr_warmup_ratio` and
    `--actor.min_lr_ratio` where the recipe states them (else OpenRLHF's 0.03 and 0.1 run,
    the engine's, as the recipe's schedule leaves them). Warmup steps and the run's length
    have no option: OpenRLHF counts its own steps (`no_option` in the carry table)."""
    schedule = plan.recipe.schedule
    if schedule is None:
        return []
    out: list[tuple[str, str | None, str]] = [("--actor.lr_scheduler", SCHEDULERS[schedule.decay],
                                                "schedule.decay")]
    if schedule.warmup_ratio is not None:
        out.append(("--actor.lr_warmup_ratio", f"{schedule.warmup_ratio:g}", "schedule.warmup_ratio"))
    if schedule.min_lr_ratio is not None and schedule.decay == "cosine":
        out.append(("--actor.min_lr_ratio", f"{schedule.min_lr_ratio:g}", "schedule.min_lr_ratio"))
    return out


SPLIT = frozenset({"--actor.adam.betas"})
"""Options of two words (`nargs=2`): their value is written as its words."""


def words(option: str, value: str | None) -> tuple[str, ...]:
    """The command line's words for one decided option (its value split where it takes two)."""
    if value is None:
        return (option,)
    return (option, *value.split(" ")) if option in SPLIT else (option, value)


def saving(plan: Plan) -> list[tuple[str, str | None, str]]:
    """The `--ckpt.*` options the recipe's `checkpoint` decides: OpenRLHF saves DeepSpeed
    checkpoints under `--ckpt.path` every `--ckpt.save_steps` rollouts (verl's trainer steps),
    keeps `--ckpt.max_num`, and with `--ckpt.load_enable` loads the tag `latest` names in
    `--ckpt.path/_actor` (`launch` checks it first and adds `--ds.use_universal_ckpt` for a
    universal one). A resume path is that folder or a tag in it (`resume_refusal`)."""
    checkpoint = plan.recipe.checkpoint
    if checkpoint is None:
        return []
    out: list[tuple[str, str | None, str]] = []
    if checkpoint.dir is not None:
        out.append(("--ckpt.path", checkpoint.dir, "checkpoint.dir"))
    if checkpoint.every is not None:
        out.append(("--ckpt.save_steps", str(checkpoint.every), "checkpoint.every"))
    if checkpoint.keep is not None:
        out.append(("--ckpt.max_num", str(checkpoint.keep), "checkpoint.keep"))
    if checkpoint.resume not in (None, "none"):
        out.append(("--ckpt.load_enable", None, "checkpoint.resume"))
    return out


def resume_refusal(directory: str | None, resume: str | None) -> str | None:
    """Why OpenRLHF cannot resume from `resume` (`checkpoint.resume`) with `--ckpt.path`
    `directory` (`checkpoint.dir`), or None: it loads only from `--ckpt.path/_actor`, so a
    resume needs that dir, and a resume path must be the dir, its `_actor`, or a tag in it
    (`checkpoints.check` then holds it to the tag `latest` names). Paths are read from the
    working directory, as `launch` reads them."""
    if resume in (None, "none"):
        return None
    if directory is None:
        return (f"checkpoint.resume {resume}: OpenRLHF loads from --ckpt.path/{ACTOR_CHECKPOINTS}, "
                "and checkpoint.dir (its --ckpt.path) is not stated")
    if resume == "auto":
        return None
    actor = os.path.join(directory, ACTOR_CHECKPOINTS)
    given, held = os.path.abspath(resume), os.path.abspath(actor)
    if given in (os.path.abspath(directory), held) or os.path.dirname(given) == held:
        return None
    return (f"checkpoint.resume {resume}: OpenRLHF loads only the tag `latest` names in "
            f"--ckpt.path/{ACTOR_CHECKPOINTS} ({actor}, from checkpoint.dir) and takes no other path; "
            "resume auto, or set checkpoint.dir to the folder that holds the checkpoint's _actor")


def arguments(plan: Plan) -> list[tuple[str, str | None]]:
    """The command line's options in order, each with its value (None for a switch)."""
    return [*((name, value) for name, value, _key in decided(plan)), *USER]


def text(plan: Plan) -> str:
    lines = [f"# distrecipe: {one_line(plan.recipe.name)}. OpenRLHF's PPO entry on the recipe's "
             f"{plan.dims.world} GPUs; set ACTOR, REWARD and PROMPTS.", f"python3 -m {ENTRY} \\"]
    options = arguments(plan)
    user = {name for name, _placeholder in USER}
    for index, (name, value) in enumerate(options):
        end = "" if index == len(options) - 1 else " \\"
        # the user's placeholders stay for the shell to expand; the recipe's words are quoted
        said = (value,) if name in user else tuple(shlex.quote(w) for w in words(name, value)[1:])
        lines.append(f"    {' '.join((name, *(w for w in said if w is not None)))}{end}")
    return "\n".join(lines) + "\n"


def render(plan: Plan, options: EmitOptions) -> Output:
    found = findings(plan, launched=options.launched)
    refuse_errors(found)
    return Output(files={SCRIPT_FILE: text(plan)}, findings=tuple(found))
