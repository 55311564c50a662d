"""LLaMA-Factory's training YAML as facts: the HfArgumentParser fields it accepts.

`llamafactory-cli train FILE.yaml` parses the file with `HfArgumentParser` over its
Model, Data, Training, Finetuning and Generating arguments (`hparams/parser.py`,
`_TRAIN_ARGS`, `allow_extra_keys=False` unless `ALLOW_EXTRA_ARGS` is set), so a key none
of them has stops the run. Its `TrainingArguments` extends transformers'
`Seq2SeqTrainingArguments`: batch, precision and `deepspeed:` are the Trainer's own
names, and the ds_config is opened from where the command runs (the repository's root).
LLaMA-Factory's own fields are in `tables/llamafactory/RELEASE.json` (from its sources,
see `scripts/schema_tables.py`); the Trainer's come from the judging transformers table.
"""

from __future__ import annotations

from functools import cache

from distrecipe.engines.tables import release, table_of

STAGES = frozenset({"pt", "sft", "rm", "ppo", "dpo", "kto"})
"""`FinetuningArguments.stage`'s choices: a `stage:` with one of them marks the file."""
MARKERS = frozenset({"finetuning_type", "template"})
"""Keys only LLaMA-Factory's YAML writes."""

MEGATRON = frozenset({"tensor_model_parallel_size", "pipeline_model_parallel_size",
                      "expert_model_parallel_size", "virtual_pipeline_model_parallel_size",
                      "context_parallel_size", "use_distributed_optimizer", "recompute_granularity"})
"""Megatron-Core argument names: a file holding them is read with `USE_MCA=1` through
mcore_adapter's TrainingArguments (`parser.py`), whose fields no table here has."""

V1 = (frozenset({"dist_config"}), frozenset({"model", "train_dataset"}))
"""Key sets of LLaMA-Factory's v1 format, which its v1 trainer reads (not HfArgumentParser)."""


def is_llamafactory(data: dict[str, object]) -> bool:
    keys = set(data)
    stage = data.get("stage")
    trains = isinstance(stage, str) and stage in STAGES
    return bool(keys & MARKERS) or (trains and "model_name_or_path" in keys)


def is_v1(keys: set[str]) -> bool:
    return any(marker <= keys for marker in V1)


def accepted() -> frozenset[str]:
    """Every key the training parser takes: the judging LLaMA-Factory release's fields and
    the judging transformers' `Seq2SeqTrainingArguments`."""
    return _accepted(release("llamafactory").table, release("hf").table)


@cache
def _accepted(llamafactory: str, transformers: str) -> frozenset[str]:
    hf = table_of("hf", transformers)
    return (frozenset(table_of("llamafactory", llamafactory)["keys"]) | frozenset(hf["training_arguments"])
            | frozenset(hf.get("seq2seq_arguments", ())))
