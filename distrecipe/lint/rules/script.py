"""A launch script read as bash runs it (`engines/shell`): what never reaches the program."""

from __future__ import annotations

from collections.abc import Iterator

from distrecipe.engines.argv import launches
from distrecipe.engines.hydra import verl_commands
from distrecipe.engines.shell import is_script
from distrecipe.errors import Position
from distrecipe.lint.rule import Problem
from distrecipe.lint.workspace import Source


def comment_ends_command(src: Source) -> Iterator[Problem]:
    """A comment line inside a backslash-continued command ends the command there.

    Bash reads `#` where a word starts as a comment to the end of the line, backslash
    included, so the line after a commented-out argument is no continuation: the command
    ends at the comment, the program starts without the arguments written below it, and
    bash runs those as a command of their own (`--learning_rate: command not found`, or
    for `key=value` lines a shell variable set and forgotten). The job starts, with
    defaults where the script says otherwise. A blank after the line's last backslash
    does the same: the backslash escapes the blank (the program gets a `' '` argument)
    and the newline ends the command.

    Fails: hf
    ```sh
    torchrun --nproc_per_node 8 train.py \\
        --per_device_train_batch_size 4 \\
        # --gradient_checkpointing \\
        --gradient_accumulation_steps 8
    ```

    Passes: hf
    ```sh
    torchrun --nproc_per_node 8 train.py \\
        --per_device_train_batch_size 4 \\
        --gradient_accumulation_steps 8
    # --gradient_checkpointing
    ```

    Fix: move the commented-out argument below the command, or delete the line; delete the
    blanks after a backslash.
    """
    if not is_script(src.path) or src.within:
        return
    text = "\n".join(src.doc.lines)
    cut: list[tuple[Position, int, str, list[str]]] = []
    for launch in launches(text, src.doc.file):
        lost = [word.text for word in launch.unreached if word.text.startswith("-")]
        if launch.cut is not None and lost:
            program = (launch.program[0].value or launch.program[0].text).rsplit("/", 1)[-1]
            cut.append((launch.cut, launch.start.where.line, program, lost))
    for command in verl_commands(text, src.doc.file):
        if command.cut is not None and command.unreached:
            cut.append((command.cut, command.start.line, "verl", [item.key for item in command.unreached]))
    for where, line, program, lost in cut:
        shown = ", ".join(lost[:6]) + (f" and {len(lost) - 6} more" if len(lost) > 6 else "")
        written = src.doc.lines[where.line - 1] if 0 < where.line <= len(src.doc.lines) else ""
        why = (f"the blank after this backslash ends the command of line {line} (a backslash joins "
               "lines only right before the line's end)" if written[where.col - 1:where.col] == "\\" else
               f"this comment ends the command of line {line}, backslash or not (bash reads a comment "
               "to the end of the line)")
        yield Problem((), f"{why}: {shown} never reach {program}; bash runs them as a command of their own",
                      where=where)


def nothing_judged(src: Source) -> Iterator[Problem]:
    """A shell script with no launch command lint reads: nothing in it was judged.

    lint reads `torchrun`, `deepspeed`, `accelerate launch`, `python -m torch.distributed.run`
    and verl's trainer modules, as bash would run them (through `srun`, `env`, `exec`). A
    command built in a string and run by `bash -c "$CMD"`, or a fork's own trainer module,
    is none of these: the script is not refused (a repository's CI lints all its scripts),
    and this note says that its launch was not checked.

    Fails: hf
    ```sh
    CMD="accelerate launch --config_file zero3.yaml train.py"
    srun bash -c "$CMD"
    ```

    Passes: hf
    ```sh
    srun accelerate launch --config_file zero3.yaml train.py
    ```

    Fix: nothing, if the script launches no training; else run the launcher directly, so
    its options and the program's flags can be read.
    """
    if not is_script(src.path) or src.within:
        return
    text = "\n".join(src.doc.lines)
    if launches(text, src.doc.file) or verl_commands(text, src.doc.file):
        return
    yield Problem((), "no launch command lint reads (torchrun, deepspeed, accelerate launch, verl's "
                      "trainer): nothing in this script was judged")
