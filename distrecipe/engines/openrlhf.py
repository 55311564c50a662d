"""OpenRLHF as facts: its entry modules' command lines and the batch rules they meet.

OpenRLHF is configured by command line only: `python -m openrlhf.cli.train_ppo_ray ...`
(usually inside `ray job submit ... -- ...`), `deepspeed --module openrlhf.cli.train_sft
...`. Each entry module builds an `argparse` parser under `__main__`; its options per
release are in `tables/openrlhf/RELEASE.json` (`scripts/engine_tables.py` runs that block
alone). Release 0.10.2 renamed every option into groups (`--micro_train_batch_size` became
`--train.micro_batch_size`), so a script is judged by the release it runs.

The batch is DeepSpeed's: OpenRLHF's strategy writes `train_batch_size` = B × ring × TP
and `train_micro_batch_size_per_gpu` = m into the ds_config and derives the accumulation
as B × ring × TP // m // world, so DeepSpeed's `_batch_assertion` refuses a B × ring × TP
that m × world does not divide (`256 != 2 * 18 * 7`), after Ray, vLLM and the models
have started (`openrlhf/utils/deepspeed/deepspeed.py`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from distrecipe.engines.shell import Word, commands_with_origin
from distrecipe.engines.tables import release, releases, table, table_of
from distrecipe.errors import Position
from distrecipe.source import Document, KeyPath

ENTRY = re.compile(r"openrlhf\.cli\.(train_\w+)")
"""An OpenRLHF training entry module, as `python -m` or `deepspeed --module` names it."""
PREFIX = "openrlhf.cli."
PPO_ENTRY = "openrlhf.cli.train_ppo_ray"
"""OpenRLHF's Ray PPO trainer (PPO, GRPO, REINFORCE++ by `--algo.advantage.estimator`)."""
ACTOR_CHECKPOINTS = "_actor"
"""The folder under `--ckpt.path` where `train_ppo_ray` saves the actor's DeepSpeed checkpoints
(`ppo_actor.save_checkpoint`, tags `global_step{N}`) and, with `--ckpt.load_enable`, loads the
tag its `latest` names (`strategy.load_ckpt(model, ckpt.path/_actor)`: no tag, no other path);
the critic's are in `_critic` beside it."""
CRITIC_CHECKPOINTS = "_critic"
"""The critic's folder beside `ACTOR_CHECKPOINTS` (`ppo_critic.save_checkpoint`), loaded the same
way under `--ckpt.load_enable` when the run trains a critic."""

NAMES: dict[str, tuple[str, ...]] = {
    "train_batch": ("train.batch_size", "train_batch_size"),
    "micro_train_batch": ("train.micro_batch_size", "micro_train_batch_size"),
    "rollout_batch": ("rollout.batch_size", "rollout_batch_size"),
    "micro_rollout_batch": ("rollout.micro_batch_size", "micro_rollout_batch_size"),
    "n_samples": ("rollout.n_samples_per_prompt", "n_samples_per_prompt"),
    "actor_nodes": ("actor.num_nodes", "actor_num_nodes"),
    "actor_gpus": ("actor.num_gpus_per_node", "actor_num_gpus_per_node"),
    "critic_nodes": ("critic.num_nodes", "critic_num_nodes"),
    "critic_gpus": ("critic.num_gpus_per_node", "critic_num_gpus_per_node"),
    "ring": ("ds.ring_attn_size", "ring_attn_size"),
    "tp": ("ds.tensor_parallel_size", "ds_tensor_parallel_size"),
    "estimator": ("algo.advantage.estimator", "advantage_estimator"),
    "critic_model": ("critic.model_name_or_path", "critic_pretrain"),
    "dynamic_batch": ("train.dynamic_batch_enable", "use_dynamic_batch"),
    "packing": ("ds.packing_samples",),
    "vllm_engines": ("vllm.num_engines",),
    "partial_rollout": ("train.partial_rollout_enable",),
    "async": ("train.async_enable",),
    "dynamic_filtering": ("algo.dynamic_filtering_enable",),
    "remote_reward": ("reward.remote_url",),
    "agent": ("train.agent_func_path",),
    "generate_batch": ("rollout.vllm_generate_batch_size",),
}
"""Each quantity → its option's dest in the grouped (≥ 0.10.2) and flat releases; the
switches `train_ppo_ray`'s `__main__` checks are judged in the grouped releases only."""
GROUP_ESTIMATORS = frozenset({"rloo", "reinforce_baseline", "group_norm", "dr_grpo"})
"""Advantage estimators with a per-prompt-group baseline, which `train_ppo_ray` refuses
with one sample per prompt (every advantage would be 0)."""


