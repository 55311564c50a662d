"""A launch script's own variables, as the shell would hold them where a command uses them.

verl's examples write their batch as `data.train_batch_size=$BS` after `BS=256` (or
`BS=${BS:-256}`), so the command alone gives no number. This reads the assignments
before a line the way the shell would run them, without running anything: a variable
is known when the script itself sets it, at top level, to a literal or to a
`${NAME:-default}` whose default is one (the default is taken, and said so: the
environment may change it). What a shell would compute or take from outside stays
unknown, with the reason: `$(...)`, arithmetic, the environment, a loop variable, an
assignment inside `if`/`while`/`case`/a function or after `&&`/`||`, `read`, `source`,
`eval`. One exception, worded as such: a `case` arm or loop that sets the variable from
the script's own arguments (`--bs) BS="$2"`) leaves the top-level value in place, as
the script runs without arguments, and the note names the line that would change it.
One pass over the script's commands; the only recursion is into the text of a `${...}`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from distrecipe.engines.shell import RawWord, raw_commands

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ASSIGNMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(\+?)=(.*)", re.S)
_FUNCTION = re.compile(r"[A-Za-z_][\w-]*\(\)")
_POSITIONAL = re.compile(r"\$(?:[1-9@*]|\{[1-9@*]\})")
_REFERENCE = re.compile(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)")
_DEFAULT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(:?[-=])(.*)", re.S)
_OPENERS = {"if": "fi", "while": "done", "until": "done", "for": "done", "select": "done",
            "case": "esac", "{": "}"}
_PREFIXES = ("then", "do", "else", "elif", "!", "time")
_DECLARERS = ("export", "declare", "typeset", "readonly", "local")
_SETTERS = ("read", "mapfile", "readarray", "getopts", "let", "printf", "unset")
_ANYTHING = ("source", ".", "eval")


@dataclass(frozen=True, slots=True)
class Value:
    """A variable's (or a word's) value where it is used, and how that is known."""

    text: str | None
    """The value; None when the script does not fix it."""
    how: tuple[str, ...]
    """For a value: where it comes from (`line 30`, `line 4's default; set BS to
    change it`) and what could change it; for None, why it is unknown."""


def word_value(raw: str, table: Mapping[str, Value], file: str, line: int) -> Value:
    """`raw`, one shell word written at `line`, as the shell passes it given the
    variables `table` (from `variables_at`)."""
    parsed = raw_commands(raw, file)
    if len(parsed) != 1 or len(parsed[0].words) != 1:
        return Value(None, ("it is not one shell word",))
    return _word(parsed[0].words[0], table, line)


def raw_word_value(word: RawWord, table: Mapping[str, Value], line: int) -> Value:
    """A word the lexer read (`shell.raw_commands`) as the shell passes it at `line`."""
    return _word(word, table, line)


def unfixed(raw: str, table: Mapping[str, Value]) -> dict[str, bool]:
    """The variables the word `raw` names that the script does not fix where it is used
    (given `table`, from `variables_at`), each with whether it is left to the environment
    (True: the script never sets it before) or set to what only running it gives."""
    names = dict.fromkeys(_REFERENCE.findall(raw))
    return {name: name not in table for name in names if table.get(name, Value(None, ())).text is None}


def variables_at(text: str, file: str, lines: Iterable[int]) -> dict[int, dict[str, Value]]:
    """For each of `lines`, the variables the script assigns before it, as the shell
    holds them there (one pass over the script)."""
    wanted = sorted(set(lines))
    out: dict[int, dict[str, Value]] = {}
    table: dict[str, Value] = {}
    stack: list[tuple[str, bool]] = []  # closing word, and whether it ends a function body
    function_next = subshells = 0
    arguments_changed = False
    for command in raw_commands(text, file):
        while wanted and command.words[0].where.line >= wanted[0]:
            out[wanted.pop(0)] = dict(table)
        if not wanted:
            break
        if subshells:  # `( cd x; X=1 )`: nothing set in a subshell reaches the script
            subshells += command.words[0].text.startswith("(") - command.words[-1].text.endswith(")")
            continue
        words = command.words
        index = 0
        while index < len(words) and (words[index].text in _PREFIXES or (
                stack[-1:] == [("esac", False)] and words[index].text.endswith(")"))):
            index += 1  # `then X=1`; a case arm's pattern `--bs)`
        words = words[index:]
        if not words:
            continue
        first = words[0].text
        if first.startswith("(") and not first.startswith("(("):
            subshells += 1 - words[-1].text.endswith(")")
            continue
        if first in ("fi", "done", "esac", "}"):
            if stack and stack[-1][0] == first:
                stack.pop()
            continue
        if _FUNCTION.fullmatch(first) or first == "function":
            function_next = 1
            words = [w for w in words[1:] if w.text != "()" and _NAME.fullmatch(w.text) is None]
            if not words:
                continue
            first = words[0].text
        if first in _OPENERS:
            stack.append((_OPENERS[first], bool(function_next) and first == "{"))
            function_next = 0
            if first in ("for", "select") and len(words) > 1:
                table[words[1].text] = Value(None, (
                    f"{words[1].text} is a loop variable at line {words[1].where.line}",))
            words = words[1:]
            if not words:
                continue
            first = words[0].text
        at = words[0].where.line
        if first == "set" and any(w.text == "--" or not w.text.startswith(("-", "+")) for w in words[1:]):
            arguments_changed = True
        if first in _ANYTHING:
            for name in table:
                table[name] = Value(None, (f"line {at} runs `{first}`, which may set {name}",))
            continue
        if first in _SETTERS or first.startswith("(("):
            for word in words[1:]:
                for name in _NAME.findall(word.text):
                    table[name] = Value(None, (f"{name} may be set by `{first}` at line {at}",))
            continue
        if first in _DECLARERS:
            words = [w for w in words[1:] if not w.text.startswith(("-", "+"))]
        if not words or not all(_ASSIGNMENT.fullmatch(w.text) for w in words):
            continue  # a command; a prefix assignment (`X=1 cmd`) sets X for that command only
        if "|" in (command.before, command.after) or command.after == "&":
            continue  # a pipeline element or a background job runs in a subshell
        in_function = any(ends_function for _, ends_function in stack)
        plain = not stack and command.before not in ("&&", "||")
        for word in words:
            _assign(table, word, plain, not in_function and not arguments_changed)
    out.update((line, dict(table)) for line in wanted)
    return out


def _assign(table: dict[str, Value], word: RawWord, plain: bool, arguments_are_inputs: bool) -> None:
    """`NAME=value`: straight-line code sets NAME; a conditional assignment makes it
    unknown, unless it only takes the script's arguments (see the module docstring)."""
    match = _ASSIGNMENT.fullmatch(word.text)
    assert match is not None  # every word was matched by the caller
    name, append, written = match.groups()
    at = word.where.line
    raw = word.literal.partition("=")[2]
    if append:
        table[name] = Value(None, (f"{name} is appended to at line {at}",))
    elif written.startswith("("):
        table[name] = Value(None, (f"{name} is an array (line {at})",))
    elif plain:
        value = _word(RawWord(written, raw, word.opaque, word.where), table, at, name)
        table[name] = Value(value.text, value.how or (f"line {at}",)) if value.text is not None else value
    elif arguments_are_inputs and _POSITIONAL.fullmatch(raw) and (known := table.get(name)) is not None \
            and known.text is not None:
        table[name] = Value(known.text, (*known.how, f"the script's arguments can change it at line {at}"))
    else:
        table[name] = Value(None, (f"{name} is reassigned at line {at} inside a condition, loop or "
                                   "function, which the import does not run",))


