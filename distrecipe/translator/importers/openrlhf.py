"""OpenRLHF command line (`python3 -m openrlhf.cli.train_ppo_ray ...`) → recipe: the
inverse of `translator.openrlhf`, so recipe → OpenRLHF → import → recipe comes back.

Options are read as the judging release's parser takes them (an abbreviation or a flat
alias resolves to its dest, `engines.openrlhf.Entry`), unstated ones at its defaults. The
actor's `num_nodes × num_gpus_per_node` is the cluster, `--train.batch_size` and
`--train.micro_batch_size` the batch (DeepSpeed derives the accumulation), ZeRO's stage
and `--ds.param_dtype` the strategy and precision, `--actor.adam.lr` and
`--actor.max_norm` the optimizer, and the rollout (`--rollout.batch_size` prompts of
`--rollout.n_samples_per_prompt`) `rl`, with vLLM's memory, sleep mode, and colocation
(`--train.colocate_all`; separate engines are `rl.rollout_mode: server`); the actor's
`--actor.adam.*` and schedule options are `optimizer` and `schedule`, `--ckpt.*` is
`checkpoint`, and `launch.backend` is `openrlhf`, so `launch` runs this trainer (an `rl`
recipe's default is verl's). A command line has no `native` section: every other option is
named in a note, by the name written.
"""

from __future__ import annotations

from typing import Any

from distrecipe.engines.openrlhf import entry, expansions, judging
from distrecipe.translator.importers import Context, Imported, NotImportable
from distrecipe.translator.openrlhf import ENTRY

READ = {
    "actor.num_nodes": "nodes", "actor.num_gpus_per_node": "gpus_per_node",
    "train.batch_size": "global", "train.micro_batch_size": "micro",
    "rollout.batch_size": "prompts", "rollout.n_samples_per_prompt": "n",
    "ds.zero_stage": "stage", "ds.param_dtype": "dtype", "actor.adam.lr": "lr", "actor.max_norm": "max_norm",
    "vllm.gpu_memory_utilization": "rollout_memory", "vllm.enable_sleep": "sleep",
    "train.colocate_all": "colocate", "vllm.num_engines": "engines",
}
"""The dests the recipe reads (grouped releases, ≥ 0.10.2) → what they are."""
ADAM = {"actor.adam.betas": "betas", "actor.adam.eps": "eps", "actor.adam.weight_decay": "weight_decay"}
"""The actor's AdamW options the recipe's `optimizer` reads, where the line states them."""
SCHEDULE = ("actor.lr_scheduler", "actor.lr_warmup_ratio", "actor.min_lr_ratio")
"""The actor's schedule options the recipe's `schedule` reads, where the line states one."""
DECAYS = {"constant_with_warmup": "constant", "constant": "constant", "linear": "linear",
          "cosine_with_min_lr": "cosine", "cosine": "cosine"}
"""`--actor.lr_scheduler` → `schedule.decay` (`translator.openrlhf.SCHEDULERS` writes it back)."""
CHECKPOINT = {"ckpt.path": "dir", "ckpt.save_steps": "every", "ckpt.max_num": "keep",
              "ckpt.load_enable": "resume"}
"""The `--ckpt.*` dests the recipe's `checkpoint` reads (`_checkpoint`) → its field."""
AS_EMITTED = frozenset({"ref.num_nodes", "ref.num_gpus_per_node", "critic.num_nodes",
                        "critic.num_gpus_per_node", "reward.num_nodes", "reward.num_gpus_per_node",
                        "vllm.tensor_parallel_size"})
"""Dests `compile --target openrlhf` writes from the recipe's world: read back, named only
where they differ from what it would write."""