@dataclass(frozen=True, slots=True)
class Entry:
    """One entry module's parser, as the judging release builds it."""

    module: str
    options: dict[str, dict[str, Any]]
    """Option string (`--train.batch_size`) → dest, whether it takes a value, type,
    choices, nargs, default."""
    allow_abbrev: bool

    def resolve(self, written: str) -> str | None:
        """The option argparse takes `written` (`--name`) for: itself, else (with
        `allow_abbrev`) the one option it is a unique prefix of; None when it refuses it."""
        if written in self.options:
            return written
        if not self.allow_abbrev or not written.startswith("--"):
            return None
        found = {option for option in self.options if option.startswith(written)}
        dests = {self.options[option]["dest"] for option in found}
        return sorted(found)[0] if len(dests) == 1 else None

    def dest(self, quantity: str) -> str | None:
        """The dest the judging release gives a batch quantity (`NAMES`)."""
        dests = {entry["dest"] for entry in self.options.values()}
        return next((name for name in NAMES[quantity] if name in dests), None)

    def default(self, dest: str) -> Any:
        return next((entry.get("default") for entry in self.options.values() if entry["dest"] == dest), None)


def entry(module: str) -> Entry | None:
    """`module`'s parser in the judging release, None when that release has no such entry."""
    found = table("openrlhf")["entries"].get(module)
    if found is None:
        return None
    return Entry(module, found["options"], found["allow_abbrev"])


def entries() -> frozenset[str]:
    return frozenset(table("openrlhf")["entries"])


@cache
def _all_options(version: str) -> dict[str, dict[str, dict[str, Any]]]:
    return {module: found["options"] for module, found in table_of("openrlhf", version)["entries"].items()}


def option_history(module: str, option: str) -> tuple[str, str | None] | None:
    """Where another release's `module` has `option`: (`a key of OpenRLHF ≥ X; the project
    runs Y (where)` or `removed in …`, the judging release's option with the same words in
    its dest, `--micro_train_batch_size` → `--train.micro_batch_size`); None when no release here has it."""
    from distrecipe.engines.tables import history

    said = history("openrlhf", lambda found: option in found["entries"].get(module, {}).get("options", {}),
                   noun="option")
    if said is None:
        return None
    old = next((_all_options(v)[module][option] for v in releases("openrlhf")
                if option in _all_options(v).get(module, {})), None)
    now = entry(module)
    if old is None or now is None:
        return said, None
    words = sorted(re.split(r"[._]", old["dest"]))
    same = sorted(name for name, found in now.options.items()
                  if sorted(re.split(r"[._]", found["dest"])) == words and name.startswith("--"))
    return said, (same[0] if same else None)


@dataclass(frozen=True, slots=True)
class Argument:
    """One word-group of an OpenRLHF command line: the flag as written and its value."""

    flag: Word
    value: Word | None


HEREDOC = re.compile(r"<<-?\s*(['\"]?)(\w+)\1[^\n]*\n(?=\s*openrlhf\.cli\.train_)(.*?)^\s*\2\s*$",
                     re.S | re.M)
"""A heredoc whose body is an OpenRLHF command: OpenRLHF's DeepSpeed examples write
`read -r -d '' training_commands <<EOF` / `openrlhf.cli.train_sft ...` / `EOF` and run
`deepspeed --module $training_commands`."""
QUOTED = re.compile(r'(?:python[\d.]*|deepspeed)\s+(?:-m|--module)\s+openrlhf\.cli\.train_\w+(?:[^"\\]|\\.)*',
                    re.S)
"""An OpenRLHF command inside a double-quoted argument (`srun ... bash -c "... python3 -m
openrlhf.cli.train_ppo_ray ..."`, OpenRLHF's SLURM example), up to the closing quote."""


