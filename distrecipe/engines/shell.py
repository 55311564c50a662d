"""Reading a shell script as the commands it runs: words with positions, and its own variables.

Launch scripts are where the world size and the TrainingArguments of a run are
written (`deepspeed --num_gpus 8 train.py --per_device_train_batch_size 4 ...`). This
is not a shell: it splits a script into simple commands (on newlines, `;`, `&&`,
`||`, `|`, `&`), joins backslash continuations, honours quotes, skips comments and
here-documents, and substitutes a `$VAR` only when the script itself assigned it a
plain value before (`NUM_GPUS=8`). Anything else a shell would compute (`$1`,
`$(...)`, a variable from the environment, `${X:-8}`) stays unknown: a `Word` whose
`value` is None, never a guess. `shell_variables` reads the same split (`raw_commands`,
which keeps the operators between commands) for a verl script's `$VAR` overrides,
where defaults and straight-line control flow are followed too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from distrecipe.errors import Position

_ASSIGNMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=(.*)", re.S)
_VARIABLE = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))")
_SEPARATORS = (";", "&", "|")


@dataclass(frozen=True, slots=True)
class Word:
    """One shell word: its text as written, its value when known, and where it starts."""

    text: str
    value: str | None
    where: Position


@dataclass(frozen=True, slots=True)
class RawWord:
    """A word before variables are substituted: its text, and whether any of it was quoted
    with `'` (no substitution) or holds a command substitution (unknowable)."""

    text: str
    literal: str
    opaque: bool
    where: Position


def commands(text: str, file: str) -> list[list[Word]]:
    """Every simple command of the script, in order, variables substituted where known.

    Assignments (`NAME=value`, `export NAME=value`) are consumed: they set the
    variable for the commands after them and are not returned as commands.
    """
    variables: dict[str, str | None] = {}
    out: list[list[Word]] = []
    for raw in raw_commands(text, file):
        words = [_substitute(word, variables) for word in raw.words]
        if words and words[0].value in ("export", "declare", "readonly", "local"):
            words = words[1:]
        assigned = 0
        for word in words:
            match = _ASSIGNMENT.fullmatch(word.text)
            if not match:
                break
            assigned += 1
        if assigned and assigned == len(words):
            for word in words:
                name, _, _ = word.text.partition("=")
                variables[name] = word.value.partition("=")[2] if word.value is not None else None
            continue
        if words[assigned:]:
            out.append(words[assigned:])
    return out


@dataclass(frozen=True, slots=True)
class RawCommand:
    """A simple command's raw words, and the operators written before and after it
    (`""` for a newline, else the run of `;`, `&`, `|` characters: `&&`, `||`, `|`, `;;`...),
    which say whether it runs always, on a condition, or in a subshell."""

    words: list[RawWord]
    before: str
    after: str


def _substitute(raw: RawWord, variables: dict[str, str | None]) -> Word:
    """The word's value: quotes removed and known variables replaced, or None."""
    if raw.opaque:
        return Word(raw.text, None, raw.where)
    unknown = False

    def replace(match: re.Match[str]) -> str:
        nonlocal unknown
        value = variables.get(match.group(1) or match.group(2))
        if value is None:
            unknown = True
            return ""
        return value

    value = _VARIABLE.sub(replace, raw.literal)
    if unknown or "$" in value.replace("\0", ""):
        return Word(raw.text, None, raw.where)
    return Word(raw.text, value.replace("\0", "$"), raw.where)


def raw_commands(text: str, file: str) -> list[RawCommand]:
    """Commands as lists of raw words; `'...'` contents are shielded from substitution."""
    commands_: list[RawCommand] = []
    current: list[RawWord] = []
    before = ""
    word, literal = "", ""
    opaque, start = False, (1, 1)
    line, col, i = 1, 1, 0
    heredoc: str | None = None
    n = len(text)

    def finish() -> None:
        nonlocal word, literal, opaque
        if word:
            current.append(RawWord(word, literal, opaque, Position(file, *start)))
        word, literal, opaque = "", "", False

    def end_command(operator: str = "") -> None:
        nonlocal current, before
        finish()
        if current:
            commands_.append(RawCommand(current, before, operator))
            before = operator
        else:  # `a &&` then a newline: the next command is still joined by `&&`
            before = operator or before
        current = []

    while i < n:
        char = text[i]
        if heredoc is not None:  # skip to the delimiter line
            eol = text.find("\n", i)
            body = text[i:] if eol < 0 else text[i:eol]
            i, line, col = (n if eol < 0 else eol + 1), line + 1, 1
            if body.strip() == heredoc:
                heredoc = None
            continue
        if char == "\\" and i + 1 < n:
            if text[i + 1] == "\n":
                i, line, col = i + 2, line + 1, 1
                continue
            if not word:
                start = (line, col)
            word += text[i:i + 2]
            literal += text[i + 1] if text[i + 1] != "$" else "\0"
            i, col = i + 2, col + 2
            continue
        if char in " \t\r":
            finish()
            i, col = i + 1, col + 1
            continue
        if char == "\n":
            finish()
            heredoc = _heredoc(current)
            end_command()
            i, line, col = i + 1, line + 1, 1
            continue
        if char == "#" and not word:
            while i < n and text[i] != "\n":
                i += 1
            continue
        if char in _SEPARATORS:
            j = i
            while j < n and text[j] in _SEPARATORS:
                j += 1
            end_command(text[i:j])
            i, col = j, col + j - i
            continue
        if not word:
            start = (line, col)
        if char in "'\"`" or text.startswith("$(", i):
            close = {"'": "'", '"': '"', "`": "`"}.get(char, ")")
            j = i + (2 if close == ")" else 1)
            depth = 1
            while j < n:
                if text[j] == "\\" and close != "'":
                    j += 2
                    continue
                if close == ")" and text[j] == "(":  # `$(...)` and `$((...))` nest parentheses
                    depth += 1
                elif text[j] == close:
                    depth -= 1
                    if depth == 0:
                        break
                j += 1
            chunk = text[i:j + 1]
            if char == "'":
                literal += chunk[1:-1].replace("$", "\0")
            elif char == '"':
                literal += chunk[1:-1].replace('\\"', '"')
                opaque = opaque or "$(" in chunk or "`" in chunk
            else:
                opaque = True
            word += chunk
            newlines = chunk.count("\n")
            line += newlines
            col = (len(chunk) - chunk.rfind("\n")) if newlines else col + len(chunk)
            i = j + 1
            continue
        word += char
        literal += char
        i, col = i + 1, col + 1
    end_command()
    return commands_


def _heredoc(words: list[RawWord]) -> str | None:
    """The delimiter of a here-document the command opens (`<<EOF`, `<< 'EOF'`), if any."""
    for index, word in enumerate(words):
        if word.text.startswith("<<") and not word.text.startswith("<<<"):
            rest = word.text[2:].lstrip("-") or (words[index + 1].text if index + 1 < len(words) else "")
            return rest.strip("'\"") or None
    return None
