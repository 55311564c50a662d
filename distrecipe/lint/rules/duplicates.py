"""A key written twice in one YAML mapping, judged as the file's own reader reads it.

PyYAML keeps the last value silently; OmegaConf (verl, LLaMA-Factory), kubectl and the
recipe loader refuse the file. Lint reads the file with the last value kept and says which
(`engines.native.DUPLICATE_KEYS`), so the rest of the file is judged as its reader sees it.
"""

from __future__ import annotations

from collections.abc import Iterator

from distrecipe.engines.native import DUPLICATE_KEYS
from distrecipe.keys import dotted
from distrecipe.lint.rule import Problem
from distrecipe.lint.workspace import Source
from distrecipe.source import Duplicate


def duplicate_key(src: Source) -> Iterator[Problem]:
    """A YAML key written twice in one mapping: the reader keeps the last value, silently.

    `yaml.safe_load`, which Accelerate, the HF Trainer's `parse_yaml_file`, Axolotl and
    SkyPilot read their YAML with, builds a dict: the second `num_processes` replaces the
    first without a word, so the value a reviewer reads at the top is not the one that
    runs. Lint judges the rest of the file with the last value, as the job runs it (like
    yamllint's `key-duplicates`).

    Fails: accelerate
    ```yaml
    distributed_type: MULTI_GPU
    mixed_precision: bf16
    num_machines: 1
    num_processes: 8
    mixed_precision: fp16
    ```

    Passes: accelerate
    ```yaml
    distributed_type: MULTI_GPU
    mixed_precision: bf16
    num_machines: 1
    num_processes: 8
    ```

    Fix: keep one of the two, the value meant.
    """
    reader, refusal = DUPLICATE_KEYS.get(src.kind, ("", ""))
    if refusal is not None or src.within:
        return
    for duplicate in src.doc.duplicates:
        yield Problem(duplicate.path, f"{_written(duplicate)}: {reader} reads the last value",
                      where=duplicate.at)


def duplicate_key_refused(src: Source) -> Iterator[Problem]:
    """A YAML key written twice in one mapping, which the file's reader refuses.

    OmegaConf, which verl (through Hydra) and LLaMA-Factory load their YAML with, raises
    "found duplicate key" at start-up; kubectl refuses a manifest ("mapping key already
    defined"), DeepSpeed a config ("Duplicate keys in DeepSpeed config"), and distrecipe a
    recipe. The job does not start. Lint judges the rest of the file with the last value.

    Fails: verl
    ```yaml
    data:
      train_batch_size: 64
      train_batch_size: 128
    actor_rollout_ref:
      actor:
        ppo_mini_batch_size: 16
        ppo_micro_batch_size_per_gpu: 2
    trainer:
      n_gpus_per_node: 8
    ```

    Passes: verl
    ```yaml
    data:
      train_batch_size: 128
    actor_rollout_ref:
      actor:
        ppo_mini_batch_size: 16
        ppo_micro_batch_size_per_gpu: 2
    trainer:
      n_gpus_per_node: 8
    ```

    Fix: keep one of the two, the value meant.
    """
    reader, refusal = DUPLICATE_KEYS.get(src.kind, ("", None))
    if refusal is None or src.within:
        return
    for duplicate in src.doc.duplicates:
        said = refusal.format(key=duplicate.path[-1], line=duplicate.first.line)
        yield Problem(duplicate.path, f"{_written(duplicate)}: {reader} refuses the file: {said}",
                      where=duplicate.at)


def _written(duplicate: Duplicate) -> str:
    return f"duplicate key {dotted(duplicate.path)!r} (line {duplicate.first.line})"
