"""Hydra's override grammar, both ways: reading `key=value` overrides (the arguments of a
launch script's verl command, as bash splits them, or the lines of an override file) into
a nested mapping with positions, and writing a value so that Hydra reads it back the
same. A launch script's `key=$VAR` values are expanded from the script's own assignments
by `script_overrides`, as the shell would; a shell variable is never an override.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from distrecipe.engines.shell import RawWord, is_script, raw_commands
from distrecipe.engines.shell_variables import Value, raw_word_value, unfixed, variables_at
from distrecipe.errors import Position
from distrecipe.overrides import split_override
from distrecipe.source import Document, KeyPath

_SHELL_WORD = (r"""(?:"(?:[^"\\]|\\.)*"|'[^']*'"""  # a quoted part
               r"|\$\(\((?:[^()]|\([^()]*\))*\)\)|\$\((?:[^()]|\([^()]*\))*\)"  # $((...)), $(...)
               r"|\$\[(?:[^\[\]]|\[[^\[\]]*\])*\]"  # $[...], bash's older $((...))
               r"|\\.|\S)+")
"""One shell word as written: quoted parts, `$(...)`, `$((...))` and `$[...]` keep their spaces
(`$((a + b))` is one word), so a value is the whole word the shell passes."""
_WORD = re.compile(rf"(?:^|(?<=\s)){_SHELL_WORD}")

@dataclass(frozen=True, slots=True)
class Override:
    """One Hydra override as verl receives it: `[+|++|~]key=value`, and where it is written."""

    prefix: str
    """`""`, `+` (add a key), `++` (add or override) or `~` (delete)."""
    key: str
    value: str | None
    """The value's text as Hydra gets it where the file alone says (a script's quotes
    removed, `$VAR` left as written); None for `~key` without a value."""
    written: str
    """The value as written in the file (`$BS`, `"${X}"`), for messages."""
    key_at: Position
    value_at: Position
    word: RawWord | None = None
    """The shell word it is, in a launch script (to expand its variables)."""

    @property
    def path(self) -> tuple[str, ...]:
        return tuple(self.key.split("."))


def read_overrides(text: str, file: str) -> Document:
    """Hydra `key=value` overrides as a mapping, with positions: in a launch script (`.sh`),
    the arguments of the commands that run verl (`verl_command`), as bash splits them; in
    an override file, one per line (keys under verl's top-level groups).

    `~key` deletes rather than sets, so it adds nothing; the last override of a key wins.
    """
    data: dict[str, Any] = {}
    positions: dict[KeyPath, Position] = {(): Position(file, 1, 1)}
    key_positions: dict[KeyPath, Position] = {}
    for item in overrides(text, file):
        if item.prefix == "~":
            continue
        path = item.path
        node = data
        for depth, part in enumerate(path[:-1]):
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                break
            positions.setdefault(path[: depth + 1], item.key_at)
            node = child
        else:
            node[path[-1]] = parse_value(item.value or "")
            key_positions[path] = item.key_at
            positions[path] = item.value_at
    return Document(data, file, positions, key_positions, tuple(text.splitlines()))


def overrides(text: str, file: str) -> list[Override]:
    """Every override of a launch script's verl commands (`.sh`) or of an override file."""
    if is_script(file):
        return [item for command in verl_commands(text, file) for item in command.overrides]
    return _file_overrides(text, file)


def _file_overrides(text: str, file: str) -> list[Override]:
    """The overrides of an override file: each word (`_SHELL_WORD`) that `split_override`
    reads as one, under one of verl's top-level groups, comments skipped (a trailing
    `\\` copied from a script is not part of the value)."""
    # Imported here: engines.verl imports the job, whose recipe reads this module's grammar.
    from distrecipe.engines.verl import VERL_ROOTS

    found = []
    for number, line in enumerate(text.splitlines(), start=1):
        code = line.split(" #", 1)[0]
        if code.lstrip().startswith("#"):
            continue
        for match in _WORD.finditer(code):
            item = split_override(match.group().rstrip("\\"))
            if item is None or item.key.split(".", 1)[0] not in VERL_ROOTS:
                continue
            col = match.start() + len(item.prefix) + 1
            key_at, value_at = Position(file, number, col), Position(file, number, col + len(item.key) + 1)
            found.append(Override(item.prefix, item.key, item.value, item.value or "", key_at, value_at))
    return found


