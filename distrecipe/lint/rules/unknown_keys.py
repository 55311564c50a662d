"""Keys an engine does not know, judged by the engine's own key tables.

Which keys each section accepts, and whether the engine refuses an unknown one at
start-up or silently ignores it, is read from `distrecipe/engines/tables` (generated
from the installed engines), so these rules say what the installed engine would do,
and name its version. A key written as a comment (`_comment`, `//…`, `#…`) is
reported as such where the engine ignores it, never with a typo suggestion.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Literal

from distrecipe.engines.deepspeed import IGNORE_KEY
from distrecipe.engines.hydra import overrides, verl_commands
from distrecipe.engines.shell import is_script
from distrecipe.engines.tables import (
    Section,
    VerlConfig,
    history,
    is_comment_key,
    label,
    removed_keys,
    section,
    table,
    verl_tree,
)
from distrecipe.engines.verl import removed_entry, verl_config
from distrecipe.keys import CLOSE, did_you_mean
from distrecipe.lint.rule import Problem
from distrecipe.lint.workspace import Source
from distrecipe.source import KeyPath

Verdict = Literal["refused", "ignored", "comment", "auto-dropped"]


def _where(path: KeyPath) -> str:
    return f"{'.'.join(map(str, path))}" if path else "top level"


def _release_note(engine: Literal["deepspeed", "accelerate"], path: KeyPath, key: str | None = None) -> str:
    """` (a key of DeepSpeed ≥ 0.19.4; the project runs 0.18.9 (installed))`, or `(removed in
    …)`, where another release's table has the key this one lacks; else nothing."""
    name = ".".join(map(str, path[:-1]))
    wanted = str(path[-1]) if key is None else key

    def has(found: dict[str, Any]) -> bool:
        return wanted in found["sections"].get(name, {}).get("keys", {})

    said = history(engine, has)
    return f" ({said})" if said else ""


def _deepspeed_unknown(node: dict[str, Any], path: tuple[str, ...] = ()) -> Iterator[
        tuple[KeyPath, Section, Verdict]]:
    """Every key of a ds_config DeepSpeed does not read where it is written, with what
    DeepSpeed does about it; keys of sections DeepSpeed passes on unread (`optimizer.params`)
    are not judged."""
    found = section("deepspeed", path)
    if found is None:
        return
    removed = removed_keys(path)
    for key, value in node.items():
        if key in found.keys:
            if isinstance(value, dict):
                yield from _deepspeed_unknown(value, (*path, key))
        elif key in removed or (not path and key == IGNORE_KEY):
            continue  # DR312 reports removed keys by name
        elif not found.refuses_unknown:
            yield (*path, key), found, "comment" if is_comment_key(key) else "ignored"
        elif value == "auto" and found.auto_dropped:
            yield (*path, key), found, "auto-dropped"
        else:
            yield (*path, key), found, "refused"


def _suggestion(key: str, found: Section, engine: Literal["deepspeed", "accelerate"],
                cutoff: float = 0.6) -> str:
    """Did-you-mean among the section's keys; for a top-level key, the section it belongs in."""
    if not found.name:
        for name, other in sorted(table(engine)["sections"].items()):
            if name and "." not in name and key in other["keys"]:
                return f"; it belongs inside {name}"
    return did_you_mean(key, sorted(found.keys), cutoff)


def _misspelt(key: str, found: Section) -> str:
    """The key DeepSpeed reads that `key` is a near-certain misspelling or misplacement of
    (as `; did you mean …` / `; it belongs inside …`), or nothing."""
    return "" if is_comment_key(key) else _suggestion(key, found, "deepspeed", CLOSE)


