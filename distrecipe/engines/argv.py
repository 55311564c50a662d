"""Launch commands as facts: `deepspeed`, `accelerate launch`, `torchrun` and what they say.

A launch command has two halves: the launcher's own options (the world: GPUs per
node and nodes, or processes; an Accelerate config file) and the program's argv
(for Trainer scripts, TrainingArguments flags such as `--per_device_train_batch_size`
and `--deepspeed ds_config.json`). `launches` finds them in a shell script
(`engines/shell` splits it), and `read_flags` reads a `--key value` argv as
HfArgumentParser does (a script's, and the one a user gives `launch`). The launchers'
bare flags (those taking no value) were read from their installed argparse parsers;
`tests/test_lint_auto.py` reads them again.
Pure: nothing here opens a file or imports an engine.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from distrecipe.engines.shell import Word, commands_with_origin
from distrecipe.engines.tables import training_flags
from distrecipe.errors import Position
from distrecipe.keys import integer
from distrecipe.source import Document, KeyPath

Launcher = Literal["deepspeed", "accelerate", "torchrun", "python"]

BARE_FLAGS: dict[Launcher, frozenset[str]] = {
    "deepspeed": frozenset({
        "--bind_cores_to_rank", "--force_multi", "--help", "--module", "--no_local_rank", "--no_python",
        "--no_ssh", "--no_ssh_check", "--quiet", "--save_pid", "-h", "-q",
    }),
    "accelerate": frozenset({
        "--cpu", "--debug", "--downcast-bf16", "--downcast_bf16", "--dynamo-use-dynamic",
        "--dynamo-use-fullgraph", "--dynamo-use-regional-compilation", "--dynamo_use_dynamic",
        "--dynamo_use_fullgraph", "--dynamo_use_regional_compilation", "--enable-cpu-affinity",
        "--enable_cpu_affinity", "--fp8-use-autocast-during-eval", "--fp8_use_autocast_during_eval", "--help",
        "--module", "--multi-gpu", "--multi_gpu", "--no-python", "--no-tpu-cluster", "--no_python",
        "--no_tpu_cluster", "--quiet", "--same-network", "--same_network", "--tpu", "--tpu-cluster",
        "--tpu-use-sudo", "--tpu_cluster", "--tpu_use_sudo", "--use-deepspeed", "--use-fsdp",
        "--use-megatron-lm", "--use-parallelism-config", "--use_deepspeed", "--use_fsdp", "--use_megatron_lm",
        "--use_parallelism_config", "-h", "-m", "-q",
    }),
    "torchrun": frozenset({
        "--help", "--module", "--no-python", "--no_python", "--run-path", "--run_path", "--standalone",
        "--virtual-local-rank", "--virtual_local_rank", "-h", "-m",
    }),
    "python": frozenset({"-b", "-B", "-d", "-E", "-i", "-I", "-O", "-OO", "-P", "-q", "-s", "-S", "-u", "-v",
                         "-x"}),
}
"""Each launcher's options that take no value (argparse store_true/store_false), so the
first word after the options is known to be the program."""

TORCHRUN_MODULES = ("torch.distributed.run", "torch.distributed.launch")
"""`python -m` modules that are torchrun."""
LAUNCHER_WORDS = ("deepspeed", "accelerate", "torchrun", "python", *TORCHRUN_MODULES)
"""Text a script must hold to have a launch command (a cheap test before tokenizing)."""

WRAPPERS = ("srun", "env", "exec", "nohup")
"""Commands that run the command written after their own options and assignments: a SLURM
job step on each of its nodes (`srun torchrun ...`), a changed environment, the same process."""

TRUE_WORDS = ("yes", "true", "t", "y", "1")
FALSE_WORDS = ("no", "false", "f", "n", "0")
"""HfArgumentParser's `string_to_bool` spellings (case-insensitive)."""