def to_recipe(data: dict[str, Any], context: Context) -> Imported:
    [(module, options)] = data.items()
    if module != ENTRY:
        raise NotImportable(f"{module}: import reads {ENTRY}'s RL job, which --target openrlhf writes; "
                            "the other entries are linted", context.doc.where((module,)))
    known = entry(module)
    if known is None:
        raise NotImportable(f"{module} is no entry of the judging OpenRLHF release",
                            context.doc.where((module,)))
    hidden = expansions("\n".join(context.doc.lines), context.doc.file)
    if hidden:
        raise NotImportable(f"{hidden[0].text} is left to the shell: the options it expands to are not on "
                            "the command line import reads, and the parser's defaults would stand for them; "
                            "write them out", hidden[0].where)
    given: dict[str, tuple[str, Any]] = {}
    for written, value in options.items():
        option = known.resolve(written)
        if option is None:  # a value read at the default instead would be replaced silently
            raise NotImportable(f"{written} is not an option of {judging()}'s {module.rsplit('.', 1)[-1]} "
                                "(`distrecipe lint` names the release that has it): import reads what the "
                                "parser takes", context.doc.where((module, written), key=True))
        given[known.options[option]["dest"]] = (written, value)
    values = {what: _value(known, dest, given, context, module) for dest, what in READ.items()}
    nodes, gpus = integer(values["nodes"]), integer(values["gpus_per_node"])
    numbers = {name: integer(values[name]) for name in ("global", "micro", "prompts", "n", "stage")}
    missing = [name for name, value in (("nodes", nodes), ("gpus", gpus), *numbers.items()) if value is None]
    if missing:
        raise NotImportable(f"the command line leaves {', '.join(missing)} to the shell or a non-number: the "
                            "recipe needs them", context.doc.where((module,)))
    reals = {name: _real(values[name]) for name in ("lr", "max_norm", "rollout_memory")}
    if (bad := next((name for name, value in reals.items() if value is None), None)) is not None:
        raise NotImportable(f"{bad} {values[bad]!r} is not a number", context.doc.where((module,)))
    recipe: dict[str, Any] = {
        "recipe": 1, "model": {}, "cluster": {"nodes": nodes, "gpus_per_node": gpus}, "strategy": "zero",
        "stage": numbers["stage"],
        "batch": {"micro": numbers["micro"], "global": numbers["global"]},
        "precision": values["dtype"], "optimizer": {"name": "adamw", "lr": reals["lr"]},
        "grad_clip": reals["max_norm"],
        "rl": {"rollout_n": numbers["n"], "prompts_per_step": numbers["prompts"]}}
    rl = recipe["rl"]
    if "vllm.gpu_memory_utilization" in given:
        rl["rollout_memory"] = reals["rollout_memory"]
    if values["sleep"] is True:
        rl["free_rollout_memory"] = True
    engines = integer(values["engines"]) or 0
    if not values["colocate"] and engines > 0:
        rl["rollout_mode"] = "server"
    assert nodes is not None and gpus is not None
    notes = _unread(given, nodes, gpus)
    recipe["optimizer"].update(_adam(given, context, module, notes))
    schedule = _schedule(known, given, context, module, notes)
    if schedule:
        recipe["schedule"] = schedule
    checkpoint = _checkpoint(known, given, context, module, notes)
    if checkpoint:
        recipe["checkpoint"] = checkpoint
    recipe["launch"] = {"backend": "openrlhf"}  # `launch` runs the trainer this line is for, not verl
    if values["colocate"] and engines != nodes * gpus:
        notes.append(f"{given['vllm.num_engines'][0] if 'vllm.num_engines' in given else 'vllm.num_engines'} "
                     f"{engines}: compile writes one colocated engine per GPU ({nodes * gpus})")
    return Imported(recipe=recipe, notes=notes, read={})