def deepspeed_refused_key(src: Source) -> Iterator[Problem]:
    """A key DeepSpeed refuses at start-up: unknown in a section that forbids extra keys.

    `zero_optimization` and its offload blocks, `bf16`/`fp16`, `compile`,
    `tensor_parallel`, the monitors (`tensorboard`, `wandb`, `csv_monitor`, `comet`),
    `comms_logger`, `hybrid_engine`, `weight_quantization` and `timers.throughput` are
    pydantic models that forbid extra keys, so DeepSpeed refuses the config when the job
    starts on the cluster ("Extra inputs are not permitted"), after the allocation has
    been paid for; even a `_comment` there is refused. The `stage3_` prefixes of ZeRO
    keys are optional. Which sections forbid extras is read from the installed DeepSpeed.

    Fails: deepspeed --world 8
    ```json
    {"train_batch_size": 32, "zero_optimization": {"stage": 3, "offload_params": {"device": "cpu"}}}
    ```

    Passes: deepspeed --world 8
    ```json
    {"train_batch_size": 32, "zero_optimization": {"stage": 3, "offload_param": {"device": "cpu"}}}
    ```

    Fix: `offload_param` (as the message suggests).
    """
    for path, found, verdict in _deepspeed_unknown(src.data):
        if verdict == "refused":
            key = str(path[-1])
            hint = "" if is_comment_key(key) else _suggestion(key, found, "deepspeed")
            note = _release_note("deepspeed", path)
            yield Problem(path, f"{key!r} is not a key of {label('deepspeed')}'s {_where(path[:-1])}{note}: "
                                f"DeepSpeed refuses the config at start-up{hint}", key=True)


def deepspeed_ignored_key(src: Source) -> Iterator[Problem]:
    """A key DeepSpeed does not read, and not a misspelling of one: silently ignored.

    DeepSpeed checks some sections' keys (see DR313), but not the top level nor the
    sections it reads key by key (`activation_checkpointing`, `flops_profiler`,
    `checkpoint`, `data_efficiency`, `aio`, ...): an unknown key there simply has no
    effect. Often another program reads it from the same file (gpt-neox's `logging`), so
    it is a warning; a near-certain misspelling of a key DeepSpeed reads is DR317, an
    error. An unknown key whose value is `"auto"` is dropped unread even in a checked
    section.

    Fails: deepspeed --world 8
    ```json
    {"train_batch_size": 32, "wandb_run": "exp-1", "zero_optimization": {"stage": 3}}
    ```

    Passes: deepspeed --world 8
    ```json
    {"train_batch_size": 32, "zero_optimization": {"stage": 3}}
    ```

    Fix: delete the key, or suppress it where your own script reads it:
    `"//distrecipe-ignore": ["DR311"]`.
    """
    for path, found, verdict in _deepspeed_unknown(src.data):
        key = str(path[-1])
        if verdict not in ("ignored", "auto-dropped") or _misspelt(key, found) \
                or _release_note("deepspeed", path):
            continue
        what = "silently ignored" if verdict == "ignored" else 'its "auto" is dropped unread'
        yield Problem(path, f"{key!r} is not a key of {label('deepspeed')}'s {_where(path[:-1])}: "
                            f"{what}{_suggestion(key, found, 'deepspeed')}", key=True)


def deepspeed_misspelt_key(src: Source) -> Iterator[Problem]:
    """A misspelt or misplaced DeepSpeed key: DeepSpeed ignores it, so the setting never applies.

    Where DeepSpeed does not check keys (the top level, `activation_checkpointing`,
    `flops_profiler`, ...), a key that is a near-certain misspelling of one it reads
    (`zero_optimisation`), or one that belongs in a section (`offload_param` at the top
    level), is silently ignored: the file says one thing and the job does another, with
    nothing in the log. `"zero_optimisation": {"stage": 3}` trains with ZeRO stage 0 and
    runs out of memory on the cluster; a top-level `offload_optimizer` offloads nothing.
    Near-certain means difflib's similarity of at least 0.85 (DR311 names looser matches).
    A key another DeepSpeed release reads (its table has it) is DeepSpeed's, not another
    program's: the release the project runs ignores it, and the message names the one
    that reads it.

    Fails: deepspeed --world 8
    ```json
    {"train_batch_size": 32, "zero_optimisation": {"stage": 3}}
    ```

    Fails: deepspeed --world 8
    ```json
    {"train_batch_size": 32, "zero_optimization": {"stage": 3}, "offload_param": {"device": "cpu"}}
    ```

    Passes: deepspeed --world 8
    ```json
    {"train_batch_size": 32, "zero_optimization": {"stage": 3, "offload_param": {"device": "cpu"}}}
    ```

    Fix: the spelling or the section in the message.
    """
    for path, found, verdict in _deepspeed_unknown(src.data):
        key = str(path[-1])
        if verdict not in ("ignored", "auto-dropped"):
            continue
        note = _release_note("deepspeed", path)  # DeepSpeed's own key, of another release
        hint = "" if note else _misspelt(key, found)
        if hint or note:
            what = "silently ignored" if verdict == "ignored" else 'its "auto" is dropped unread'
            yield Problem(path, f"{key!r} is not a key of {label('deepspeed')}'s {_where(path[:-1])}{note}: "
                                f"{what}, so the setting never applies{hint}", key=True)


