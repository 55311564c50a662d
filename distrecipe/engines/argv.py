"""Launch commands as facts: `deepspeed`, `accelerate launch`, `torchrun` and what they say.

A launch command has two halves: the launcher's own options (the world: GPUs per
node and nodes, or processes; an Accelerate config file) and the program's argv
(for Trainer scripts, TrainingArguments flags such as `--per_device_train_batch_size`
and `--deepspeed ds_config.json`). `launches` finds them in a shell script
(`engines/shell` splits it), and `parse_flags` reads a `--key value` argv as
HfArgumentParser does. The launchers' bare flags (those taking no value) were read
from their installed argparse parsers; `tests/test_lint_auto.py` reads them again.
Pure: nothing here opens a file or imports an engine.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from distrecipe.engines.hf import FLAG_TYPES
from distrecipe.engines.shell import Word, commands
from distrecipe.errors import Position
from distrecipe.keys import integer
from distrecipe.source import Document, KeyPath

Launcher = Literal["deepspeed", "accelerate", "torchrun"]

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
}
"""Each launcher's options that take no value (argparse store_true/store_false), so the
first word after the options is known to be the program."""

TORCHRUN_MODULES = ("torch.distributed.run", "torch.distributed.launch")
"""`python -m` modules that are torchrun."""
LAUNCHER_WORDS = ("deepspeed", "accelerate", "torchrun", *TORCHRUN_MODULES)
"""Text a script must hold to have a launch command (a cheap test before tokenizing)."""

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
    flags: dict[str, tuple[Word, Word | None]] = field(init=False)
    """The program's `--key value` arguments (`parse_flags`): the flag word and its value's."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "flags", parse_flags(self.program[1:]))

    def option(self, *names: str) -> Word | None:
        """The value word of the first of `names` the launcher was given."""
        for name in names:
            if (word := self.options.get(name)) is not None:
                return word
        return None

    def world(self) -> tuple[int | None, str]:
        """Ranks this launch starts, and how that was read; None when the command does
        not say (a `$VAR` from outside, a hostfile, every visible GPU)."""
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
    """Every `deepspeed`, `accelerate launch`, `torchrun` or `python -m torch.distributed.run`
    command of a shell script, in order."""
    out = []
    for words in commands(text, file):
        found = _launch(words)
        if found is not None:
            out.append(found)
    return out


def launch_of(words: list[Word]) -> Launch | None:
    """The launch command `words` are (a job file's command list), or None."""
    return _launch(words) if words else None


def _launch(words: list[Word]) -> Launch | None:
    values = [w.value or "" for w in words]
    name = values[0].rsplit("/", 1)[-1]
    if name == "deepspeed":
        return _split("deepspeed", words, 1)
    if name == "accelerate" and values[1:2] == ["launch"]:
        return _split("accelerate", words, 2)
    if name == "torchrun":
        return _split("torchrun", words, 1)
    if name.startswith("python") and values[1:2] == ["-m"] and values[2:3] and values[2] in TORCHRUN_MODULES:
        return _split("torchrun", words, 3)
    return None


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


def parse_flags(argv: tuple[Word, ...] | list[Word]) -> dict[str, tuple[Word, Word | None]]:
    """A program's `--key value` / `--key=value` / bare `--flag` arguments, as
    HfArgumentParser reads TrainingArguments: each flag's word and its value's (None
    for a bare flag, which is a boolean `True`). Positional words are left out."""
    flags: dict[str, tuple[Word, Word | None]] = {}
    index = 0
    while index < len(argv):
        word = argv[index]
        text = word.value
        index += 1
        if text is None or not text.startswith("--") or len(text) == 2:
            continue
        name, equals, inline = text[2:].partition("=")
        if equals:
            flags[name] = (word, Word(word.text, inline, word.where))
        elif index < len(argv) and not (argv[index].value or "").startswith("--"):
            flags[name] = (word, argv[index])
            index += 1
        else:
            flags[name] = (word, None)
    return flags


def training_arguments(launch: Launch, file: str, lines: tuple[str, ...]) -> Document:
    """The TrainingArguments a launch command passes (`engines.hf.FLAG_TYPES`), converted
    as HfArgumentParser converts them, with positions in the script. A value the script
    does not fix (`--per_device_train_batch_size $BS`) is None: unknown, never a default."""
    data: dict[str, Any] = {}
    positions: dict[KeyPath, Position] = {(): launch.start.where}
    key_positions: dict[KeyPath, Position] = {}
    for name, (flag, value) in launch.flags.items():
        kind = FLAG_TYPES.get(name)
        if kind is None:
            continue
        data[name] = _convert(kind, value)
        key_positions[(name,)] = flag.where
        positions[(name,)] = (value or flag).where
    return Document(data, file, positions, key_positions, lines)


def _convert(kind: type, value: Word | None) -> Any:
    if value is None:
        return True if kind is bool else None
    text = value.value
    if text is None:
        return None
    if kind is bool:
        lowered = text.lower()
        return True if lowered in TRUE_WORDS else False if lowered in FALSE_WORDS else None
    try:
        return kind(text)
    except ValueError:
        return None


def _number(word: Word | None) -> int | None:
    """A positive integer written as the word, else None (`$NGPU`, `auto`, `1:4`)."""
    if word is None or word.value is None or not word.value.isdigit():
        return None
    return integer(int(word.value)) or None


def _included_gpus(word: Word | None) -> int | None:
    """GPUs of a one-host `--include host:0,1,2` (or `localhost:0,1`); None otherwise."""
    if word is None or word.value is None or "@" in word.value:
        return None
    host, colon, slots = word.value.partition(":")
    if not colon or not host or not all(s.isdigit() for s in slots.split(",")):
        return None
    return len(slots.split(","))
