"""A script's own variables as the shell holds them where a command uses them: known only
when the script fixes them in straight-line code, never guessed (`engines/shell_variables`)."""

from __future__ import annotations

import time

import pytest

from distrecipe.engines.shell_variables import unfixed, variables_at, word_value


def value(script: str, word: str = "$BS") -> tuple[str | None, tuple[str, ...]]:
    """`word` as the shell passes it on the script's last line."""
    text = script + f"\npython3 -m verl.trainer.main_ppo data.train_batch_size={word}\n"
    line = text.count("\n")
    found = word_value(word, variables_at(text, "run.sh", [line])[line], "run.sh", line)
    return found.text, found.how


def test_a_plain_assignment_is_taken_with_its_line() -> None:
    assert value("set -x\nBS=256") == ("256", ("line 2",))
    assert value("export BS='256'") == ("256", ("line 1",))
    assert value("A=64\nBS=\"${A}\"") == ("64", ("line 1",))


def test_a_default_is_taken_and_said_to_be_one() -> None:
    assert value("BS=${BS:-128}") == ("128", ("line 1's default; set BS to change it",))
    assert value("", "${BS:-32}") == ("32", ("line 2's default; set BS to change it",))
    assert value("BS=16\nX=${BS:-128}", "$X") == ("16", ("line 1",))


@pytest.mark.parametrize(("script", "word", "why"), [
    ("", "$BS", "BS comes from the environment"),
    ("BS=${BS:-}", "$BS", "BS comes from the environment (its default at line 1 is empty)"),
    ("BS=$(nproc)", "$BS", "BS is the output of a command at line 1"),
    ("BS=`nproc`", "$BS", "BS is the output of a command at line 1"),
    ("BS=$((64 / 0))", "$BS", "BS is computed by shell arithmetic at line 1: division by zero"),
    ("", "$[64 % (2 - 2)]", "it is computed by shell arithmetic at line 2: division by zero"),
    ("BS=$[N * 32]", "$BS", "BS is computed by shell arithmetic at line 1 from N; N comes from the environment"),
    ("N=$(nproc)\nBS=$((N * 32))", "$BS", "from N; N is the output of a command at line 1"),
    ("", "$(($N * 32))", "it is computed by shell arithmetic at line 2: N comes from the environment"),
    ("N=eight\nBS=$((N * 32))", "$BS", "from N, which is not an integer ('eight')"),
    ("", "$((1 << 3))", "it is computed by shell arithmetic at line 2"),  # bash's other operators
    ("I=1\nBS=$((I++))", "$BS", "BS is computed by shell arithmetic at line 2"),
    ("", "$((BS > 2 ? 1 : 0))", "it is computed by shell arithmetic at line 2"),
    ("", "$((010))", "it is computed by shell arithmetic at line 2"),  # octal to bash
    ("", "$((2 ** 63))", "a value beyond bash's 64-bit integers"),
    ("", "$((2 ** -1))", "a negative exponent"),
    ("BS=64\nif [ -n \"$BIG\" ]; then\n  BS=128\nfi", "$BS", "BS is reassigned at line 3 inside a condition"),
    ("BS=64\n[ -n \"$BIG\" ] && BS=128", "$BS", "BS is reassigned at line 2 inside a condition"),
    ("for BS in 32 64; do :; done", "$BS", "BS is a loop variable at line 1"),
    ("BS=64\nread BS", "$BS", "BS may be set by `read` at line 2"),
    ("BS=64\nsource env.sh", "$BS", "line 2 runs `source`, which may set BS"),
    ("BS=64\nBS+=0", "$BS", "BS is appended to at line 2"),
    ("BS=64\nset_bs() {\n  BS=$1\n}", "$BS", "BS is reassigned at line 3 inside a condition, loop or function"),
    ("", "$1", "$1 is the shell's own"),
    ("", "${BS/6/8}", "is a shell expansion the import does not evaluate"),
])
def test_what_only_running_the_script_gives_stays_unknown(script: str, word: str, why: str) -> None:
    text, how = value(script, word)
    assert text is None
    assert why in "; ".join(how)