def comment_key(src: Source) -> Iterator[Problem]:
    """A key written as a comment (`_comment`, `comment`, `//…`, `#…`), which the engine ignores.

    JSON has no comments, so people write them as keys. Where the engine ignores unknown
    keys that is harmless and said once as information; where it refuses them (inside
    `zero_optimization`, or at the top level of an Accelerate config) it is an error
    under DR313 or DR341.

    Fails: deepspeed --world 8
    ```json
    {"_comment": "ZeRO-3 for 8 GPUs", "train_batch_size": 32, "zero_optimization": {"stage": 3}}
    ```

    Passes: deepspeed --world 8
    ```json
    {"train_batch_size": 32, "zero_optimization": {"stage": 3}}
    ```

    Fix: nothing to fix; suppress with `"//distrecipe-ignore": ["DR314"]` to silence it.
    """
    if src.kind == "deepspeed":
        for path, _, verdict in _deepspeed_unknown(src.data):
            if verdict == "comment":
                yield Problem(path, f"{path[-1]!r} reads as a comment; DeepSpeed ignores it", key=True)
    else:
        for path, _, verdict in _accelerate_nested_unknown(src.data):
            if verdict == "comment":
                yield Problem(path, f"{path[-1]!r} reads as a comment; Accelerate ignores it", key=True)


def accelerate_unknown_top_level_key(src: Source) -> Iterator[Problem]:
    """A top-level key Accelerate does not know (or a missing `distributed_type`): refused.

    Accelerate checks its config's top level ("The config file at ... had unknown
    keys"), typically a key that belongs inside `fsdp_config` or a typo; a `_comment`
    is refused too. The legacy `fp16` and `dynamo_backend` keys are still converted;
    `distributed_type` is required.

    Fails: accelerate
    ```yaml
    distributed_type: FSDP
    num_processes: 8
    fsdp_version: 2
    ```

    Passes: accelerate
    ```yaml
    distributed_type: FSDP
    num_processes: 8
    fsdp_config:
      fsdp_version: 2
    ```

    Fix: move it into `fsdp_config`.
    """
    if "distributed_type" not in src.data and not src.within:  # a recipe's section: compile writes it
        yield Problem((), "distributed_type is required; accelerate launch refuses the file")
    top = section("accelerate", ())
    assert top is not None
    legacy = table("accelerate")["sections"][""]["legacy_keys"]
    for key in src.data:
        if key in top.keys or key in legacy:
            continue
        if is_comment_key(key):
            hint = " (comment or not)"
        else:
            inner = [name for name, (prefix, keys) in _accelerate_sections().items()
                     if key in keys or f"{prefix}{key}" in keys]
            hint = f"; it belongs inside {inner[0]}" if inner else did_you_mean(str(key), sorted(top.keys))
        note = _release_note("accelerate", (key,))
        yield Problem((key,), f"{key!r} is not a top-level key of {label('accelerate')}{note}: "
                              f"accelerate launch refuses the file{hint}", key=True)


def _accelerate_sections() -> dict[str, tuple[str, dict[str, Any]]]:
    """Each nested section of an Accelerate config: the prefix the launcher adds, its keys."""
    return {name: (found["prefix"], found["keys"])
            for name, found in table("accelerate")["sections"].items() if name}


def _accelerate_nested_unknown(data: dict[str, Any]) -> Iterator[tuple[KeyPath, str, Verdict]]:
    """Keys of the nested sections (`fsdp_config`, `deepspeed_config`, ...) that no launch
    option receives: the launcher copies each onto its arguments, where nothing reads it."""
    options = set(table("accelerate")["launch_options"])
    for name, (prefix, keys) in _accelerate_sections().items():
        block = data.get(name)
        for key in block if isinstance(block, dict) else ():
            full = key if not prefix or str(key).startswith(prefix) else f"{prefix}{key}"
            if full in keys or (not prefix and full in options):
                continue
            yield (name, key), full, "comment" if is_comment_key(key) else "ignored"


