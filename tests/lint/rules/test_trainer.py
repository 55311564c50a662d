"""DR363 (a removed TrainingArguments flag in a script) and DR364 (a value transformers refuses)."""

from __future__ import annotations

from pathlib import Path

from tests.lint.rules.conftest import findings

SCRIPT = "torchrun --nproc_per_node 8 train.py \\\n  --per_device_train_batch_size 4 \\\n  {flag}\n"


def test_a_removed_flag_is_an_error_at_the_flag_naming_what_replaces_it(tmp_path: Path) -> None:
    (line, col, message), = findings(tmp_path, "run.sh", SCRIPT.format(flag="--evaluation_strategy steps"), "DR363")
    assert (line, col) == (3, 3)
    assert message.startswith("--evaluation_strategy is no TrainingArguments field in transformers 5.")
    assert "use --eval_strategy" in message and "HfArgumentParser refuses it" in message


def test_a_pinned_release_that_has_the_field_is_not_reported(tmp_path: Path) -> None:
    text = SCRIPT.format(flag="--evaluation_strategy steps --overwrite_output_dir")
    assert findings(tmp_path, "run.sh", text, "DR363", transformers="4.50") == []
    (_, _, message), = findings(tmp_path, "run.sh", text, "DR363", transformers="4.51")
    assert message.startswith("--evaluation_strategy is no TrainingArguments field in transformers 4.51.0 (removed "
                              "in transformers 4.51.0 (last in 4.50.0); the project runs 4.51 ([tool.distrecipe] "
                              "transformers); use --eval_strategy)")


def test_a_program_that_is_no_trainer_is_not_judged(tmp_path: Path) -> None:
    text = "deepspeed main.py --per_device_train_batch_size 4 --deepspeed --evaluation_strategy steps\n"
    assert findings(tmp_path, "run.sh", text, "DR363") == []


def test_an_enum_value_in_a_json_and_a_placeholder_in_a_script(tmp_path: Path) -> None:
    (line, col, message), = findings(tmp_path, "args.json",
                                     '{"output_dir": "o",\n "optim": "adamw_hf"}', "DR364")
    assert (line, col) == (2, 11) and "did you mean 'adamw_torch'?" in message
    (line, col, message), = findings(tmp_path, "run.sh", "lr=...\n" + SCRIPT.format(flag="--learning_rate $lr"),
                                     "DR364")
    assert (line, col, message.split(":")[0]) == (4, 19, "--learning_rate '...'")
