"""verl as the judge, without GPUs: its config composition, `validate_config`, and
the batch splitting its GPU workers do, all run in one process on CPU.

Importing verl costs ~8 s and a Hydra compose ~0.5 s, so one `VerlJudge` serves a
whole test module. Composition has a full path (Hydra's `compose`, exactly what
`python3 -m verl.trainer.main_ppo OVERRIDES` does) and a fast path (compose the
engine's defaults once, then apply the overrides with Hydra's own override parser
and applier, the last step of `compose`); the judge runs the full path on a share
of the calls and requires the two to agree, so the fast path stays honest.

The worker-side rules are checked by running verl's own functions on a fake rollout
of `data.train_batch_size × rollout.n` rows: the dispatch split over DP ranks
(`chunk_tensordict`), the mini-batch iterator (`make_iterator`) and the micro-batch
split (`prepare_micro_batches`). Only the one-line `mini_batch_size % dp` assertion
of `TrainingWorker.train_mini_batch` is restated here, because that method needs a
live engine.
"""

from __future__ import annotations

import copy
import zlib
from dataclasses import dataclass
from typing import Any

import torch
from hydra import compose, initialize_config_module
from hydra._internal.config_loader_impl import ConfigLoaderImpl
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import DictConfig, OmegaConf
from tensordict import TensorDict
from verl.trainer.ppo.utils import need_critic, need_reference_policy
from verl.utils import tensordict_utils as tu
from verl.utils.config import omega_conf_to_dataclass, validate_config
from verl.utils.torch_dtypes import PrecisionType
from verl.workers.engine.utils import prepare_micro_batches

BASE_OVERRIDES = ["algorithm.adv_estimator=grpo"]
"""GRPO needs no critic model, so validation needs no model files."""


@dataclass(frozen=True)
class WorkerSplit:
    """What verl's workers make of one RL step's rollout."""

    optimizer_steps: int
    micro_batches_per_step: int
    """0 with `use_dynamic_bsz`: micro-batches are cut by token count at run time."""
    micro_batch_size: int
    data_parallel: int


class _SharedHydra:
    """verl's config module as the process's one Hydra context, shared by every judge.

    Hydra keeps one global context per process (`GlobalHydra`): a second
    `initialize_config_module` raises "GlobalHydra is already initialized". Judges live
    for different spans (a test session, one `lint --engines` run, the corpus verdicts)
    and overlap, so the first one in opens the context and the last one out restores
    what was there before.
    """

    def __init__(self) -> None:
        self._context: initialize_config_module | None = None
        self._holders = 0

    def enter(self) -> None:
        if self._holders == 0:
            self._context = initialize_config_module("verl.trainer.config", version_base=None)
        self._holders += 1

    def leave(self) -> None:
        self._holders -= 1
        if self._holders == 0 and self._context is not None:
            self._context.__exit__(None, None, None)
            self._context = None


_HYDRA = _SharedHydra()