def accelerate_ignored_key(src: Source) -> Iterator[Problem]:
    """A key inside a nested section of an Accelerate config that no launch option takes.

    `accelerate launch` copies every key of `fsdp_config`, `deepspeed_config`,
    `megatron_lm_config`, `fp8_config`, `dynamo_config`, `parallelism_config` and
    `mpirun_config` onto its arguments, adding `fsdp_`/`fp8_`/`dynamo_` when missing;
    a key no option has is set and never read, so it vanishes. A near-certain
    misspelling of an option is DR349, an error.

    Fails: accelerate
    ```yaml
    distributed_type: FSDP
    num_processes: 8
    fsdp_config:
      fsdp_version: 2
      fsdp_my_flag: true
    ```

    Passes: accelerate
    ```yaml
    distributed_type: FSDP
    num_processes: 8
    fsdp_config:
      fsdp_version: 2
    ```

    Fix: delete the key (the message names the nearest option, when one is near).
    """
    for path, hint, close in _accelerate_ignored(src):
        if not close:
            yield Problem(path, f"{path[1]!r} is not a key of {label('accelerate')}'s {path[0]}: silently "
                                f"ignored{hint}", key=True)


def accelerate_misspelt_key(src: Source) -> Iterator[Problem]:
    """A misspelt key in a nested section of an Accelerate config: the setting never applies.

    `accelerate launch` sets every key of `fsdp_config`, `parallelism_config`, ... as a
    launch option; one that is a near-certain misspelling of an option is set and never
    read, so the job runs without it: `fsdp_offload_param: true` offloads nothing, and
    parallelism keys must be spelt in full, so `dp_shard_size: 4` leaves the job
    unsharded. An option only another Accelerate release has is the same: the release
    the project runs never reads it (the message names the one that does).

    Fails: accelerate
    ```yaml
    distributed_type: FSDP
    num_processes: 8
    fsdp_config:
      fsdp_version: 2
      fsdp_offload_param: true
    ```

    Passes: accelerate
    ```yaml
    distributed_type: FSDP
    num_processes: 8
    fsdp_config:
      fsdp_version: 2
      fsdp_offload_params: true
    ```

    Fix: `fsdp_offload_params`, `parallelism_config_dp_shard_size` (as the message says).
    """
    for path, hint, close in _accelerate_ignored(src):
        if close:
            yield Problem(path, f"{path[1]!r} is not a key of {label('accelerate')}'s {path[0]}"
                                f"{_nested_note(path)}: silently ignored, so the setting never applies{hint}",
                      key=True)


def _nested_note(path: KeyPath) -> str:
    """`_release_note` for a key of a nested Accelerate section, as the launcher names it."""
    prefix = table("accelerate")["sections"][str(path[0])]["prefix"]
    key = str(path[1])
    named = key if not prefix or key.startswith(prefix) else f"{prefix}{key}"
    return _release_note("accelerate", path, named)


def _accelerate_ignored(src: Source) -> Iterator[tuple[KeyPath, str, bool]]:
    """Each ignored nested key, its did-you-mean, and whether it is a near-certain misspelling."""
    sections = _accelerate_sections()
    for path, full, verdict in _accelerate_nested_unknown(src.data):
        if verdict != "ignored":
            continue
        name, key = str(path[0]), path[1]
        keys = sorted(sections[name][1])
        spelled = f"{name.removesuffix('_config')}_config_{key}"
        if spelled in keys:
            yield path, f"; did you mean {spelled!r}?", True
            continue
        if _nested_note(path):  # Accelerate's own key, of another release: the setting never applies
            yield path, "", True
            continue
        close = did_you_mean(full, keys, CLOSE)
        yield path, close or did_you_mean(full, keys), bool(close)