def _adam(given: dict[str, tuple[str, Any]], context: Context, module: str,
          notes: list[str]) -> dict[str, Any]:
    """`--actor.adam.betas/eps/weight_decay` as the recipe's optimizer keys, where stated (one
    left to the shell is named, not read)."""
    out: dict[str, Any] = {}
    for dest, key in ADAM.items():
        if dest not in given:
            continue
        written, value = given[dest]
        if value is None:
            notes.append(f"{written}: left to the shell, not read; keep the command line for it")
            continue
        words = value if isinstance(value, list) else [value]
        numbers = [_real(word) for word in words]
        if None in numbers or (dest == "actor.adam.betas") != (len(numbers) == 2):
            raise NotImportable(f"{written} {' '.join(map(str, words))}: not the number(s) the recipe's "
                                f"optimizer.{key} holds", context.doc.where((module, written)))
        out[key] = numbers if dest == "actor.adam.betas" else numbers[0]
    return out


def _schedule(known: Any, given: dict[str, tuple[str, Any]], context: Context, module: str,
              notes: list[str]) -> dict[str, Any]:
    """The actor's schedule, where the line states one of its options: the decay its
    `--actor.lr_scheduler` runs, the warmup ratio, and cosine_with_min_lr's floor (the
    parser's defaults, 0.03 and 0.1, where unstated: what runs). A scheduler the recipe has
    no decay for is named and not read; `constant` ignores the warmup (`get_scheduler`), so
    its ratio is 0, and plain `cosine` decays to 0: both are named, since compile writes them
    back as constant_with_warmup and cosine_with_min_lr."""
    stated = [dest for dest in SCHEDULE if dest in given]
    if not stated:
        return {}
    values = {dest: given[dest][1] if dest in given else known.default(dest) for dest in SCHEDULE}
    if any(value is None for value in values.values()):
        shown = ", ".join(given[dest][0] for dest in stated)
        notes.append(f"{shown}: left to the shell, the schedule is not read; keep the command line for it")
        return {}
    name = str(values["actor.lr_scheduler"])
    if name not in DECAYS:
        notes.append(f"--actor.lr_scheduler {name}: the recipe's schedule has no such decay (constant, "
                     "linear, cosine); keep the command line for it")
        return {}
    ratios = {dest: _real(values[dest]) for dest in SCHEDULE[1:]}
    bad = next((dest for dest, ratio in ratios.items() if ratio is None or not 0 <= ratio <= 1), None)
    if bad is not None:
        written = given[bad][0] if bad in given else f"--{bad}"
        raise NotImportable(f"{written} {values[bad]!r} is not a ratio from 0 to 1",
                            context.doc.where((module, written) if bad in given else (module,)))
    out: dict[str, Any] = {"decay": DECAYS[name], "warmup_ratio": ratios["actor.lr_warmup_ratio"]}
    if name == "constant":
        out["warmup_ratio"] = 0.0
        notes.append("--actor.lr_scheduler constant ignores the warmup: schedule.warmup_ratio 0, written "
                     "back as constant_with_warmup with --actor.lr_warmup_ratio 0")
    if name == "cosine_with_min_lr":
        out["min_lr_ratio"] = ratios["actor.min_lr_ratio"]
    if name == "cosine":
        out["min_lr_ratio"] = 0.0
        notes.append("--actor.lr_scheduler cosine decays to 0: schedule.min_lr_ratio 0, written back as "
                     "cosine_with_min_lr with --actor.min_lr_ratio 0")
    return out