@dataclass(frozen=True)
class Launch:
    """One launch command: which launcher, its options, and the program's argv."""

    launcher: Launcher
    options: dict[str, Word | None]
    """The launcher's options by name without dashes-vs-underscores differences
    (`num_gpus`), each with its value word (None for a bare flag)."""
    program: tuple[Word, ...]
    """The program (script or module) and its arguments."""
    start: Word
    unreached: tuple[Word, ...] = ()
    """Words meant as the program's arguments that bash never passes to it: the command
    after a comment that ended this one inside a backslash continuation."""
    cut: Position | None = None
    """That comment."""
    flags: dict[str, tuple[Word, Word | None]] = field(init=False)
    """The program's `--key value` arguments (`parse_flags`): the flag word and its value's."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "flags", parse_flags(self.program[1:]))

    def configs(self) -> tuple[Word, ...]:
        """The program's plain arguments that name a config file (`train.py args.json`,
        `llamafactory-cli train x.yaml`): HfArgumentParser reads a lone `.json` argument as
        the TrainingArguments (`parse_json_file`), and YAML-driven trainers take theirs so."""
        taken = {id(value) for _, value in self.flags.values() if value is not None}
        return tuple(word for word in self.program[1:] if id(word) not in taken and word.value is not None
                     and not word.value.startswith("-")
                     and word.value.lower().endswith((".json", ".yaml", ".yml")))

    def option(self, *names: str) -> Word | None:
        """The value word of the first of `names` the launcher was given."""
        for name in names:
            if (word := self.options.get(name)) is not None:
                return word
        return None

    def world(self) -> tuple[int | None, str]:
        """Ranks this launch starts, and how that was read; None when the command does
        not say (a `$VAR` from outside, a hostfile, every visible GPU)."""
        if self.launcher == "python":
            return None, ""  # one process, unless the program starts more itself
        if self.launcher == "accelerate":
            processes = _number(self.option("num_processes"))
            return processes, f"--num_processes {processes}"
        gpus_name, nodes_name = ("num_gpus", "num_nodes") if self.launcher == "deepspeed" else (
            "nproc_per_node", "nnodes")
        gpus, nodes = _number(self.option(gpus_name)), self.option(nodes_name)
        if self.launcher == "deepspeed" and gpus is None:
            gpus = _included_gpus(self.option("include"))
            gpus_name = "include"
        if gpus is None:
            return None, ""
        if nodes is None:
            if self.launcher == "deepspeed" and "hostfile" in self.options:
                return None, ""
            return gpus, f"--{gpus_name} {gpus} (one node)"
        count = _number(nodes)
        return (gpus * count, f"--{nodes_name} {count} × --{gpus_name} {gpus}") if count else (None, "")


def launches(text: str, file: str) -> list[Launch]:
    """Every `deepspeed`, `accelerate launch`, `torchrun`, `python -m torch.distributed.run`
    or `python script.py` command of a shell script, in order (also behind `WRAPPERS`)."""
    out: list[Launch] = []
    found = commands_with_origin(text, file)
    for index, (words, raw) in enumerate(found):
        launch = _launch(words)
        if launch is None:
            continue
        if raw.cut is not None:
            lost = [word for later, origin in found[index + 1:] if origin.after_cut == raw.cut
                    for word in later]
            launch = replace(launch, unreached=tuple(lost), cut=raw.cut)
        out.append(launch)
    return out


def launch_of(words: list[Word]) -> Launch | None:
    """The launch command `words` are (a job file's command list), or None."""
    return _launch(words) if words else None


def _launch(words: list[Word]) -> Launch | None:
    name = _command_name(words[0])
    if name in WRAPPERS:  # `srun torchrun ...`, `env NCCL_DEBUG=INFO deepspeed ...`
        return next((_launch(words[index:]) for index in range(1, len(words))
                     if _launcher_name(_command_name(words[index]))), None)
    values = [w.value or "" for w in words]
    if name == "deepspeed":
        return _split("deepspeed", words, 1)
    if name == "accelerate" and values[1:2] == ["launch"]:
        return _split("accelerate", words, 2)
    if name == "torchrun":
        return _split("torchrun", words, 1)
    if name.startswith("python") and values[1:2] == ["-m"] and values[2:3] and values[2] in TORCHRUN_MODULES:
        return _split("torchrun", words, 3)
    if re.fullmatch(r"python[\d.]*", name):
        if values[1:2] == ["-m"] and len(words) > 2 and not values[2].startswith("verl."):
            return Launch("python", {}, tuple(words[2:]), words[0])
        launch = _split("python", words, 1)
        if launch is not None and (launch.program[0].value or "").endswith(".py"):
            return launch
    return None


def _launcher_name(name: str) -> bool:
    return name in ("deepspeed", "accelerate", "torchrun") or re.fullmatch(r"python[\d.]*", name) is not None


def _command_name(word: Word) -> str:
    """The name of the program a command word runs, without its directory; where a variable
    leaves the word unknown (`$CONDA_PREFIX/bin/torchrun`), the plain name it ends in."""
    if word.value is not None:
        return word.value.rsplit("/", 1)[-1]
    last = word.text.rsplit("/", 1)[-1].strip("'\"")
    return last if "/" in word.text and re.fullmatch(r"[\w.-]+", last) else ""


def _split(launcher: Launcher, words: list[Word], first: int) -> Launch | None:
    """The launcher's options up to the program (the first word that is not one)."""
    options: dict[str, Word | None] = {}
    index = first
    while index < len(words):
        text = words[index].value
        if text is None or not text.startswith("-"):
            break
        name, equals, inline = text.partition("=")
        key = name.lstrip("-").replace("-", "_")
        if equals:
            options[key] = Word(words[index].text, inline, words[index].where)
        elif name in BARE_FLAGS[launcher]:
            options[key] = None
        else:
            options[key] = words[index + 1] if index + 1 < len(words) else None
            index += 1
        index += 1
    if index >= len(words):
        return None
    return Launch(launcher, options, tuple(words[index:]), words[0])


@dataclass(frozen=True, slots=True)
class Flag:
    """One `--name` argument of a program's argv, as argparse reads it."""

    name: str
    """As written, without its dashes (`per_device_train_batch_size`; HfArgumentParser takes
    `per-device-train-batch-size` for the same field)."""
    at: int
    """The index of its word."""
    value_at: int | None
    """The index of the word holding its value: `at` itself for `--name=value`, the next
    word for `--name value`; None for a flag given alone (a bool field's True)."""
    value: str | None
    """The value's text (after `=` for `--name=value`); None where `value_at` is, or
    where the word's text is unknown (a script's `$BS`)."""


def read_flags(values: Sequence[str | None]) -> list[Flag]:
    """The `--name value`, `--name=value` and bare `--name` arguments of a program's argv
    (each word's text, None where a script leaves it unknown), in order, as argparse reads
    HfArgumentParser's options: the next word is the value unless it is itself a `--`
    option, so a flag followed by one stands alone (a bool field's True; any other field
    refuses it). Positional words are left out; where a name repeats, the last one wins.
    The one reader of such an argv: a script's launch (`parse_flags`) and the arguments a
    user gives `launch` after `--` (`launch.handoff`)."""
    flags: list[Flag] = []
    index = 0
    while index < len(values):
        at, text = index, values[index]
        index += 1
        if text is None or not text.startswith("--") or len(text) == 2:
            continue
        name, equals, inline = text[2:].partition("=")
        if equals:
            flags.append(Flag(name, at, at, inline))
        elif index < len(values) and not (values[index] or "").startswith("--"):
            flags.append(Flag(name, at, index, values[index]))
            index += 1
        else:
            flags.append(Flag(name, at, None, None))
    return flags


def parse_flags(argv: tuple[Word, ...] | list[Word]) -> dict[str, tuple[Word, Word | None]]:
    """A script's program argv read by `read_flags`: each flag's word and its value's (None
    for a bare flag; `--name=value`'s value a word of its own), the last of a name winning."""
    flags: dict[str, tuple[Word, Word | None]] = {}
    for flag in read_flags([word.value for word in argv]):
        word = argv[flag.at]
        if flag.value_at is None:
            flags[flag.name] = (word, None)
        elif flag.value_at == flag.at:
            flags[flag.name] = (word, Word(word.text, flag.value, word.where))
        else:
            flags[flag.name] = (word, argv[flag.value_at])
    return flags


def training_arguments(launch: Launch, file: str, lines: tuple[str, ...]) -> Document:
    """The TrainingArguments a launch command passes (every field of the installed
    transformers, `tables.training_flags`), converted as HfArgumentParser converts them,
    with positions in the script. A value the script does not fix (`--per_device_train_batch_size
    $BS`), or one HfArgumentParser refuses (`refused_flags`), is None: unknown, never a default."""
    data: dict[str, Any] = {}
    positions: dict[KeyPath, Position] = {(): launch.start.where}
    key_positions: dict[KeyPath, Position] = {}
    for name, (flag, value) in launch.flags.items():
        field_name = name.replace("-", "_")
        entry = training_flags().get(field_name)
        if entry is None:
            continue
        data[field_name] = _convert(entry, value)
        key_positions[(field_name,)] = flag.where
        positions[(field_name,)] = (value or flag).where
    return Document(data, file, positions, key_positions, lines)


def trainer_launch(launch: Launch) -> bool:
    """Whether a launch command evidently runs an HF Trainer program: it passes the Trainer's
    own batch flag `--per_device_train_batch_size` (or `--deepspeed` a file), and no bare
    `--deepspeed`, which is DeepSpeed's own switch (`deepspeed.add_config_arguments`, as
    DeepSpeed-Chat's programs parse it). A trl or DeepSpeed-Chat program takes
    `--learning_rate` too, but with its own dataclasses."""
    flags = launch.flags
    if "deepspeed" in flags:
        value = flags["deepspeed"][1]
        return value is not None and not (value.value or "").startswith("-")
    return "per_device_train_batch_size" in flags


def refused_flags(launch: Launch) -> list[tuple[Word, Word | None, str, str]]:
    """The TrainingArguments flags of `launch` whose value HfArgumentParser refuses: the
    flag's word, its value's, its field and what the field accepts (a value only running
    the script gives is not judged)."""
    out = []
    for name, (flag, value) in launch.flags.items():
        field_name = name.replace("-", "_")
        entry = training_flags().get(field_name)
        if entry is None or (value is not None and value.value is None):
            continue
        accepts = _refusal(entry, None if value is None else value.value)
        if accepts is not None:
            out.append((flag, value, field_name, accepts))
    return out


def _refusal(entry: dict[str, Any], text: str | None) -> str | None:
    """What the field accepts, when argparse refuses `text` for it (None: a bare flag)."""
    kind = entry["type"]
    if text is None:
        return None if kind == "bool" or entry.get("nargs") in ("?", "*") else "a value"
    choices = entry.get("choices")
    if choices is not None and text not in map(str, choices):
        return "one of " + ", ".join(map(str, choices))
    if kind == "bool" and text.lower() not in (*TRUE_WORDS, *FALSE_WORDS):
        return "true or false (yes, no, 1, 0)"
    converter = {"int": int, "float": float}.get(kind)
    if converter is not None:
        try:
            converter(text)
        except ValueError:
            return "an integer" if kind == "int" else "a number"
    return None


def _convert(entry: dict[str, Any], value: Word | None) -> Any:
    kind = entry["type"]
    if value is None:
        return True if kind == "bool" else None
    text = value.value
    if text is None or _refusal(entry, text) is not None:
        return None
    if kind == "bool":
        return text.lower() in TRUE_WORDS
    converter = {"int": int, "float": float}.get(kind)
    return converter(text) if converter is not None else text


def _number(word: Word | None) -> int | None:
    """A positive integer written as the word, else None (`$NGPU`, `auto`, `1:4`)."""
    if word is None or word.value is None or not word.value.isdigit():
        return None
    try:
        return integer(int(word.value)) or None
    except ValueError:  # digits int() refuses: `²`, or more than Python reads (`sys.get_int_max_str_digits`)
        return None


def _included_gpus(word: Word | None) -> int | None:
    """GPUs of a one-host `--include host:0,1,2` (or `localhost:0,1`); None otherwise."""
    if word is None or word.value is None or "@" in word.value:
        return None
    host, colon, slots = word.value.partition(":")
    if not colon or not host or not all(s.isdigit() for s in slots.split(",")):
        return None
    return len(slots.split(","))
