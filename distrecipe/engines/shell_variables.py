"""A launch script's own variables, as the shell would hold them where a command uses them.

verl's examples write their batch as `data.train_batch_size=$BS` after `BS=256` (or
`BS=${BS:-256}`), so the command alone gives no number. This reads the assignments
before a line the way the shell would run them, without running anything: a variable
is known when the script itself sets it, at top level, to a literal or to a
`${NAME:-default}` whose default is one (the default is taken, and said so: the
environment may change it). What a shell would compute or take from outside stays
unknown, with the reason: `$(...)`, the environment, a loop variable, an
assignment inside `if`/`while`/`case`/a function or after `&&`/`||`, `read`, `source`,
`eval`. One exception, worded as such: a `case` arm or loop that sets the variable from
the script's own arguments (`--bs) BS="$2"`) leaves the top-level value in place, as
the script runs without arguments, and the note names the line that would change it.
Shell arithmetic (`$((...))`, and bash's older `$[...]`) is evaluated where the script
fixes it: integers, `+ - * / % **`, unary minus, parentheses, and variables the script
sets to integers; bash's other operators, a variable it does not fix, a division by zero
or a value beyond bash's 64-bit integers leave the word unknown, saying so. Never `eval`:
a small parser, bounded in length and depth.
One pass over the script's commands; the only recursion is into the text of a `${...}`
and into arithmetic nested in arithmetic.
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
    literal, computed = word.literal, tuple[str, ...]()
    if "$((" in literal or "$[" in literal:  # `$[...]`: bash's older spelling of `$((...))`
        head = f"{subject} is computed by shell arithmetic at line {line}"
        try:
            literal, notes = _arithmetic(word.literal, table, line)
        except _Unknown as unknown:
            if not unknown.reasons:
                return Value(None, (head,))
            first = unknown.reasons[0]
            joined = head + (" " if first.startswith("from ") else ": ") + first
            return Value(None, (joined, *unknown.reasons[1:]))
        computed = (f"line {line}'s shell arithmetic", *notes)
        if word.opaque and ("$(" in literal or "`" in literal or "$'" in word.text):
            return Value(None, (f"{subject} is the output of a command at line {line}",))
    elif word.opaque:
        return Value(None, (f"{subject} is the output of a command at line {line}",))
    value = expand(literal, table, line)
    if value.text is None or not computed:
        return value
    return Value(value.text, (*computed, *(h for h in value.how if h not in computed)))


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


_ARITHMETIC_LIMIT = 1000
"""The longest arithmetic expression (after its variables are expanded) the import evaluates."""
_TOO_LONG = f"an expression over {_ARITHMETIC_LIMIT} characters, which the import does not evaluate"
_INT_MIN, _INT_MAX = -(1 << 63), (1 << 63) - 1
"""Bash's arithmetic is on signed 64-bit integers; a value beyond them is left unknown."""
_ARITHMETIC_TOKEN = re.compile(r"\s*(?:(\d+)|([A-Za-z_][A-Za-z0-9_]*)|(\*\*|\+\+|--|[-+*/%()])|(\S))")


class _Unknown(Exception):
    """Why an arithmetic expression has no value the import gives: `reasons` extend
    `is computed by shell arithmetic at line N`, empty for bash's other operators."""

    def __init__(self, *reasons: str) -> None:
        super().__init__(*reasons)
        self.reasons = reasons


def _arithmetic(literal: str, table: Mapping[str, Value], line: int) -> tuple[str, list[str]]:
    """`literal` with each `$((...))` and `$[...]` replaced by its value, and the notes of
    the variables they read; raises `_Unknown` where the import does not evaluate one."""
    out: list[str] = []
    how: list[str] = []
    i = 0
    while i < len(literal):
        start = min((j for j in (literal.find("$((", i), literal.find("$[", i)) if j >= 0), default=-1)
        if start < 0:
            break
        out.append(literal[i:start])
        body, i = _arithmetic_span(literal, start)
        if len(body) > _ARITHMETIC_LIMIT:  # before reading what it nests
            raise _Unknown(_TOO_LONG)
        inner, inner_how = _arithmetic(body, table, line)  # `$(( $[a] * 2 ))`: innermost first
        if "$(" in inner or "`" in inner:
            raise _Unknown()
        expanded = expand(inner, table, line)
        if expanded.text is None:
            raise _Unknown(*expanded.how)
        value = _evaluate(expanded.text, table)
        out.append(str(value.text))
        how.extend(h for h in (*inner_how, *expanded.how, *value.how) if h not in how)
    out.append(literal[i:])
    return "".join(out), how