def command(text: str, file: str) -> tuple[str, list[Word]] | None:
    """The first OpenRLHF entry a script runs (behind `python -m`, `deepspeed --module`,
    `ray job submit ... --`, `srun`, ...; inside a heredoc variable or a `bash -c "..."`
    string) and the words after it, or None."""
    for words, _raw in commands_with_origin(text, file):
        for index, word in enumerate(words[1:], start=1):
            value = word.value or ""
            if ENTRY.fullmatch(value) and (words[index - 1].value or "") in ("-m", "--module"):
                return value, words[index + 1:]
    for pattern, group in ((HEREDOC, 3), (QUOTED, 0)):
        found = pattern.search(text)
        if found is None:
            continue
        body = found[group]
        start = found.start(group)
        before = text[:start]
        line_start = before.rfind("\n") + 1
        padded = "\n" * before.count("\n") + " " * (start - line_start)  # the same lines and columns
        shell = padded + _unescaped(body, pattern is QUOTED)
        words = [word for words, _raw in commands_with_origin(shell, file) for word in words]
        head = 0 if pattern is HEREDOC else 2
        if len(words) > head and ENTRY.fullmatch(words[head].value or ""):
            return str(words[head].value), words[head + 1:]
    return None


def expansions(text: str, file: str) -> list[Word]:
    """The words of a script's OpenRLHF command that are not options and no option's value:
    what the shell expands into options (`${ARGS[@]}`, `$EXTRA`), which `read_command` cannot
    read, so the options it shows are not all the command has."""
    found = command(text, file)
    if found is None:
        return []
    module, words = found
    known = entry(module)
    out: list[Word] = []
    takes = False
    for word in words:
        written = word.value
        if written is not None and written.startswith("-"):
            resolved = known.resolve(written.partition("=")[0]) if known is not None else None
            takes = "=" not in written and (known is None or resolved is None
                                            or known.options[resolved]["value"] is not False)
            continue
        if written is None and not takes:
            out.append(word)
        takes = False
    return out


def _unescaped(body: str, quoted: bool) -> str:
    """A double-quoted string's text as the shell hands it on (`\\"` is `"`), keeping its
    length where it can; a heredoc body as written."""
    return body.replace('\\"', ' "') if quoted else body


def read_command(text: str, file: str) -> Document | None:
    """A script's OpenRLHF command line as a document: `{module: {option: value}}`, each
    option as written (`--train.batch_size`), its value the word's text (None where the
    script leaves it to a variable; True for an option given alone), with positions."""
    found = command(text, file)
    if found is None:
        return None
    module, words = found
    known = entry(module)
    lines = tuple(text.splitlines())
    data: dict[str, Any] = {}
    positions: dict[KeyPath, Position] = {(): words[0].where if words else Position(file, 1, 1)}
    key_positions: dict[KeyPath, Position] = {}
    index = 0
    while index < len(words):
        word = words[index]
        index += 1
        written = word.value
        if written is None or not written.startswith("-") or written in ("-", "--"):
            continue
        name, equals, inline = written.partition("=")
        resolved = known.resolve(name) if known is not None else None
        takes = known.options[resolved]["value"] if known is not None and resolved is not None else None
        value: Any
        at = word
        if equals:
            value = inline
        elif takes is False:
            value = True
        elif index < len(words) and not (words[index].value or "").startswith("--"):
            at = words[index]
            value = at.value
            index += 1
            nargs = known.options[resolved].get("nargs") if known is not None and resolved else None
            if nargs in ("+", "*") or isinstance(nargs, int):
                values = [value]  # a fixed count (`--actor.adam.betas B1 B2`) takes that many
                while index < len(words) and _takes(nargs, len(values), words[index].value or "-"):
                    values.append(words[index].value)
                    index += 1
                value = values if len(values) > 1 else value
        else:
            value = True
        data[name] = value
        key_positions[(module, name)] = word.where
        positions[(module, name)] = at.where
    positions[(module,)] = positions[()]
    key_positions[(module,)] = positions[()]
    return Document({module: data}, file, positions, key_positions, lines)


@dataclass(frozen=True, slots=True)
class Given:
    """One option of an argv as an entry module's parser reads it."""

    written: str
    """The option as written, without an `=value` (or a word that is no option's value)."""
    option: str | None
    """The parser's option it is (an abbreviation resolved); None when the parser refuses it
    (argparse's "unrecognized arguments": OpenRLHF's entries take no positional word)."""
    value: str | None
    """Its value (several words of an `nargs` option joined by spaces); None for a switch."""