def verl_unknown_key(src: Source) -> Iterator[Problem]:
    """An override naming a key that verl's composed config does not have: Hydra refuses it.

    verl builds its config with Hydra, which refuses to set a key the composed config
    lacks ("Could not override 'critic.model.fsdp_config.param_offload'. To append to
    your config use +critic.model...") before anything starts. Keys move between verl
    versions (`critic.model.fsdp_config` moved in 0.9), so a script written for another
    version fails. The key tree is the installed verl's `ppo_trainer` config, or
    `ppo_megatron_trainer` with `model_engine=megatron` or that config name. A YAML
    fragment is not judged: it does not say which keys it adds (`+`).

    Fails: verl
    ```text
    actor_rollout_ref.actor.fsdp_config.grad_offload=True
    trainer.n_gpus_per_node=8
    ```

    Passes: verl
    ```text
    actor_rollout_ref.actor.fsdp_config.param_offload=True
    trainer.n_gpus_per_node=8
    ```

    Fix: the key's new place (the message suggests the nearest), or `+key=value` to add one.
    """
    if (src.path.suffix in (".yaml", ".yml", ".json") and not src.within) or _other_entry(src):
        return
    config = verl_config(src.data, src.doc.lines)
    tree = verl_tree(config)
    reported: set[KeyPath] = set()
    for path, where in sorted(src.doc.key_positions.items(), key=lambda item: (item[1].line, item[1].col)):
        line = src.doc.lines[where.line - 1] if 0 < where.line <= len(src.doc.lines) else ""
        if line[: where.col - 1].endswith("+"):
            continue  # `+key=value` adds a key: Hydra allows it
        node: Any = tree
        for depth, part in enumerate(path):
            if isinstance(node, dict) and part in node:
                node = node[part]
                continue
            unknown = tuple(path[: depth + 1])
            if unknown not in reported:
                reported.add(unknown)
                choices = sorted(map(str, node)) if isinstance(node, dict) else []
                parent = ".".join(map(str, unknown[:-1]))
                what = (f"a key of {parent}" if isinstance(node, dict)
                        else f"settable: {parent} is not a mapping")
                note = _verl_note(config, unknown)
                yield Problem(unknown, f"{'.'.join(map(str, unknown))} is not {what} in {label('verl')}'s "
                                       f"config{note}: Hydra refuses the override (prefix + to add a key)"
                                       f"{did_you_mean(str(part), choices)}", key=True)
            break


def _verl_note(config: VerlConfig, path: KeyPath) -> str:
    """`_release_note` for an override's key in verl's composed `config`."""

    def has(found: dict[str, Any]) -> bool:
        return _exists(found["configs"].get(config, {}), path)

    said = history("verl", has)
    return f" ({said})" if said else ""


def _other_entry(src: Source) -> bool:
    """A script whose verl commands all run a trainer other than the PPO entry (a module
    verl removed, DR356), whose config tree is not the PPO tree the rules know."""
    if not is_script(src.path) or src.within:
        return False
    commands = verl_commands("\n".join(src.doc.lines), src.doc.file)
    return bool(commands) and all(removed_entry(command.entry) for command in commands)


def _exists(tree: Any, path: KeyPath) -> bool:
    node = tree
    for part in path:
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


def verl_prefix_refused(src: Source) -> Iterator[Problem]:
    """`+key=value` on a key verl's config already has, or `~key` on one it lacks: Hydra refuses.

    Hydra's `+` appends a key, and refuses one that is there ("Could not append to
    config. An item is already at 'trainer.val_before_train'"); `++` sets a key whether
    or not it exists; `~` deletes one, and refuses a key that is not there ("Could not
    delete from config"). Scripts written for older verl releases prefix keys that verl
    has since added to its config, and stop before anything starts. The key tree is the
    installed verl's composed config (see DR352).

    Fails: verl
    ```text
    data.train_batch_size=64
    +trainer.val_before_train=False
    trainer.n_gpus_per_node=8
    ```

    Passes: verl
    ```text
    data.train_batch_size=64
    trainer.val_before_train=False
    trainer.n_gpus_per_node=8
    ```

    Fix: drop the `+` (or write `++`, which sets the key either way).
    """
    if (src.path.suffix in (".yaml", ".yml", ".json") and not src.within) or _other_entry(src):
        return
    tree = verl_tree(verl_config(src.data, src.doc.lines))
    for path, where in sorted(src.doc.key_positions.items(), key=lambda item: (item[1].line, item[1].col)):
        line = src.doc.lines[where.line - 1] if 0 < where.line <= len(src.doc.lines) else ""
        before = line[: where.col - 1]
        if before.endswith("+") and not before.endswith("++") and _exists(tree, path):
            name = ".".join(map(str, path))
            yield Problem(path, f"+{name} adds a key, but {label('verl')}'s config has {name} already: "
                                f"Hydra refuses it (\"Could not append to config\"); write {name}=... or "
                                f"++{name}=...", key=True)
    if src.within:
        return
    for item in overrides("\n".join(src.doc.lines), src.doc.file):
        if item.prefix == "~" and not _exists(tree, item.path):
            yield Problem(item.path, f"~{item.key} deletes a key {label('verl')}'s config does not have: "
                                     "Hydra refuses it (\"Could not delete from config\")", where=item.key_at)
