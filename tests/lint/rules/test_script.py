"""DR365: a comment inside a backslash continuation ends the command there."""

from __future__ import annotations

from pathlib import Path

from tests.lint.rules.conftest import findings


def test_the_comment_is_reported_with_the_arguments_that_never_arrive(tmp_path: Path) -> None:
    text = ("deepspeed --num_gpus 8 train.py \\\n    --per_device_train_batch_size 4 \\\n"
            "    # --gradient_checkpointing \\\n    --gradient_accumulation_steps 8 \\\n    --bf16\n")
    (line, col, message), = findings(tmp_path, "run.sh", text, "DR365")
    assert (line, col) == (3, 5)
    assert "ends the command of line 1" in message
    assert "--gradient_accumulation_steps, --bf16 never reach train.py" in message


def test_a_script_whose_every_argument_follows_the_comment_is_still_read(tmp_path: Path) -> None:
    """Before, no flag reached the program, lint could not tell the kind and gave up."""
    text = "torchrun --nproc_per_node 8 train.py \\\n  # --resume \\\n  --per_device_train_batch_size 4\n"
    assert [m.split(":")[0] for _, _, m in findings(tmp_path, "run.sh", text, "DR365")] == ["this comment ends the command of line 1, backslash or not (bash reads a comment to the end of the line)"]


def test_a_comment_after_the_last_argument_cuts_nothing(tmp_path: Path) -> None:
    text = "torchrun --nproc_per_node 8 train.py \\\n  --per_device_train_batch_size 4 \\\n  # --flash\necho done\n"
    assert findings(tmp_path, "run.sh", text, "DR365") == []