def read_argv(parser: Entry, argv: Sequence[str]) -> list[Given]:
    """The options of `argv` in order, as `parser` (argparse) reads them: `--name value` or
    `--name=value`, a unique prefix for the name, a switch alone, `nargs` options taking the
    words up to the next option. A word that is neither an option nor an option's value is
    read as a refused one (option None): the entries' parsers take no positional word."""
    found: list[Given] = []
    index = 0
    while index < len(argv):
        word = argv[index]
        index += 1
        if not word.startswith("--") or word == "--":
            found.append(Given(word, None, None))
            continue
        written, equals, inline = word.partition("=")
        option = parser.resolve(written)
        spec = parser.options[option] if option is not None else {}
        value: str | None = None
        if equals:
            value = inline
        elif spec.get("value") and index < len(argv) and not _is_option(argv[index]):
            values = [argv[index]]
            index += 1
            while spec.get("nargs") in ("+", "*") and index < len(argv) and not argv[index].startswith("-"):
                values.append(argv[index])
                index += 1
            count = spec.get("nargs")  # a fixed count (`--actor.adam.betas B1 B2`) takes that many
            while isinstance(count, int) and len(values) < count and index < len(argv) \
                    and not _is_option(argv[index]):
                values.append(argv[index])
                index += 1
            value = " ".join(values)
        found.append(Given(written, option, value))
    return found


def _takes(nargs: object, taken: int, word: str) -> bool:
    """Whether an `nargs` option with `taken` words takes `word` too: a fixed count takes up to
    it (argparse reads `-1` as a value), `+`/`*` every word up to one that starts with `-`."""
    if isinstance(nargs, int):
        return taken < nargs and not _is_option(word)
    return not word.startswith("-")


def _is_option(word: str) -> bool:
    """argparse's reading of a word after an option: `-x` is another option, `-1` a value."""
    return word.startswith("-") and not re.fullmatch(r"-\d+(\.\d*)?([eE][-+]?\d+)?", word)


def same_value(spec: dict[str, Any], given: str | None, ours: str) -> bool:
    """Whether `given` is the value `ours` once the option's type converts both (`1e-6` is
    `1.0e-06`), word by word for an option of several (`read_argv` joins them with spaces)."""
    if given is None:
        return False
    convert = {"int": int, "float": float}.get(str(spec.get("type")), str)
    theirs, mine = (given.split(" "), ours.split(" ")) if spec.get("nargs") else ([given], [ours])
    try:
        same = [convert(a) == convert(b) for a, b in zip(theirs, mine, strict=False)]
        return len(theirs) == len(mine) and all(same)
    except ValueError:
        return False


def is_command(data: object) -> bool:
    """Whether a document is an OpenRLHF command line (`read_command`'s shape)."""
    return (isinstance(data, dict) and len(data) == 1 and isinstance(next(iter(data)), str)
            and next(iter(data)).startswith(PREFIX) and isinstance(next(iter(data.values())), dict))


@dataclass(frozen=True, slots=True)
class DsBatch:
    """The numbers OpenRLHF's strategy hands DeepSpeed for one model group."""

    who: str
    """`actor` or `critic`."""
    batch: int
    micro: int
    world: int
    world_said: str
    ring: int = 1
    tp: int = 1