def _checkpoint(known: Any, given: dict[str, tuple[str, Any]], context: Context, module: str,
                notes: list[str]) -> dict[str, Any]:
    """`--ckpt.*` as the recipe's `checkpoint`, where the line states them: the save dir
    (`--ckpt.path`), every `--ckpt.save_steps` rollouts (-1, OpenRLHF's default, saves
    never: no `every`), `--ckpt.max_num` kept, and `--ckpt.load_enable` as `resume: auto`
    (OpenRLHF loads the tag `latest` names in `--ckpt.path/_actor`), with the parser's
    default path where the line gives none, since that is where it loads from. A value left
    to the shell is not read, and named, and `--ckpt.load_enable` with it where it is the
    save dir's."""
    shell = {dest for dest, (_written, value) in given.items() if dest in CHECKPOINT and value is None}
    if "ckpt.path" in shell and "ckpt.load_enable" in given:
        shell.add("ckpt.load_enable")  # a resume with no dir to load from
    if shell:
        unread = ", ".join(sorted(given[dest][0] for dest in shell))
        notes.append(f"{unread}: not read (the save dir is left to the shell); keep the command line for it")
    given = {dest: item for dest, item in given.items() if dest not in shell}
    out: dict[str, Any] = {}
    for dest in ("ckpt.save_steps", "ckpt.max_num"):
        if dest not in given:
            continue
        written, value = given[dest]
        number, where = integer(value), context.doc.where((module, written))
        if number is None:
            raise NotImportable(f"{written} {value!r} is not a whole number", where)
        if number >= 1:
            out[CHECKPOINT[dest]] = number
        elif dest == "ckpt.max_num" or number != -1:
            field = CHECKPOINT[dest]
            raise NotImportable(f"{written} {number}: the recipe's checkpoint.{field} is at least 1", where)
    load = "ckpt.load_enable" in given
    if "ckpt.path" in given or load:
        out["dir"] = str(given["ckpt.path"][1] if "ckpt.path" in given else known.default("ckpt.path"))
        if "ckpt.path" not in given:
            notes.append(f"--ckpt.load_enable without --ckpt.path: checkpoint.dir is OpenRLHF's default "
                         f"{out['dir']}, where it loads from")
    if load:
        out["resume"] = "auto"
    order = ("dir", "every", "keep", "resume")  # the recipe's own order
    return {key: out[key] for key in order if key in out}


def integer(value: Any) -> int | None:
    """A word of the command line as argparse's `type=int` takes it; None when it is not one."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    text = str(value).strip()
    return int(text) if text.lstrip("+-").isdigit() else None


def _real(value: Any) -> float | None:
    """A word as argparse's `type=float` takes it; None when it is not one."""
    if isinstance(value, bool):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _value(known: Any, dest: str, given: dict[str, tuple[str, Any]], context: Context, module: str) -> Any:
    """The value the parser gives `dest`: as written (a switch: True), else its default."""
    if dest not in given:
        return known.default(dest)
    written, value = given[dest]
    if value is None:
        raise NotImportable(f"{written} is left to a shell variable: the recipe needs its value",
                            context.doc.where((module, written)))
    return value


def _unread(given: dict[str, tuple[str, Any]], nodes: int, gpus: int) -> list[str]:
    """Notes naming, by the name written, every option the recipe does not read, and each
    placement that is not what `compile` writes from the recipe's world."""
    left = sorted(given[dest][0] for dest in given if dest not in READ and dest not in AS_EMITTED
                  and dest not in CHECKPOINT and dest not in ADAM and dest not in SCHEDULE)
    written = {"num_nodes": nodes, "num_gpus_per_node": gpus, "tensor_parallel_size": 1}
    apart = sorted(given[dest][0] for dest in given if dest in AS_EMITTED
                   and integer(given[dest][1]) != written[dest.split(".")[-1]])
    known = entry(ENTRY)
    assert known is not None
    unstated = sorted(f"--{dest} (default {known.default(dest)})" for dest in AS_EMITTED if dest not in given
                      and integer(known.default(dest)) != written[dest.split(".")[-1]])
    notes = []
    if left:
        notes.append(f"{len(left)} OpenRLHF options are not a recipe's (models, data, algorithm, generation: "
                     f"{', '.join(left)}): keep the command line for them")
    if apart:
        notes.append(f"{', '.join(apart)}: not the recipe's placement (every model group on all "
                     f"{nodes} × {gpus} GPUs, one-GPU vLLM engines): keep the command line for them")
    if unstated:
        notes.append(f"{', '.join(unstated)}: left to OpenRLHF's defaults, which compile replaces with the "
                     f"recipe's placement ({nodes} × {gpus} GPUs for every model group)")
    return notes
