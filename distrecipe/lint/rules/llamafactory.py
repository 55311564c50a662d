"""LLaMA-Factory training YAMLs, judged by the fields of its training parser."""

from __future__ import annotations

from collections.abc import Iterator

from distrecipe.engines.llamafactory import MEGATRON, accepted
from distrecipe.engines.tables import key_history, label
from distrecipe.keys import did_you_mean
from distrecipe.lint.rule import Problem
from distrecipe.lint.workspace import Source


def unknown_key(src: Source) -> Iterator[Problem]:
    """A key no dataclass of LLaMA-Factory's training parser has: the run stops at once.

    `llamafactory-cli train` reads the YAML with `HfArgumentParser` over its Model, Data,
    Training (transformers' `Seq2SeqTrainingArguments` and its own), Finetuning and
    Generating arguments, with `allow_extra_keys=False`: "Some keys are not used by the
    HfArgumentParser". A key transformers removed (`fsdp_transformer_layer_cls_to_wrap`,
    `evaluation_strategy`) fails the same way. A file with Megatron-Core keys is read
    through mcore_adapter instead (DR386). A key another LLaMA-Factory release has (added
    later, or removed) is named as such, with the release the project runs.

    Fails: llamafactory
    ```yaml
    model_name_or_path: Qwen/Qwen3-4B
    stage: sft
    finetuning_type: full
    per_device_train_batch_size: 1
    fsdp: full_shard auto_wrap
    fsdp_transformer_layer_cls_to_wrap: Qwen3DecoderLayer
    ```

    Passes: llamafactory
    ```yaml
    model_name_or_path: Qwen/Qwen3-4B
    stage: sft
    finetuning_type: full
    per_device_train_batch_size: 1
    fsdp: full_shard auto_wrap
    fsdp_config: {transformer_layer_cls_to_wrap: [Qwen3DecoderLayer]}
    ```

    Fix: the field the message suggests, or delete the key (`ALLOW_EXTRA_ARGS=1` makes
    LLaMA-Factory skip the check); for a key of another release, run that release.
    """
    if set(map(str, src.data)) & MEGATRON:
        return
    keys = accepted()
    for key in src.data:
        if str(key) not in keys:
            other = key_history("llamafactory", str(key))
            hint = f"; {other}" if other else did_you_mean(str(key), sorted(keys))
            yield Problem((key,), f"{key!r} is no argument of {label('llamafactory')}'s training parser (nor "
                                  f"{label('hf')}'s Seq2SeqTrainingArguments): it refuses the file "
                                  f"(\"Some keys are not used by the HfArgumentParser\"){hint}", key=True)


def megatron_not_judged(src: Source) -> Iterator[Problem]:
    """A LLaMA-Factory YAML for Megatron-Core, whose arguments distrecipe has no table for.

    With `USE_MCA=1`, LLaMA-Factory parses the file with mcore_adapter's TrainingArguments
    instead of transformers' (`hparams/parser.py`); without it, the Megatron keys are
    refused. Lint cannot judge those keys, and says so rather than pass the file as clean.

    Fails: llamafactory
    ```yaml
    model_name_or_path: Qwen/Qwen3-30B-A3B
    stage: sft
    finetuning_type: full
    per_device_train_batch_size: 1
    pipeline_model_parallel_size: 4
    ```

    Passes: llamafactory
    ```yaml
    model_name_or_path: Qwen/Qwen3-30B-A3B
    stage: sft
    finetuning_type: full
    per_device_train_batch_size: 1
    ```

    Fix: nothing to fix; run it with `USE_MCA=1` (suppress with `# distrecipe: ignore[DR386]`).
    """
    found = sorted(set(map(str, src.data)) & MEGATRON)
    if found:
        yield Problem((found[0],), f"Megatron-Core keys ({', '.join(found)}): LLaMA-Factory reads this file "
                                   "through mcore_adapter (USE_MCA=1), whose arguments lint has no table "
                                   "for; its keys are not judged", key=True)
