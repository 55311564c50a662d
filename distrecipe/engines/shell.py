"""Reading a shell script as bash reads it: commands of words with positions, its own variables.

Launch scripts are where the world size and the TrainingArguments of a run are
written (`deepspeed --num_gpus 8 train.py --per_device_train_batch_size 4 ...`). This
is not a shell, but it splits a script into simple commands by bash's own rules (on
newlines, `;`, `&&`, `||`, `|`, `&`): a backslash-newline joins lines outside single
quotes; `'...'`, `"..."`, `$'...'`, `$(...)`, backticks and `${...}` keep their spaces;
`#` starts a comment only where a word could start, and a comment ends the command even
inside a backslash continuation (the lines after it run as a command of their own, which
`RawCommand.cut` and `after_cut` record); redirections and here-documents are not words.
A `$VAR` is substituted only when the script itself assigned it a plain value before
(`NUM_GPUS=8`). Anything else a shell would compute (`$1`, `$(...)`, a variable from the
environment, `${X:-8}`) stays unknown: a `Word` whose `value` is None, never a guess.
`shell_variables` reads the same commands (`raw_commands`, which keeps the operators
between them) for a verl script's `$VAR` overrides, where defaults and straight-line
control flow are followed too.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from distrecipe.errors import Position

SCRIPT_SUFFIXES = (".sh", ".bash", ".slurm", ".sbatch")
"""The names a launch script is kept under: a shell script, or a SLURM batch script
(`sbatch train.slurm`), whose `#SBATCH` lines are comments to bash."""


def is_script(path: str | os.PathLike[str]) -> bool:
    """Whether the file at `path` is a shell script by its name (`SCRIPT_SUFFIXES`)."""
    return os.fspath(path).lower().endswith(SCRIPT_SUFFIXES)

_ASSIGNMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=(.*)", re.S)
_VARIABLE = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))")
_SEPARATORS = (";", "&", "|")
_REDIRECTIONS = ("<<<", "<<-", "&>>", ">>", "<<", "<&", ">&", "<>", ">|", "&>", "<", ">")
"""Bash's redirection operators, longest first."""
_ANSI_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "a": "\a", "b": "\b", "e": "\x1b", "E": "\x1b",
                 "f": "\f", "v": "\v", "\\": "\\", "'": "'", '"': '"', "?": "?"}
"""What `$'...'` makes of a backslash and the letter after it."""


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
    """The text with quotes removed and escapes applied; a `$` that the shell does not
    expand (quoted with `'` or a backslash) is NUL, so `expand` leaves it alone."""
    opaque: bool
    where: Position


@dataclass(frozen=True, slots=True)
class RawCommand:
    """A simple command's raw words, and the operators written before and after it
    (`""` for a newline, else the run of `;`, `&`, `|` characters: `&&`, `||`, `|`, `;;`...),
    which say whether it runs always, on a condition, or in a subshell."""

    words: list[RawWord]
    before: str
    after: str
    cut: Position | None = None
    """The `#` that ended this command although the line before ended with a backslash:
    bash ends the command at the comment's end, so what follows never reaches it. Or the
    backslash meant to continue a line that blanks follow: bash ends the command there too."""
    after_cut: Position | None = None
    """For the command right after a cut one (only comment lines between), that `#`:
    its words were meant for the command above and run as a command of their own."""


def commands(text: str, file: str) -> list[list[Word]]:
    """Every simple command of the script, in order, variables substituted where known.

    Assignments (`NAME=value`, `export NAME=value`) are consumed: they set the
    variable for the commands after them and are not returned as commands.
    """
    return [words for words, _ in commands_with_origin(text, file)]