def _word(word: RawWord, table: Mapping[str, Value], line: int, subject: str = "it") -> Value:
    """A word written at `line`: its expansion, or why only running the script gives it."""
    if "$((" in word.text or "$[" in word.text:  # `$[...]`: bash's older spelling of `$((...))`
        return Value(None, (f"{subject} is computed by shell arithmetic at line {line}",))
    if word.opaque:
        return Value(None, (f"{subject} is the output of a command at line {line}",))
    return expand(word.literal, table, line)


def expand(raw: str, table: Mapping[str, Value], line: int) -> Value:
    """`raw` with the table's variables expanded, as one shell word written at `line`.

    `raw` is a word's literal (`shell.RawWord.literal`: quotes removed, a quoted `$`
    written as NUL), holding no `$(...)` or backticks.
    """
    out: list[str] = []
    how: list[str] = []
    i = 0
    while i < len(raw):
        char = raw[i]
        if char != "$":
            out.append("$" if char == "\0" else char)
            i += 1
            continue
        if raw.startswith("${", i):
            close = _closing_brace(raw, i + 2)
            if close < 0:
                return Value(None, ("it holds an unclosed ${",))
            value = _parameter(raw[i + 2:close], table, line)
            i = close + 1
        elif (name := _NAME.match(raw, i + 1)) is not None:
            value = _lookup(name.group(0), table)
            i = name.end()
        elif i + 1 < len(raw):
            return Value(None, (f"${raw[i + 1]} is the shell's own (the script's arguments or state)",))
        else:
            out.append("$")
            i += 1
            continue
        if value.text is None:
            return value
        out.append(value.text)
        how.extend(h for h in value.how if h not in how)
    return Value("".join(out), tuple(how))


def _closing_brace(raw: str, start: int) -> int:
    """The index of the `}` closing a `${` whose body starts at `start`, or -1."""
    depth = 1
    for index in range(start, len(raw)):
        if raw.startswith("${", index):
            depth += 1
        elif raw[index] == "}":
            depth -= 1
            if depth == 0:
                return index
    return -1


def _parameter(body: str, table: Mapping[str, Value], line: int) -> Value:
    """`${NAME}`, or `${NAME:-default}` (also `-`, `:=`, `=`) with the default taken
    where the script does not set NAME; any other expansion (`${#X}`, `${X/a/b}`) is unknown."""
    if _NAME.fullmatch(body):
        return _lookup(body, table)
    match = _DEFAULT.fullmatch(body)
    if match is None:
        return Value(None, (f"${{{body}}} is a shell expansion the import does not evaluate",))
    name, operator, default = match.groups()
    if name in table:
        known = table[name]
        if known.text is None or known.text or ":" not in operator:
            return known
    fallback = expand(default, table, line)
    if fallback.text is None:
        return fallback
    if not fallback.text:
        return Value(None, (f"{name} comes from the environment (its default at line {line} is empty)",))
    return Value(fallback.text, (f"line {line}'s default; set {name} to change it", *fallback.how))


def _lookup(name: str, table: Mapping[str, Value]) -> Value:
    if name in table:
        return table[name]
    return Value(None, (f"{name} comes from the environment (the script does not set it before)",))