@dataclass(frozen=True, slots=True)
class VerlCommand:
    """A command of a launch script that runs verl, and what its arguments say."""

    entry: str
    """The module (`verl.trainer.main_ppo`) or script (`main_ppo_split.py`) it runs."""
    config_name: str | None
    """`--config-name`, when given."""
    overrides: tuple[Override, ...]
    start: Position
    unreached: tuple[Override, ...] = ()
    """Overrides on the lines after a comment that ended the command (`shell.RawCommand.cut`):
    bash runs them as a command of their own, so verl never gets them."""
    cut: Position | None = None
    forwarded: bool = False
    """An argument that is a shell expansion and no override (`"$@"`, `$EXTRA_ARGS`): the
    command passes verl more overrides than the script writes, known only when it runs."""


_HYDRA_OPTIONS = ("--config-name", "--config-path", "--config-dir", "-cn", "-cp", "-cd")
"""Hydra's own options that take a value (`--config-name=X` or `--config-name X`)."""


def verl_commands(text: str, file: str) -> list[VerlCommand]:
    """The commands of a script that run verl's trainer, as bash splits them: `python3 -m
    verl.trainer.main_ppo ...` (also behind `ray job submit --`, `torchrun`, an env
    prefix), or a copy of that entry (`main_ppo_split.py`) composing one of verl's configs;
    a project's own Hydra app (`train.py --config-name _2_sokoban`) has its own config
    tree. A module of `verl.` the installed verl lacks is another program (a fork's own
    CLI), unless verl once had it (`engines.verl.removed_entry`), which DR356 reports.
    Variables are not expanded here (`script_overrides` does); a shell assignment is
    never an override."""
    from distrecipe.engines.verl import ENTRY, VERL_CONFIG_NAMES, removed_entry  # as in _file_overrides

    raw = raw_commands(text, file)
    found = []
    for index, command in enumerate(raw):
        words = command.words
        entry_at = _entry(words)
        if entry_at is None:
            continue
        entry = words[entry_at].literal
        items, config_name = _arguments(words[entry_at + 1:], file)
        if entry.endswith(".py"):
            if "main_ppo" not in entry.rsplit("/", 1)[-1]:
                continue  # another project's own Hydra app (RAGEN's train.py), with its own config tree
            if config_name is not None and config_name not in VERL_CONFIG_NAMES:
                continue
        elif entry != ENTRY and removed_entry(entry) is None:
            continue  # another verl module (sft_trainer: another config tree) or a fork's own
        unreached: list[Override] = []
        if command.cut is not None:
            for later in raw[index + 1:]:
                if later.after_cut != command.cut:
                    break
                more, _ = _arguments(later.words, file)
                unreached.extend(more)
        forwarded = any("$" in word.literal and not word.literal.startswith("-")
                        and split_override(word.literal) is None for word in words[entry_at + 1:])
        found.append(VerlCommand(entry, config_name, tuple(items), words[0].where, tuple(unreached),
                                 command.cut, forwarded))
    return found


def _entry(words: list[RawWord]) -> int | None:
    """The index of the word naming what a command runs under Python, when it is verl's
    module (after `-m`) or a `.py` script; None for any other command."""
    for index, word in enumerate(words):
        text = word.literal
        if text.startswith("verl.") and index > 0 and words[index - 1].literal == "-m":
            return index
        if text.endswith(".py") and index > 0 and "python" in words[index - 1].literal.rsplit("/", 1)[-1]:
            return index
    return None


