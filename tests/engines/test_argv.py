"""Launch commands read from a script: launchers, the program, its flags (`engines/argv`)."""

from __future__ import annotations

import pytest

from distrecipe.engines.argv import launches, read_flags, refused_flags, trainer_launch
from distrecipe.errors import LaunchError
from distrecipe.launch.handoff import merge_flags


def test_a_plain_python_command_is_a_launch_of_one_process() -> None:
    (launch,) = launches("CUDA_VISIBLE_DEVICES=0 python3 -u train.py --per_device_train_batch_size 4 args.json\n",
                         "run.sh")
    assert (launch.launcher, launch.program[0].value, launch.world()) == ("python", "train.py", (None, ""))
    assert [w.value for w in launch.configs()] == ["args.json"]
    assert launches("python3 -m verl.trainer.main_ppo data.train_batch_size=8\n", "run.sh") == []


def test_the_arguments_a_comment_cut_off_are_kept_apart() -> None:
    (launch,) = launches("torchrun --nproc_per_node 8 train.py \\\n  --bf16 \\\n  # --x \\\n  --learning_rate 1e-5\n",
                         "run.sh")
    assert list(launch.flags) == ["bf16"]
    assert [w.value for w in launch.unreached] == ["--learning_rate", "1e-5"]
    assert launch.cut is not None and (launch.cut.line, launch.cut.col) == (3, 3)


def test_a_trainer_launch_passes_the_trainer_s_batch_flag_and_no_bare_deepspeed() -> None:
    def first(text: str) -> bool:
        return trainer_launch(launches(text, "run.sh")[0])

    assert first("deepspeed train.py --per_device_train_batch_size 2\n")
    assert first("deepspeed train.py --deepspeed ds.json\n")
    assert not first("deepspeed main.py --per_device_train_batch_size 2 --deepspeed --offload\n")
    assert not first("torchrun ppo.py --batch_size 32 --learning_rate 1e-5\n")


def test_values_hf_argument_parser_refuses_are_named_with_what_the_field_takes() -> None:
    (launch,) = launches("lr=...\ntorchrun t.py --learning_rate $lr --bf16 maybe --max_steps 1.5 --optim adamw_hf "
                         "--warmup_steps $FROM_ENV --gradient_checkpointing\n", "run.sh")
    found = {field: accepts for _, _, field, accepts in refused_flags(launch)}
    assert found.keys() == {"learning_rate", "bf16", "max_steps", "optim"}
    assert (found["learning_rate"], found["max_steps"]) == ("a number", "an integer")
    assert found["optim"].startswith("one of adamw_torch")


@pytest.mark.parametrize(("argv", "flags"), [
    (["--bf16", "--per_device_train_batch_size", "3"], [("bf16", None), ("per_device_train_batch_size", "3")]),
    (["--bf16=no", "--fsdp", "full_shard auto_wrap"], [("bf16", "no"), ("fsdp", "full_shard auto_wrap")]),
    # argparse refuses a value for --learning_rate here; the old hf_argv.find_flags took "--bf16" as it
    # and never saw --bf16
    (["--learning_rate", "--bf16"], [("learning_rate", None), ("bf16", None)]),
    (["--max_grad_norm", "-1", "args.json"], [("max_grad_norm", "-1")]),  # a negative number is a value
    (["--per-device-train-batch-size", "4", "--"], [("per-device-train-batch-size", "4")]),
])
def test_a_program_argv_is_read_as_argparse_reads_it(argv: list[str], flags: list[tuple[str, str | None]]) -> None:
    assert [(flag.name, flag.value) for flag in read_flags(argv)] == flags


def test_a_flags_value_is_found_where_it_is_written() -> None:
    found = read_flags(["train.py", "--a=1", "--b", None, "--c"])  # None: a word only the shell knows
    assert [(f.name, f.at, f.value_at, f.value) for f in found] == [
        ("a", 1, 1, "1"), ("b", 2, 3, None), ("c", 4, None, None)]
    (launch,) = launches("python train.py --a=1 --b $X --c\n", "run.sh")
    assert {name: (value.text if value else None) for name, (_, value) in launch.flags.items()} == {
        "a": "--a=1", "b": "$X", "c": None}


def test_launch_reads_a_users_trainer_flags_with_the_same_reader() -> None:
    """A user's `--per-device-train-batch-size 4` sets the field HfArgumentParser calls
    per_device_train_batch_size: the old reader looked for the underscored name only, so
    the recipe's `--per_device_train_batch_size 2` was appended and won unseen."""
    decided = {"per_device_train_batch_size": 2, "bf16": True}
    keys = {"per_device_train_batch_size": "batch.micro"}
    with pytest.raises(LaunchError, match="--per_device_train_batch_size 4 contradicts the recipe's 2"):
        merge_flags(decided, ["--per-device-train-batch-size", "4"], allow_override=False, keys=keys)
    merged = merge_flags(decided, ["--bf16", "--per-device-train-batch-size=2"], allow_override=False, keys=keys)
    assert merged.args == ("--bf16", "--per-device-train-batch-size=2")  # both agree: nothing added
    with pytest.raises(LaunchError, match="--per_device_train_batch_size true contradicts"):
        merge_flags(decided, ["--per_device_train_batch_size", "--bf16"], allow_override=False, keys=keys)
