"""Launch commands read from a script: launchers, the program, its flags (`engines/argv`)."""

from __future__ import annotations

from distrecipe.engines.argv import launches, refused_flags, trainer_launch


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