@pytest.mark.parametrize(("script", "word", "expected"), [
    ("BS=$((64 * 2))", "$BS", ("128", ("line 1's shell arithmetic",))),
    ("", "$((64 * 2))", ("128", ("line 2's shell arithmetic",))),
    ("BS=$[64 * 2]", "$BS", ("128", ("line 1's shell arithmetic",))),  # bash's legacy form
    ("N=8\nBS=\"$[N * 32]\"", "$BS", ("256", ("line 2's shell arithmetic", "line 1"))),
    ("N=8\nBS=$(( ($N + ${N}) * -2 ))", "$BS", ("-32", ("line 2's shell arithmetic", "line 1"))),
    ("", "$((-7 / 2))x$((-7 % 2))", ("-3x-1", ("line 2's shell arithmetic",))),  # toward zero, as C
    ("", "$((-2 ** 2 + 2 ** 3 ** 2))", ("516", ("line 2's shell arithmetic",))),  # unary first; ** to the right
    ("", "$(( $[2 * 3] + 1 ))", ("7", ("line 2's shell arithmetic",))),
    ("BS=${BS:-$((4 * 8))}", "$BS", ("32", ("line 1's shell arithmetic", "line 1's default; set BS to change it"))),
    ("", "'$((1 + 2))'", ("$((1 + 2))", ())),  # quoted: no arithmetic
])
def test_shell_arithmetic_the_script_fixes_is_evaluated(script: str, word: str,
                                                        expected: tuple[str, tuple[str, ...]]) -> None:
    assert value(script, word) == expected


@pytest.mark.parametrize("word", [
    "$((" + "9" * 5000 + "))", "$[2 ** 99999999999]", "$((" + "2 ** " * 200 + "2))",
    "$((" + "(" * 400 + "1" + ")" * 400 + "))", "$((" + "- " * 450 + "1))", "$[" * 3000 + "1" + "]" * 3000,
    "$((9999999999999999999 * 99))",
])
def test_hostile_arithmetic_stays_unknown_at_once(word: str) -> None:
    started = time.monotonic()
    text, how = value("", word)
    assert text is None and "computed by shell arithmetic at line 2" in how[0]
    assert time.monotonic() - started < 1


def test_the_scripts_own_arguments_leave_the_default_in_place_and_are_named() -> None:
    script = ("BS=256\nwhile [[ \"$#\" -gt 0 ]]; do\n  case \"$1\" in\n"
              "    --bs) BS=\"$2\"; shift 2 ;;\n    *) shift ;;\n  esac\ndone")
    assert value(script) == ("256", ("line 1", "the script's arguments can change it at line 4"))
    changed = value("set -- --bs 64\n" + script)
    assert changed[0] is None  # `set --` gives the script arguments: the loop runs


def test_subshells_pipelines_and_later_lines_do_not_set_it() -> None:
    assert value("BS=64\n( BS=128 )") == ("64", ("line 1",))
    assert value("BS=64\nBS=128 | cat") == ("64", ("line 1",))
    assert value("BS=64\nBS=128 python train.py") == ("64", ("line 1",))  # a prefix sets it for that command
    text = "python3 -m verl.trainer.main_ppo data.train_batch_size=$BS\nBS=64\n"
    assert word_value("$BS", variables_at(text, "run.sh", [1])[1], "run.sh", 1).text is None


def test_quotes_are_the_shells() -> None:
    assert value("BS=64", "'$BS'") == ("$BS", ())
    assert value("BS=64", "\"$BS\"") == ("64", ("line 1",))


def test_unfixed_names_what_the_environment_gives_apart_from_what_running_gives() -> None:
    text = "BS=64\nN=$(nproc)\nP=$HOME/x\npython3 -m verl.trainer.main_ppo data.a=$BS-$N-${P}-${HOME}-$USER\n"
    table = variables_at(text, "run.sh", [4])[4]
    assert unfixed("$BS-$N-${P}-${HOME}-$USER", table) == {"N": False, "P": False, "HOME": True, "USER": True}