def _arithmetic_span(literal: str, start: int) -> tuple[str, int]:
    """The expression of the `$((...))` or `$[...]` at `start`, and the index after it."""
    opening, close = ("(", ")") if literal.startswith("$((", start) else ("[", "]")
    first = start + (3 if opening == "(" else 2)
    depth = 1
    for index in range(first, len(literal)):
        if literal[index] == opening:
            depth += 1
        elif literal[index] == close:
            depth -= 1
            if depth == 0:
                if opening == "[":
                    return literal[first:index], index + 1
                if literal.startswith(")", index + 1):
                    return literal[first:index], index + 2
                break  # `$((a)+(b))`: a command substitution of a subshell, as bash reads it
    raise _Unknown()


def _evaluate(expression: str, table: Mapping[str, Value]) -> Value:
    """An expression of integers, variables the script sets to integers, `+ - * / % **`,
    unary `-`/`+` and parentheses, by bash's rules (unary minus binds tighter than `**`;
    `/` truncates toward zero; `%` takes the dividend's sign)."""
    if len(expression) > _ARITHMETIC_LIMIT:
        raise _Unknown(_TOO_LONG)
    tokens: list[tuple[str, str]] = []
    position = 0
    while position < len(expression) and not expression[position:].isspace():
        match = _ARITHMETIC_TOKEN.match(expression, position)
        assert match is not None  # the last group takes any non-blank character
        number, name, operator, other = match.groups()
        if other is not None or operator in ("++", "--"):
            raise _Unknown()  # bash's other operators: `<<`, `?:`, `==`, `i++`, `=`...
        tokens.append(("number", number) if number is not None else ("name", name) if name is not None
                      else ("operator", operator))
        position = match.end()
    how: list[str] = []
    parser = _Parser(tokens, table, how)
    result = parser.sum(0)
    if parser.index != len(tokens):
        raise _Unknown()
    return Value(str(result), tuple(how))


class _Parser:
    """A recursive descent over `_evaluate`'s tokens, nesting at most `_DEPTH` deep."""

    _DEPTH = 64

    def __init__(self, tokens: list[tuple[str, str]], table: Mapping[str, Value], how: list[str]) -> None:
        self.tokens, self.table, self.how, self.index = tokens, table, how, 0

    def _peek(self) -> str | None:
        if self.index < len(self.tokens) and self.tokens[self.index][0] == "operator":
            return self.tokens[self.index][1]
        return None

    def sum(self, depth: int) -> int:
        value = self.product(depth)
        while (operator := self._peek()) in ("+", "-"):
            self.index += 1
            right = self.product(depth)
            value = _bounded(value + right if operator == "+" else value - right)
        return value

    def product(self, depth: int) -> int:
        value = self.power(depth)
        while (operator := self._peek()) in ("*", "/", "%"):
            self.index += 1
            right = self.power(depth)
            if operator == "*":
                value = _bounded(value * right)
                continue
            if right == 0:
                raise _Unknown("division by zero")
            quotient = abs(value) // abs(right) * (1 if (value < 0) == (right < 0) else -1)
            value = _bounded(quotient if operator == "/" else value - right * quotient)
        return value

    def power(self, depth: int) -> int:
        base = self.unary(depth)
        if self._peek() != "**":
            return base
        self.index += 1
        exponent = self.power(depth + 1)  # right-associative
        if exponent < 0:
            raise _Unknown("a negative exponent, which bash refuses")
        if exponent > 64 and base not in (-1, 0, 1):
            raise _Unknown("a value beyond bash's 64-bit integers")
        return _bounded(base ** min(exponent, 64 + exponent % 2))

    def unary(self, depth: int) -> int:
        if depth > self._DEPTH:
            raise _Unknown(f"an expression nested over {self._DEPTH} deep, which the import does not read")
        operator = self._peek()
        if operator in ("-", "+"):
            self.index += 1
            value = self.unary(depth + 1)
            return _bounded(-value if operator == "-" else value)
        if operator == "(":
            self.index += 1
            value = self.sum(depth + 1)
            if self._peek() != ")":
                raise _Unknown()
            self.index += 1
            return value
        if self.index >= len(self.tokens) or operator is not None:
            raise _Unknown()
        kind, text = self.tokens[self.index]
        self.index += 1
        if kind == "number":
            if len(text) > 1 and text.startswith("0"):
                raise _Unknown()  # `010`: octal to bash
            if len(text) > 19:
                raise _Unknown("a value beyond bash's 64-bit integers")
            return _bounded(int(text))
        known = _lookup(text, self.table)
        if known.text is None:
            raise _Unknown(f"from {text}", *known.how)
        if re.fullmatch(r"\s*-?(?:0|[1-9][0-9]{0,18})\s*", known.text) is None:
            raise _Unknown(f"from {text}, which is not an integer ({known.text!r})")
        self.how.extend(h for h in known.how if h not in self.how)
        return _bounded(int(known.text))


def _bounded(value: int) -> int:
    if not _INT_MIN <= value <= _INT_MAX:
        raise _Unknown("a value beyond bash's 64-bit integers")
    return value