def commands_with_origin(text: str, file: str) -> list[tuple[list[Word], RawCommand]]:
    """`commands`, each beside the raw command it came from (for its `cut` and `after_cut`)."""
    variables: dict[str, str | None] = {}
    out: list[tuple[list[Word], RawCommand]] = []
    for raw in raw_commands(text, file):
        words = [_substitute(word, variables) for word in raw.words]
        if words and words[0].value in ("export", "declare", "readonly", "local"):
            words = words[1:]
        assigned = 0
        for word in words:
            if not _ASSIGNMENT.fullmatch(word.text):
                break
            assigned += 1
        if assigned and assigned == len(words):
            for word in words:
                name, _, _ = word.text.partition("=")
                variables[name] = word.value.partition("=")[2] if word.value is not None else None
            continue
        if words[assigned:]:
            out.append((words[assigned:], raw))
    return out


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
    return _Lexer(text, file).run()


@dataclass(slots=True)
class _Pending:
    """The word being read, and the command it belongs to."""

    text: str = ""
    literal: str = ""
    opaque: bool = False
    start: tuple[int, int] = (1, 1)
    words: list[RawWord] = field(default_factory=list)


class _Lexer:
    """One pass over a script, a method per construct bash reads (see the module docstring)."""

    def __init__(self, text: str, file: str) -> None:
        self.text, self.file, self.n = text, file, len(text)
        self.i, self.line, self.col = 0, 1, 1
        self.out: list[RawCommand] = []
        self.word = _Pending()
        self.before = ""
        self.continued = False
        """The current physical line was reached through a backslash-newline."""
        self.cut: Position | None = None
        """A comment ended the command being read inside a continuation."""
        self.after_cut: Position | None = None
        """The last command was cut, and only comment lines came since."""
        self.blank_cut: Position | None = None
        """A backslash on this line is followed only by blanks: the newline ends the command."""
        self.heredocs: list[tuple[str, bool]] = []
        """Delimiters of here-documents opened on this line (and whether `<<-`)."""
        self.redirect_target = False
        """The next word is a redirection's target (or a here-document's delimiter), not a word."""
        self.heredoc_next = False
        self.heredoc_strip = False

    def run(self) -> list[RawCommand]:
        while self.i < self.n:
            char = self.text[self.i]
            if char == "\\":
                self._backslash()
            elif char in " \t\r":
                self._finish_word()
                self._advance(self.i + 1)
            elif char == "\n":
                self._newline()
            elif char == "#" and not self.word.text:
                self._comment()
            elif char in "<>" or (char == "&" and self.text.startswith(">", self.i + 1)):
                self._redirection()
            elif char in _SEPARATORS:
                self._operator()
            elif char == "'":
                self._single_quoted()
            elif char == '"':
                self._double_quoted()
            elif char == "$" and self.text.startswith("$'", self.i):
                self._ansi_c()
            elif (char == "$" and self.text.startswith(("$(", "$["), self.i)) or char == "`":
                self._substitution()
            elif char == "$" and self.text.startswith("${", self.i):
                self._parameter()
            else:
                self._plain(char)
        self._end_command()
        return self.out

    # --- moving through the text ------------------------------------------------------------

    def _advance(self, to: int) -> None:
        """Move to index `to`, counting lines and columns over what is passed."""
        chunk = self.text[self.i:to]
        newlines = chunk.count("\n")
        if newlines:
            self.line += newlines
            self.col = len(chunk) - chunk.rfind("\n")
        else:
            self.col += len(chunk)
        self.i = to

    def _take(self, text: str, literal: str, to: int, *, opaque: bool = False) -> None:
        """Add `text` (written) and `literal` (as the shell passes it) to the word, then move to `to`."""
        if not self.word.text:
            self.word.start = (self.line, self.col)
        self.word.text += text
        self.word.literal += literal
        self.word.opaque = self.word.opaque or opaque
        self._advance(to)

    def _finish_word(self) -> None:
        word = self.word
        if word.text:
            if self.heredoc_next:
                self.heredocs.append((word.literal.replace("\0", "$"), self.heredoc_strip))
            elif not self.redirect_target:
                where = Position(self.file, *word.start)
                word.words.append(RawWord(word.text, word.literal, word.opaque, where))
            self.redirect_target = self.heredoc_next = False
        self.word = _Pending(words=word.words)

    def _end_command(self, operator: str = "") -> None:
        self._finish_word()
        words = self.word.words
        if words:
            self.out.append(RawCommand(words, self.before, operator, self.cut, self.after_cut))
            self.before = operator
            self.after_cut = None
        else:  # `a &&` then a newline: the next command is still joined by `&&`
            self.before = operator or self.before
        self.word = _Pending()
        self.cut = None
        self.redirect_target = self.heredoc_next = False

    # --- one method per construct -----------------------------------------------------------

    def _backslash(self) -> None:
        """`\\`-newline joins lines, also before a CR LF line end (a Windows checkout's, which
        git commits as LF); `\\x` is `x` itself (a `\\$` is not expanded); a backslash that ends
        the text is dropped, as bash drops it. A backslash followed by blanks to its line's end
        joins nothing: the first blank is a word of its own, and the newline ends the command
        (`RawCommand.cut`)."""
        if self.text.startswith(("\\\n", "\\\r\n"), self.i):
            self._advance(self.i + (2 if self.text[self.i + 1] == "\n" else 3))
            self.continued = True
            return
        if self.i + 1 >= self.n:
            self._advance(self.n)
            return
        following = self.text[self.i + 1]
        if following in " \t":
            end = self.i + 1
            while end < self.n and self.text[end] in " \t\r":
                end += 1
            if self.text.startswith("\n", end):
                self.blank_cut = Position(self.file, self.line, self.col)
        self._take(self.text[self.i:self.i + 2], "\0" if following == "$" else following, self.i + 2)

    def _newline(self) -> None:
        """A newline ends the command; the here-documents it opened come next."""
        cut, self.blank_cut = self.blank_cut, None
        if cut is not None and (self.word.words or self.word.text):
            self.cut = cut
            self._end_command()
            self.after_cut = cut
        self._end_command()
        self._advance(self.i + 1)
        self.continued = False
        if self.heredocs:
            self._heredoc_bodies()

    def _comment(self) -> None:
        """`#` where a word starts: to the end of the line, backslashes included. Inside a
        continuation it ends the command being read there."""
        start = Position(self.file, self.line, self.col)
        end = self.text.find("\n", self.i)
        self._advance(self.n if end < 0 else end)
        if self.continued and self.word.words:
            self.cut = start
            self._end_command()
            self.after_cut = start
        self.continued = False

    def _operator(self) -> None:
        j = self.i
        while j < self.n and self.text[j] in _SEPARATORS:
            j += 1
        operator = self.text[self.i:j]
        self._end_command(operator.replace("|&", "|"))
        self.after_cut = None
        self._advance(j)

    def _redirection(self) -> None:
        """`>`, `2>&1`, `<<EOF`...: the operator, and its target word, are not words."""
        if self.word.text.isdigit() and not self.word.opaque:  # `2>`: a file descriptor
            self.word = _Pending(words=self.word.words)
        else:
            self._finish_word()
        operator = next(op for op in _REDIRECTIONS if self.text.startswith(op, self.i))
        self._advance(self.i + len(operator))
        if operator in ("<<", "<<-"):
            self.heredoc_next, self.heredoc_strip = True, operator == "<<-"
        self.redirect_target = True

    def _single_quoted(self) -> None:
        close = self.text.find("'", self.i + 1)
        end = self.n if close < 0 else close + 1
        body = self.text[self.i + 1:close if close >= 0 else self.n]
        self._take(self.text[self.i:end], body.replace("$", "\0"), end)

    def _double_quoted(self) -> None:
        """`"..."`: `$` expansions stay; `\\` escapes only `$`, a backtick, `"`, `\\` and a newline."""
        j, literal, opaque = self.i + 1, [], False
        while j < self.n and self.text[j] != '"':
            char = self.text[j]
            if char == "\\" and j + 1 < self.n and self.text[j + 1] in '$`"\\\n':
                following = self.text[j + 1]
                literal.append("" if following == "\n" else "\0" if following == "$" else following)
                j += 2
            elif self.text.startswith(("$(", "$["), j) or char == "`":
                end = self._substitution_end(j)
                literal.append(self.text[j:end])
                opaque, j = True, end
            elif self.text.startswith("${", j):
                end = self._brace_end(j + 2)
                literal.append(self.text[j:end])
                j = end
            else:
                literal.append(char)
                j += 1
        end = min(j + 1, self.n)
        self._take(self.text[self.i:end], "".join(literal), end, opaque=opaque)

    def _ansi_c(self) -> None:
        """`$'...'`: backslash escapes decoded; a byte escape beyond ASCII leaves it unknown."""
        j, literal, opaque = self.i + 2, [], False
        while j < self.n and self.text[j] != "'":
            if self.text[j] == "\\" and j + 1 < self.n:
                following = self.text[j + 1]
                code = re.match(r"x[0-9A-Fa-f]{1,2}|[0-7]{1,3}", self.text[j + 1:j + 4])
                if code is not None:
                    number = int(code.group(0)[1:], 16) if code.group(0)[0] == "x" else int(code.group(0), 8)
                    opaque = opaque or number > 0x7F
                    literal.append(chr(number) if number < 0x80 else "")
                    j += 1 + len(code.group(0))
                    continue
                literal.append(_ANSI_ESCAPES.get(following, "\\" + following))
                j += 2
                continue
            literal.append("\0" if self.text[j] == "$" else self.text[j])
            j += 1
        end = min(j + 1, self.n)
        self._take(self.text[self.i:end], "".join(literal), end, opaque=opaque)

    def _substitution(self) -> None:
        """`$(...)`, `$((...))`, `$[...]` and backticks: only running the script gives them."""
        end = self._substitution_end(self.i)
        self._take(self.text[self.i:end], self.text[self.i:end], end, opaque=True)

    def _parameter(self) -> None:
        """`${...}`: one word even with spaces inside (`${X:-a b}`), expanded later."""
        end = self._brace_end(self.i + 2)
        self._take(self.text[self.i:end], self.text[self.i:end], end)

    def _plain(self, char: str) -> None:
        self._take(char, char, self.i + 1)

    def _heredoc_bodies(self) -> None:
        """Skip each here-document's lines, up to its delimiter line."""
        for delimiter, strip in self.heredocs:
            while self.i < self.n:
                end = self.text.find("\n", self.i)
                line = self.text[self.i:self.n if end < 0 else end]
                self._advance(self.n if end < 0 else end + 1)
                if (line.lstrip("\t") if strip else line).rstrip("\r") == delimiter:
                    break
        self.heredocs = []

    # --- finding where nested constructs end ------------------------------------------------

    def _substitution_end(self, start: int) -> int:
        """The index after the `)`, `]` or backtick closing the substitution at `start`."""
        if self.text[start] == "`":
            j = start + 1
            while j < self.n and self.text[j] != "`":
                j += 2 if self.text[j] == "\\" else 1
            return min(j + 1, self.n)
        close = ")" if self.text[start + 1] == "(" else "]"
        opening = "(" if close == ")" else "["
        depth, j = 1, start + 2
        while j < self.n:
            char = self.text[j]
            if char == "\\":
                j += 2
                continue
            if char in "'\"" and close == ")":
                j = self._quote_end(j)
                continue
            if char == opening:
                depth += 1
            elif char == close:
                depth -= 1
                if depth == 0:
                    return j + 1
            j += 1
        return self.n

    def _brace_end(self, start: int) -> int:
        """The index after the `}` closing a `${` whose body starts at `start`."""
        depth, j = 1, start
        while j < self.n:
            char = self.text[j]
            if char == "\\":
                j += 2
                continue
            if char in "'\"":
                j = self._quote_end(j)
                continue
            if self.text.startswith("${", j):
                depth += 1
                j += 2
                continue
            if char == "}":
                depth -= 1
                if depth == 0:
                    return j + 1
            j += 1
        return self.n

    def _quote_end(self, start: int) -> int:
        """The index after the quote closing the one at `start`."""
        quote, j = self.text[start], start + 1
        while j < self.n and self.text[j] != quote:
            j += 2 if self.text[j] == "\\" and quote == '"' else 1
        return min(j + 1, self.n)