def ds_violation(b: DsBatch) -> str | None:
    """DeepSpeed's `_batch_assertion` on the ds_config OpenRLHF writes: train_batch_size =
    B × ring × TP, micro m, accumulation B × ring × TP // m // world; None when it passes."""
    ds_batch = b.batch * b.ring * b.tp
    accumulation = ds_batch // b.micro // b.world if b.micro and b.world else 0
    if accumulation <= 0:
        return (f"the {b.who}'s accumulation is train batch {ds_batch} // micro {b.micro} // world "
                f"{b.world} ({b.world_said}) = 0; DeepSpeed refuses it (gradient_accumulation_steps must be "
                f"positive): nearest valid train batch {b.micro * b.world // (b.ring * b.tp) or 1}")
    if ds_batch == b.micro * accumulation * b.world:
        return None
    step = b.micro * b.world
    lower, upper = ds_batch // step * step, (ds_batch // step + 1) * step
    near = " or ".join(str(n // (b.ring * b.tp)) for n in (lower, upper) if n and n % (b.ring * b.tp) == 0)
    factors = f"{b.batch}{f' × ring {b.ring}' if b.ring > 1 else ''}{f' × TP {b.tp}' if b.tp > 1 else ''}"
    return (f"DeepSpeed refuses the {b.who}'s batch: train_batch_size is not equal to micro_batch_per_gpu * "
            f"gradient_acc_step * world_size {ds_batch} != {b.micro} * {accumulation} * {b.world} "
            f"(train batch {factors}, micro {b.micro}, world {b.world} from {b.world_said}); nearest valid "
            f"train batch {near}")


def judging() -> str:
    """`OpenRLHF 0.11.2`, for messages."""
    return f"OpenRLHF {release('openrlhf').table}"


# The colocated job (`--train.colocate_all`), as OpenRLHF 0.11.2's train_ppo_ray builds it.

VLLM_WIDTH = 2
"""Bytes per weight of vLLM's copy: `create_vllm_engines` passes `dtype: "bfloat16"` whatever
`--ds.param_dtype` says (openrlhf/trainer/ray/vllm_engine.py)."""
CRITIC_ESTIMATORS = frozenset({"gae"})
"""Estimators that keep a critic: `__main__` drops `critic.model_name_or_path` for every other
one and otherwise initialises it from the first reward model (the actor's checkpoint where
the reward is remote or an agent's)."""


@dataclass(frozen=True, slots=True)
class Colocated:
    """What `train_ppo_ray --train.colocate_all` puts on every GPU, read from its options
    (the judging release's defaults for those not given).

    The source (OpenRLHF 0.11.2): vLLM starts first, one engine per `--vllm.tensor_parallel_size`
    GPUs, `gpu_memory_utilization` its fraction, `max_model_len` = `--data.max_len`; with
    `--vllm.enable_sleep` it sleeps at level 1 (weights to CPU, KV cache dropped) at once and
    after each generation, and wakes its weights only for the broadcast after training
    (ppo_trainer.broadcast_to_vllm, samples_generator). The actor and the critic are DeepSpeed
    training engines at `--ds.zero_stage`; they move their states to CPU between phases only
    with `--ds.enable_sleep`. The reference model is the actor's checkpoint (`ref_model`
    inits from `actor.model_name_or_path`), built when `--algo.kl.init_coef` > 0; it and the
    reward model are DeepSpeed inference engines in `--ds.param_dtype`, sharded ZeRO-3 when
    the training stage is 3 and whole otherwise (`get_ds_eval_config`: stage 3 or 0). All of
    them stay on the GPU through both phases. Not read: `--ref.offload`, `--reward.offload`,
    `--ds.enable_sleep`, `--ds.adam_offload` (the command distrecipe emits sets none of them).
    """

    memory: float
    memory_stated: bool
    sleep: bool
    sleep_stated: bool
    tensor: int
    max_len: int
    max_len_stated: bool
    zero_stage: int
    reference: bool
    """A reference model is built (`--algo.kl.init_coef` > 0)."""
    reward: str | None
    """The reward model's checkpoint as the command names it; None when the reward is remote."""
    critic: str | None
    """The critic's checkpoint as the command names it (its own, else the reward model's, else
    the actor's); None when the estimator keeps no critic."""
    estimator: str
    estimator_stated: bool


def colocated(argv: Sequence[str]) -> Colocated:
    """The colocated job `train_ppo_ray` runs for `argv` (options as its parser reads them)."""
    parser = entry(PPO_ENTRY)
    assert parser is not None, f"{judging()} has {PPO_ENTRY}"
    given = {item.option: item for item in read_argv(parser, argv) if item.option is not None}

    def value(option: str) -> tuple[Any, bool]:
        spec = parser.options[option]
        item = given.get(option)
        if item is None:
            return spec.get("default"), False
        if not spec["value"]:
            return True, True
        convert = {"int": int, "float": float}.get(str(spec.get("type")), str)
        return convert(item.value), True

    memory, memory_stated = value("--vllm.gpu_memory_utilization")
    sleep, sleep_stated = value("--vllm.enable_sleep")
    max_len, max_len_stated = value("--data.max_len")
    estimator, estimator_stated = value("--algo.advantage.estimator")
    remote = value("--reward.remote_url")[0] or value("--train.agent_func_path")[0]
    reward = None if remote else value("--reward.model_name_or_path")[0]
    critic = None
    if estimator in CRITIC_ESTIMATORS:
        critic = value("--critic.model_name_or_path")[0] or (
            value("--actor.model_name_or_path")[0] if remote else str(reward).split(",")[0])
    return Colocated(float(memory), memory_stated, bool(sleep), sleep_stated,
                     int(value("--vllm.tensor_parallel_size")[0]), int(max_len), max_len_stated,
                     int(value("--ds.zero_stage")[0]), value("--algo.kl.init_coef")[0] > 0,
                     reward, critic, str(estimator), estimator_stated)
