"""The launch-script lexer reads a script as bash does (`engines/shell`)."""

from __future__ import annotations

import pytest

from distrecipe.engines.shell import commands, raw_commands


def words(script: str) -> list[list[str]]:
    """Each command's words as the shell passes them (None where only running gives it)."""
    return [[w.value or "?" for w in command] for command in commands(script, "run.sh")]


def test_continuations_join_lines_and_quotes_keep_spaces() -> None:
    assert words("deepspeed train.py \\\n  --a 'x y' \\\n  --b \"1 2\"\n") == [
        ["deepspeed", "train.py", "--a", "x y", "--b", "1 2"]]


def test_a_comment_inside_a_continuation_ends_the_command() -> None:
    script = "torchrun train.py \\\n  --a 1 \\\n  # --b 2 \\\n  # more\n  --c 3 \\\n  --d 4\necho done\n"
    first, second, third = raw_commands(script, "run.sh")
    assert [w.text for w in first.words] == ["torchrun", "train.py", "--a", "1"]
    assert (first.cut.line, first.cut.col) == (3, 3)  # type: ignore[union-attr]
    assert [w.text for w in second.words] == ["--c", "3", "--d", "4"]
    assert second.after_cut == first.cut
    assert third.after_cut is None and third.cut is None


def test_a_comment_after_the_last_line_cuts_nothing_that_follows() -> None:
    first, second = raw_commands("deepspeed t.py \\\n  --a 1 \\\n  # --flash\n\necho x\n", "run.sh")
    assert first.cut is not None
    assert [w.text for w in second.words] == ["echo", "x"]  # not a flag: the next command of its own


def test_a_backslash_before_a_crlf_line_end_joins_and_one_ending_the_text_is_dropped() -> None:
    assert words("deepspeed t.py \\\r\n  --a 1 \\\r\n  --b\r\n") == [["deepspeed", "t.py", "--a", "1", "--b"]]
    assert words("torchrun t.py \\\n  --flag \\") == [["torchrun", "t.py", "--flag"]]  # as bash drops it


def test_blanks_after_a_line_s_last_backslash_end_the_command_there() -> None:
    first, second = raw_commands("torchrun t.py \\\n  --a \\ \t\n  --b 2\n", "run.sh")
    assert [w.literal for w in first.words] == ["torchrun", "t.py", "--a", " "]  # bash passes the blank
    assert (first.cut.line, first.cut.col) == (2, 7)  # type: ignore[union-attr]
    assert [w.text for w in second.words] == ["--b", "2"] and second.after_cut == first.cut
    assert raw_commands("echo a\\ b \\ \n", "run.sh")[0].cut is not None
    assert raw_commands("echo a\\ b\n", "run.sh")[0].cut is None  # an escaped blank inside the line


def test_a_hash_inside_a_word_or_quotes_is_no_comment() -> None:
    assert words("echo a#b '# c' \"#d\" \\#e\n") == [["echo", "a#b", "# c", "#d", "#e"]]


def test_redirections_and_here_documents_are_not_words() -> None:
    script = "python t.py --a 1 2>&1 > log.txt | tee x &> all\ncat <<-'EOF' > f\n\tdeepspeed x\n\tEOF\nls\n"
    assert words(script) == [["python", "t.py", "--a", "1"], ["tee", "x"], ["cat"], ["ls"]]


@pytest.mark.parametrize(("word", "value"), [
    ("\"$(dirname \"$0\")\"", "?"),      # a substitution with quotes inside is one word
    ("\"${X:-a b}\"", "?"),               # a default with a space, unknown: X is unset
    ("$'a\\tb'", "a\tb"),                 # ANSI-C quoting decoded
    ("$'\\xff'", "?"),                    # a byte beyond ASCII: unknown, never guessed
    ("'$HOME'", "$HOME"),                 # single quotes: no expansion
    ("\"a\\\"b\"", "a\"b"),
])
def test_quoting_as_bash_reads_it(word: str, value: str) -> None:
    assert words(f"echo {word}\n") == [["echo", value]]


def test_operators_split_commands_and_are_kept() -> None:
    found = raw_commands("a && b || c; d | e &\n", "run.sh")
    assert [(c.words[0].text, c.before, c.after) for c in found] == [
        ("a", "", "&&"), ("b", "&&", "||"), ("c", "||", ";"), ("d", ";", "|"), ("e", "|", "&")]


def test_positions_are_where_each_word_starts() -> None:
    found = raw_commands("X=1 \\\n  deepspeed  t.py\n", "run.sh")[0].words
    assert [(w.where.line, w.where.col) for w in found] == [(1, 1), (2, 3), (2, 14)]