def _arguments(words: list[RawWord], file: str) -> tuple[list[Override], str | None]:
    """The overrides among a verl command's arguments, and its `--config-name`."""
    items: list[Override] = []
    config_name = None
    index = 0
    while index < len(words):
        word = words[index]
        literal = word.literal.replace("\0", "$")
        index += 1
        if literal.startswith("-"):
            name, equals, value = literal.partition("=")
            if name in _HYDRA_OPTIONS and not equals and index < len(words):
                value = words[index].literal
                index += 1
            if name in ("--config-name", "-cn"):
                config_name = value.strip("'\"").removesuffix(".yaml")
            continue
        item = split_override(literal)
        if item is None or item.key.startswith("hydra."):
            continue
        offset = max(word.text.find(item.key), 0)
        key_at = Position(file, word.where.line, word.where.col + offset)
        sign = word.text.find("=", offset + len(item.key))
        written = word.text if word.text[:1] in "'\"" else word.text[sign + 1:] if sign >= 0 else ""
        value_at = Position(file, word.where.line, word.where.col + max(sign + 1, 0))
        items.append(Override(item.prefix, item.key, item.value, written, key_at, value_at, word))
    return items, config_name


def parse_value(raw: str) -> Any:
    """A value in Hydra's override grammar: scalars, `[a,b]` lists, `{k:v}` mappings."""
    raw = raw.strip()
    if len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "\"'":
        # Hydra's QUOTED_VALUE: backslashes before a quote (or the closing one) are halved.
        return re.sub(rf"(\\*)({raw[0]}|\Z)", lambda m: m.group(1)[: len(m.group(1)) // 2] + m.group(2),
                      raw[1:-1])
    if raw.startswith("[") and raw.endswith("]"):
        return [parse_value(part) for part in _split(raw[1:-1])]
    if raw.startswith("{") and raw.endswith("}"):
        pairs = (part.partition(":") for part in _split(raw[1:-1]))
        return {key.strip(): parse_value(value) for key, _, value in pairs}
    lowered = raw.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if lowered in ("null", "none", ""):
        return None
    for number in (int, float):
        try:
            return number(raw)
        except ValueError:
            pass
    return raw


def _split(body: str) -> list[str]:
    """Split on commas outside brackets and quotes; an empty body is an empty list."""
    parts, depth, current, quote, escaped = [], 0, "", "", False
    for char in body:
        if quote:
            quote = "" if char == quote and not escaped else quote
            escaped = char == "\\" and not escaped
        elif char in "\"'":
            quote = char
        else:
            depth += char in "[{"
            depth -= char in "]}"
        if char == "," and depth == 0 and not quote:
            parts.append(current)
            current = ""
        else:
            current += char
    if current.strip():
        parts.append(current)
    return parts


def verl_pairs(lines: tuple[str, ...] | list[str]) -> Iterator[tuple[str, str, Any]]:
    """(Hydra's prefix, dotted key, value) of each native verl override, as
    `split_override` reads it: the prefix `~` deletes the key (its value, None when only
    `~key` is written, is the one it must hold to be deleted)."""
    for line in lines:
        item = split_override(line)
        if item is not None:  # the schema admits no other line
            yield item.prefix, item.key, None if item.value is None else parse_value(item.value)


def format_value(value: Any) -> str:
    """A value in Hydra's override grammar, read back by Hydra as the same value: a
    string that Hydra would read as something else (`8`, `true`, `a b`, `x,y`, `[a]`) is
    single-quoted, as Hydra's own `QuotedString.with_quotes` writes it. `${...}` stays an
    interpolation (OmegaConf resolves it in quotes too); a caller carrying it as text
    escapes it first (`literal_text`). A value with a space cannot go through
    `$(cat verl_overrides.txt)`, which splits on spaces, only through an argument list."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return "inf" if value == float("inf") else repr(value)
    if isinstance(value, list):
        return "[" + ",".join(format_value(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{key}:{format_value(item)}" for key, item in value.items()) + "}"
    if isinstance(value, str) and not (_PLAIN.fullmatch(value) and parse_value(value) == value):
        return _quoted(value)
    return str(value)


_PLAIN = re.compile(r"[A-Za-z0-9_/\-+.$%*@?|]+")
"""Characters Hydra's lexer reads as part of an unquoted string (ID, digits, `UNQUOTED_CHAR`)."""


def _quoted(text: str) -> str:
    """`text` in single quotes: a quote, and the backslashes just before one (or before
    the closing quote), escaped so Hydra's QUOTED_VALUE reads `text` back."""
    return "'" + re.sub(r"(\\*)('|\Z)", lambda m: m.group(1) * 2 + ("\\'" if m.group(2) else ""), text) + "'"


def literal_text(text: str) -> str:
    """`text` as a string OmegaConf leaves as it is: each `${` escaped (`\\${`, with the
    backslashes before it doubled), so a shell's `${HOME}` is not read as an interpolation."""
    return re.sub(r"(\\*)\$\{", lambda m: m.group(1) * 2 + "\\${", text)


@dataclass(frozen=True, slots=True)
class ScriptOverrides:
    """A launch script's overrides with its own shell variables expanded (`shell_variables`)."""

    data: dict[str, Any]
    """The overrides as verl receives them where every variable is known."""
    taken: dict[KeyPath, tuple[str, Value]]
    """Key → the value as written (`$BS`) and what the shell makes of it."""
    unknown: dict[KeyPath, tuple[str, Value]]
    """Key → the value as written and why the script does not fix it. `data` holds it as
    verl would read it at run time where that is only the environment's (`$HOME` →
    `${oc.env:HOME}`, listed in `environment`), and otherwise as written, as text
    (`literal_text`: a shell's `${X}` is not an OmegaConf interpolation)."""
    environment: frozenset[KeyPath]
    """The keys of `unknown` whose value verl takes from the environment, as the script does."""


def script_overrides(doc: Document) -> ScriptOverrides:
    """`doc` (read by `read_overrides` from a `.sh` launch script) with each `$VAR` value
    the script itself fixes replaced by its value, parsed as Hydra parses it."""
    data = copy.deepcopy(doc.data)
    taken: dict[KeyPath, tuple[str, Value]] = {}
    unknown: dict[KeyPath, tuple[str, Value]] = {}
    environment: set[KeyPath] = set()
    for item, value, table in shell_values("\n".join(doc.lines), doc.file):
        path = item.path
        if value.text is None:
            unknown[path] = (item.written, value)
        node = data
        for part in path[:-1]:
            node = node.get(part) if isinstance(node, dict) else None
        if not isinstance(node, dict) or path[-1] not in node:
            continue
        if value.text is not None:
            node[path[-1]] = parse_value(value.text)
            taken[path] = (item.written, value)
            continue
        names = unfixed(item.word.text if item.word else item.written, table)
        if names and all(names.values()) and item.word is not None:
            stand_ins = {name: Value(f"${{oc.env:{name}}}", ()) for name in names}
            at_run_time = _value_of(item, {**table, **stand_ins})
            if at_run_time.text is not None:
                node[path[-1]] = parse_value(at_run_time.text)
                environment.add(path)
                continue
        node[path[-1]] = _as_text(node[path[-1]])
    return ScriptOverrides(data, taken, unknown, frozenset(environment))


def shell_values(text: str, file: str) -> list[tuple[Override, Value, dict[str, Value]]]:
    """A launch script's verl overrides that hold a `$` (the last of each key, which wins),
    each with its value as the shell passes it (`shell_variables`) and the variables there."""
    last = {item.path: item for item in overrides(text, file) if item.prefix != "~"}
    written = [item for item in last.values() if item.word is not None and "$" in item.word.text]
    tables = variables_at(text, file, (item.key_at.line for item in written))
    return [(item, _value_of(item, tables[item.key_at.line]), tables[item.key_at.line]) for item in written]


def _value_of(item: Override, table: dict[str, Value]) -> Value:
    """The override's value as the shell passes it given the variables `table`."""
    assert item.word is not None
    whole = raw_word_value(item.word, table, item.key_at.line)
    if whole.text is None:
        return whole
    return Value(whole.text.partition("=")[2], whole.how)


def _as_text(value: Any) -> Any:
    """A value read from a shell word, with every string made `literal_text`."""
    if isinstance(value, str):
        return literal_text(value)
    if isinstance(value, list):
        return [_as_text(item) for item in value]
    if isinstance(value, dict):
        return {key: _as_text(item) for key, item in value.items()}
    return value