class VerlJudge:
    def __init__(self, full_every: int = 20) -> None:
        _HYDRA.enter()
        try:
            self._base = {
                "dp": compose("ppo_trainer", overrides=BASE_OVERRIDES),
                "megatron": compose("ppo_trainer", overrides=[*BASE_OVERRIDES, "model_engine=megatron"]),
            }
        except BaseException:
            _HYDRA.leave()
            raise
        self._open = True
        self._parser = OverridesParser.create()
        self._full_every = full_every
        self.calls = 0

    def close(self) -> None:
        """Leave the shared Hydra context (once, however often it is called)."""
        if self._open:
            self._open = False
            _HYDRA.leave()

    @staticmethod
    def compose_named(name: str, lines: list[str]) -> DictConfig:
        """Hydra's full compose of verl's config `name` with override `lines`: what
        `python3 -m verl.trainer.main_ppo --config-name=NAME LINES` builds (no base overrides)."""
        return compose(name, overrides=lines)

    def compose(self, lines: list[str]) -> DictConfig:
        """The config verl's entry point would build from `lines` (see module docstring)."""
        self.calls += 1
        group = [line for line in lines if line.startswith("model_engine=")]
        rest = [line for line in lines if not line.startswith("model_engine=")]
        engine = group[0].split("=", 1)[1] if group else "dp"
        cfg = copy.deepcopy(self._base[engine])
        ConfigLoaderImpl._apply_overrides_to_config(self._parser.parse_overrides(rest), cfg)
        # Which calls take the full path depends on the input only, so a failure replays.
        if self.calls == 1 or zlib.crc32("\n".join(lines).encode()) % self._full_every == 0:
            full = compose("ppo_trainer", overrides=[*BASE_OVERRIDES, *lines])
            assert OmegaConf.to_container(full) == OmegaConf.to_container(cfg)
            if engine == "megatron":
                # verl's own Megatron entry config must read the overrides the same way.
                alias = compose("ppo_megatron_trainer", overrides=[*BASE_OVERRIDES, *rest])
                assert OmegaConf.to_container(alias.actor_rollout_ref) == OmegaConf.to_container(
                    cfg.actor_rollout_ref
                )
        return cfg

    @staticmethod
    def validate(cfg: DictConfig) -> None:
        """verl's own pre-flight check (raises AssertionError or ValueError)."""
        validate_config(cfg, need_reference_policy(cfg), need_critic(cfg))

    @staticmethod
    def dtype(name: str) -> str:
        """The torch dtype verl's engines build from a precision name."""
        return str(PrecisionType.to_dtype(name))  # type: ignore[no-untyped-call]

    @staticmethod
    def actor(cfg: DictConfig) -> Any:
        """The actor's typed config (FSDPActorConfig / McoreActorConfig) as the workers get it."""
        return omega_conf_to_dataclass(cfg.actor_rollout_ref.actor)

    @classmethod
    def refuses(cls, cfg: DictConfig) -> bool:
        """True when verl's pre-flight check or its workers' batch split would stop the job."""
        try:
            cls.validate(cfg)
            cls.split(cfg)
        except (AssertionError, ValueError):
            return True
        return False

    @classmethod
    def split(cls, cfg: DictConfig, actor: Any = None) -> WorkerSplit:
        """Run verl's worker-side splitting of one RL step; raises where the workers would."""
        actor = actor if actor is not None else cls.actor(cfg)
        n = cfg.actor_rollout_ref.rollout.n
        world = cfg.trainer.nnodes * cfg.trainer.n_gpus_per_node
        if actor.strategy == "megatron":
            meg = actor.megatron
            model_parallel = (
                meg.tensor_model_parallel_size * meg.pipeline_model_parallel_size * meg.context_parallel_size
            )
            assert world % model_parallel == 0, "Megatron's parallel state needs whole DP groups"
            dp = world // model_parallel
        else:
            sp = actor.fsdp_config.ulysses_sequence_parallel_size
            fsdp_size = actor.fsdp_config.fsdp_size
            assert world % sp == 0, "the (dp, sp) device mesh needs whole groups"
            # create_device_mesh: (world // fsdp_size, fsdp_size) must cover the world.
            assert fsdp_size < 0 or fsdp_size >= world or world % fsdp_size == 0
            dp = world // sp
        rows = cfg.data.train_batch_size * n
        rollout = TensorDict({"index": torch.arange(rows)}, batch_size=[rows])
        shard = tu.chunk_tensordict(rollout, dp)[0]
        mini_batch_size = actor.ppo_mini_batch_size * n
        # TrainingWorker.train_mini_batch (engine_workers.py), restated: needs an engine.
        assert mini_batch_size % dp == 0, f"{mini_batch_size=} not divisible by {dp=}"
        steps, micro_counts = 0, set()
        for mini in tu.make_iterator(shard, mini_batch_size // dp, epochs=actor.ppo_epochs):
            steps += 1
            if actor.use_dynamic_bsz:
                continue  # token-based micro-batches: split per batch at run time, by length
            tu.assign_non_tensor(
                mini, use_dynamic_bsz=False, micro_batch_size_per_gpu=actor.ppo_micro_batch_size_per_gpu
            )
            micro_batches, _ = prepare_micro_batches(mini)
            micro_counts.add(len(micro_batches))
        if actor.use_dynamic_bsz:
            return WorkerSplit(steps, 0, 0, dp)
        assert len(micro_counts) == 1
        if actor.strategy == "megatron" and (actor.megatron.virtual_pipeline_model_parallel_size or 1) > 1:
            # MegatronEngine.forward_backward_batch, restated: interleaving takes micro-batches
            # in groups of Megatron's microbatch_group_size_per_vp_stage, the pipeline size.
            group = actor.megatron.pipeline_model_parallel_size
            assert next(iter(micro_counts)) % group == 0, f"micro_batches must be divisible by {group}"
        return WorkerSplit(steps, micro_counts.pop(), actor.ppo_micro_batch_size_per_gpu, dp)


SCRIPT = "<launch script>.sh"
"""The file name the shell reader is given: the judge has only the script's text."""
OVERRIDE_FILE = "<overrides>.txt"
"""The name it reads an override file under: one `key=value` per line."""


def _is_override_file(text: str) -> bool:
    """Every line an override (its first word one, `~key` too), a comment or blank: the
    text is an override file, not a script."""
    from distrecipe.overrides import split_override

    lines = [line.split() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    return bool(lines) and all(split_override(words[0]) is not None for words in lines)


def script_overrides(text: str) -> tuple[str, list[str], list[tuple[int, str]], dict[str, str]]:
    """A verl launch script's config name, its Hydra overrides as the shell passes them,
    each override's (line, key), and what the script leaves unknown: `$NAME` (or a word
    as written) → the placeholder standing in for it.

    The overrides are found by lint's own reader (`hydra.verl_commands`: the arguments of
    the commands that run verl, as bash splits them) and each value is the word the shell
    passes (`shell_variables`: the script's straight-line assignments, `${X:-8}` defaults,
    quotes removed). Where only running the script gives a value (the environment,
    `$(...)`, arithmetic, a variable set in a loop), the judge is more permissive than a
    run: it puts a placeholder (`UNSET_X`) in its place and judges the rest, and
    `judge_script` calls the script not judgeable where verl reads a number there.
    """
    from distrecipe.engines.hydra import overrides as read_overrides
    from distrecipe.engines.hydra import verl_commands
    from distrecipe.engines.shell_variables import Value, raw_word_value, unfixed, variables_at

    file = OVERRIDE_FILE if _is_override_file(text) else SCRIPT
    items = read_overrides(text, file)
    tables = variables_at(text, file, (item.key_at.line for item in items))
    unknown: dict[str, str] = {}
    overrides, where = [], []
    for item in items:
        number = item.key_at.line
        if item.value is None:  # `~key`: delete
            overrides.append(f"~{item.key}")
            where.append((number, item.key))
            continue
        text_value: str | None = item.value
        if item.word is not None and "$" in item.word.text:
            value = raw_word_value(item.word, tables[number], number)
            if value.text is None:
                names = unfixed(item.word.text, tables[number])
                unknown.update((f"${name}", f"UNSET_{name}") for name in names)
                stand_ins = {name: Value(f"UNSET_{name}", ()) for name in names}
                value = raw_word_value(item.word, {**tables[number], **stand_ins}, number)
            if value.text is None:  # computed in the word itself: `$((a + b))`, `$(nproc)`
                unknown[item.written] = "UNSET_" + item.key.replace(".", "_")
                value = Value(f"{item.key}={unknown[item.written]}", ())
            text_value = (value.text or "").partition("=")[2]
        overrides.append(f"{item.prefix}{item.key}={text_value}")
        where.append((number, item.key))
    commands = verl_commands(text, file) if file == SCRIPT else []
    name = next((c.config_name for c in commands if c.config_name), None) or "ppo_trainer"
    return name, overrides, where, dict(sorted(unknown.items()))


def judge_script(verl: VerlJudge, text: str) -> Any:
    """verl's verdict on a launch script: Hydra's compose of its overrides on its config,
    `validate_config`, and the workers' batch split."""
    from distrecipe.judges import Note, Verdict, first_line, version

    engine = version("verl")
    if not _is_override_file(text):
        from distrecipe.engines.hydra import verl_commands
        from distrecipe.engines.verl import removed_entry

        commands = verl_commands(text, SCRIPT)
        if not commands:
            return Verdict("not-judgeable", engine, "not judgeable: the script runs no command of verl's PPO "
                           "entry (another program's, or a fork's own module)", (), "")
        gone = [c.entry for c in commands if removed_entry(c.entry)]
        if len(gone) == len(commands):
            message = f"No module named {gone[0]!r}"  # as Python says it, before anything is composed
            return Verdict("refuses", engine, message, (Note((), message),), f"runs {gone[0]}")
    name, lines, where, unresolved = script_overrides(text)
    context = f"config {name}"
    if unresolved:
        context += "; unresolved: " + ", ".join(unresolved)
    try:
        cfg = verl.compose_named(name, lines)
    except Exception as exc:  # Hydra's override errors have no common base below Exception
        message = first_line(exc)
        if unresolved and type(exc).__name__ in ("OverrideParseException", "LexerNoViableAltException"):
            return Verdict("not-judgeable", engine, f"not judgeable: an override with a shell variable "
                           f"does not parse once substituted: {message}", (), context)
        path = next((tuple(key.split(".")) for _, key in where if f"'{key}'" in str(exc)), ())
        return Verdict("refuses", engine, f"compose: {message}", (Note(path, message),), context)
    numeric = [written for written, placeholder in unresolved.items() if _feeds_non_string(cfg, placeholder)]
    if numeric:
        return Verdict("not-judgeable", engine, "not judgeable: " + ", ".join(numeric), (), context)
    try:
        verl.validate(cfg)
        verl.split(cfg)
    except Exception as exc:  # Hydra wraps a typed config's own assertion (InstantiationException)
        cause = (exc.__cause__ or exc.__context__) if type(exc).__name__ == "InstantiationException" else None
        message = first_line(cause if isinstance(cause, Exception) else exc)
        return Verdict("refuses", engine, message, (Note((), message),), context)
    return Verdict("accepts", engine, "", (), context)


def _feeds_non_string(cfg: DictConfig, placeholder: str) -> bool:
    """Whether an unresolved value's placeholder stands where verl reads a number or a flag."""
    container = OmegaConf.to_container(cfg, resolve=False)

    def walk(node: Any) -> bool:
        if isinstance(node, dict):
            return any(walk(value) for value in node.values())
        if isinstance(node, list):
            return any(walk(value) for value in node)
        return isinstance(node, str) and placeholder in node and node != placeholder and "/" not in node

    return walk(container) or _typed_slot(cfg, placeholder)


def _typed_slot(cfg: DictConfig, placeholder: str) -> bool:
    base = compose("ppo_trainer", overrides=BASE_OVERRIDES)
    flat_cfg = _flatten(OmegaConf.to_container(cfg, resolve=False))
    flat_base = _flatten(OmegaConf.to_container(base, resolve=False))
    return any(value == placeholder and isinstance(flat_base.get(key), (int, float, bool))
               for key, value in flat_cfg.items())


def _flatten(node: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(node, dict):
        out: dict[str, Any] = {}
        for key, value in node.items():
            out.update(_flatten(value, f"{prefix}{key}."))
        return out
    return {prefix.rstrip("."): node}
