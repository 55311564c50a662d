"""Axolotl training YAMLs, judged by Axolotl's own schema (`tables/axolotl/RELEASE.json`)."""

from __future__ import annotations

from collections.abc import Iterator
from math import prod

from distrecipe.engines.axolotl import PARALLEL, refusal
from distrecipe.engines.tables import is_comment_key, key_history, label, table
from distrecipe.keys import CLOSE, did_you_mean, integer
from distrecipe.lint.rule import Problem
from distrecipe.lint.workspace import Source


def _unknown(src: Source) -> Iterator[tuple[str, str, str]]:
    """Each top-level key `AxolotlInputConfig` lacks, with its near-certain correction, or
    (no correction then: not a misspelling) where another release's table has it, which."""
    keys = table("axolotl")["keys"]
    for key in src.data:
        if str(key) not in keys and not is_comment_key(key):
            other = key_history("axolotl", str(key))
            close = "" if other else did_you_mean(str(key), sorted(keys), CLOSE)
            yield str(key), close, f"; {other}" if other else ""


def unknown_key(src: Source) -> Iterator[Problem]:
    """A key Axolotl's config model does not have: dropped without a word.

    Axolotl validates the YAML with its pydantic model `AxolotlInputConfig` and keeps
    only what the model declares (`validate_config` returns its `model_dump`), so an
    unknown key has no effect. A plugin (`plugins:`) adds keys of its own that no table
    here has, so with plugins listed only misspellings (DR381) are reported. A key another
    Axolotl release has (added later, or removed) is named as such, with the release the
    project runs, and never taken for a misspelling.

    Fails: axolotl
    ```yaml
    base_model: meta-llama/Llama-3.2-1B
    micro_batch_size: 2
    num_epochs: 1
    learning_rate: 2.0e-5
    save_best_checkpoint: true
    ```

    Passes: axolotl
    ```yaml
    base_model: meta-llama/Llama-3.2-1B
    micro_batch_size: 2
    num_epochs: 1
    learning_rate: 2.0e-5
    ```

    Fix: delete the key, or the one it was meant as (`axolotl` documents every key); for
    a key of another release, run that release.
    """
    if src.data.get("plugins"):
        return
    for key, close, other in _unknown(src):
        if not close:
            hint = other or did_you_mean(key, sorted(table("axolotl")["keys"]))
            yield Problem((key,), f"{key!r} is not a key of {label('axolotl')}'s config: dropped without "
                                  f"a word{hint}", key=True)


def misspelt_key(src: Source) -> Iterator[Problem]:
    """A misspelt Axolotl key: dropped, so the setting never applies.

    Axolotl keeps only the keys its config model declares; a near-certain misspelling of
    one (difflib's similarity of at least 0.85) is dropped and the key it meant keeps its
    default: `gradient_accumulation_step: 8` trains with accumulation 1. A key another
    Axolotl release has is no misspelling (`fp8_config` on 0.18.0 is 0.19.0's, not a
    misspelt `fsdp_config`): DR380 names its release.

    Fails: axolotl
    ```yaml
    base_model: meta-llama/Llama-3.2-1B
    micro_batch_size: 2
    gradient_accumulation_step: 8
    num_epochs: 1
    learning_rate: 2.0e-5
    ```

    Passes: axolotl
    ```yaml
    base_model: meta-llama/Llama-3.2-1B
    micro_batch_size: 2
    gradient_accumulation_steps: 8
    num_epochs: 1
    learning_rate: 2.0e-5
    ```

    Fix: the spelling in the message.
    """
    for key, close, _ in _unknown(src):
        if close:
            yield Problem((key,), f"{key!r} is not a key of {label('axolotl')}'s config: dropped, so the "
                                  f"setting never applies{close}", key=True)


def wrong_type(src: Source) -> Iterator[Problem]:
    """A value Axolotl's config model refuses: the run stops before it starts.

    `AxolotlInputConfig` is a pydantic model: a value its field's type does not take
    (after pydantic's conversions: `"5"` is an integer, `0.5` is not) fails validation
    ("1 validation error for AxolotlInputConfig") when `axolotl train` loads the file.
    The types are read from Axolotl's own annotations (`warmup_steps: int | None`).

    Fails: axolotl
    ```yaml
    base_model: meta-llama/Llama-3.2-1B
    micro_batch_size: 2
    num_epochs: 1
    learning_rate: 2.0e-5
    warmup_steps: 0.1
    ```

    Passes: axolotl
    ```yaml
    base_model: meta-llama/Llama-3.2-1B
    micro_batch_size: 2
    num_epochs: 1
    learning_rate: 2.0e-5
    warmup_ratio: 0.1
    ```

    Fix: a value of the type the message names (`warmup_ratio` for a fraction of the steps).
    """
    keys = table("axolotl")["keys"]
    for key, value in src.data.items():
        entry = keys.get(str(key))
        why = refusal(value, entry) if entry is not None else None
        if why is not None:
            yield Problem((key,), f"{key} is {value!r}, {why} ({entry['annotation']} in {label('axolotl')}): "
                                  "Axolotl refuses the config when it loads it")


def parallelism_size(src: Source) -> Iterator[Problem]:
    """Axolotl's parallel degrees do not multiply to the world the job runs on.

    Axolotl hands `dp_shard_size`, `dp_replicate_size`, `tensor_parallel_size`,
    `context_parallel_size` (and the expert-parallel plugin's `expert_parallel_size`) to
    Accelerate's `ParallelismConfig`, which refuses a mesh whose product is not the
    number of processes; an unstated `dp_shard_size` takes what is left, which must be a
    whole number.

    Fails: axolotl --world 8
    ```yaml
    base_model: Qwen/Qwen3-8B
    micro_batch_size: 1
    num_epochs: 1
    learning_rate: 2.0e-5
    dp_shard_size: 2
    tensor_parallel_size: 2
    context_parallel_size: 3
    ```

    Passes: axolotl --world 8
    ```yaml
    base_model: Qwen/Qwen3-8B
    micro_batch_size: 1
    num_epochs: 1
    learning_rate: 2.0e-5
    dp_shard_size: 2
    tensor_parallel_size: 2
    context_parallel_size: 2
    ```

    Fix: degrees whose product is the world (`lint --world N` for the world you launch).
    """
    if src.ranks is None:
        return
    degrees = {key: integer(src.get(key)) for key in PARALLEL if src.get(key) is not None}
    if not degrees or any(value is None or value < 1 for value in degrees.values()):
        return
    product = prod(value for value in degrees.values() if value is not None)
    factors = " × ".join(f"{key} {value}" for key, value in degrees.items())
    at = (next(iter(degrees)),)
    if "dp_shard_size" in degrees and product != src.ranks:
        yield Problem(at, f"{factors} = {product}, but the world is {src.world}: Accelerate's "
                          "ParallelismConfig refuses the mesh")
    elif "dp_shard_size" not in degrees and src.ranks % product:
        yield Problem(at, f"{factors} = {product} does not divide the world {src.world}: no whole "
                          "dp_shard_size is left, and Accelerate's ParallelismConfig refuses the mesh")
