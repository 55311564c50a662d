"""The resolved job: the declared `Recipe` and what resolution adds to it, nothing copied.

A `Plan` holds the recipe as written (`plan.recipe`) beside the values resolution
decides: the parallel dimensions (`ParallelDims`, as torchtitan keeps its
`ParallelDims` beside its config), the solved batch, the stage, the launcher, the
DeepSpeed buckets and each value's provenance. A field of the recipe is read from the
recipe, so a field added to the format reaches every command without a copy to forget,
and a resolved value never says `"auto"`. A variant (advice, `--compare`, `--search`)
is a changed recipe resolved again (`translator.resolve.variant`), never an edited Plan.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, is_dataclass
from types import UnionType
from typing import Any, get_args, get_origin, get_type_hints

from distrecipe.errors import Position, RecipeError
from distrecipe.recipe import (
    PRECISION_BYTES,
    Backend,
    Precision,
    Recipe,
    Strategy,
    name_from_file,
    recipe_values,
)


def model_parallel(tensor: int, pipeline: int, sequence: int) -> int:
    """Ranks one model replica spans: tensor × pipeline × sequence (Megatron's context
    parallel, DeepSpeed's and verl's Ulysses). The world divided by it is data parallel;
    a recipe, a Plan and a native config's degrees all meet here."""
    return tensor * pipeline * sequence


def data_parallel(world: int, replica: int) -> int | None:
    """Data-parallel ranks: the world divided by the model-parallel size; None when it
    does not divide, which every engine refuses."""
    return world // replica if world % replica == 0 else None


@dataclass(frozen=True, kw_only=True, slots=True)
class ParallelDims:
    """How the world's ranks split: nodes × gpus_per_node = tensor × pipeline × sequence × dp.

    `shard_group` is the ranks one shard of the model state spans (`dp` unless sharding
    is hybrid); `virtual_stages` the model chunks each pipeline rank holds.
    """

    nodes: int
    gpus_per_node: int
    tensor: int = 1
    pipeline: int = 1
    sequence: int = 1
    virtual_stages: int = 1
    dp: int
    shard_group: int

    @classmethod
    def from_recipe(cls, recipe: Recipe, gpus_per_node: int, shard_group: int | None = None) -> ParallelDims:
        """The recipe's degrees on `gpus_per_node` ranks per node; a world the model-parallel
        degrees do not divide is refused, printing every factor."""
        nodes, par = recipe.cluster.nodes, recipe.parallel
        world = nodes * gpus_per_node
        replica = model_parallel(par.tensor, par.pipeline, par.sequence)
        dp = data_parallel(world, replica)
        if dp is None:
            raise RecipeError(
                f"the world does not split into data-parallel replicas: nodes({nodes}) × "
                f"gpus_per_node({gpus_per_node}) = {world} ranks; tensor({par.tensor}) × "
                f"pipeline({par.pipeline}) × sequence({par.sequence}) = {replica}, "
                f"and {world} / {replica} is not an integer",
                recipe.at("parallel.tensor", "parallel.pipeline", "parallel.sequence", "parallel"),
            )
        return cls(nodes=nodes, gpus_per_node=gpus_per_node, tensor=par.tensor, pipeline=par.pipeline,
                   sequence=par.sequence, virtual_stages=par.virtual_stages, dp=dp,
                   shard_group=dp if shard_group is None else shard_group)

    @property
    def world(self) -> int:
        """Total ranks over all nodes."""
        return self.nodes * self.gpus_per_node

    @property
    def model_parallel(self) -> int:
        """Ranks one model replica spans; `dp` is `world` over it."""
        return model_parallel(self.tensor, self.pipeline, self.sequence)

    @property
    def model_shards(self) -> int:
        """Ranks one replica's parameters are divided over: tensor × pipeline. Sequence-parallel
        ranks each hold the whole of their layers, splitting only the tokens."""
        return self.tensor * self.pipeline

    @property
    def hybrid(self) -> bool:
        """True when shards span fewer ranks than the DP world (HSDP / ZeRO++ hpZ)."""
        return self.shard_group < self.dp

    @property
    def replicas(self) -> int:
        """How many copies of each shard exist (the `replicate` degree of HSDP)."""
        return self.dp // self.shard_group


@dataclass(frozen=True, kw_only=True, slots=True)
class ResolvedBatch:
    """`micro × accumulation × dp = global_`, every number known.

    With token-packed micro-batches (`batch.micro_tokens`) `micro` is global / DP, one
    micro-batch's worth of samples as an upper bound, and accumulation 1.
    """

    micro: int
    accumulation: int
    global_: int


@dataclass(frozen=True, kw_only=True, slots=True)
class Buckets:
    """DeepSpeed's size knobs, resolved from the hidden size the way HF's Trainer does.

    `None` means "leave DeepSpeed's own default" (the hidden size was unknown).
    """

    reduce_bucket_size: int | None
    stage3_prefetch_bucket_size: int | None
    stage3_param_persistence_threshold: int | None


@dataclass(frozen=True, kw_only=True)
class Plan:
    """A resolved recipe: the one input of every emitter and view.

    The seed's vocabulary: Ψ is `recipe.model.params`, N is `dims.dp`.
    """

    recipe: Recipe
    dims: ParallelDims
    resolved_batch: ResolvedBatch | None
    """The solved batch; None where the training script decides it (`script_batch`)."""
    stage: int
    """The ZeRO stage, the strategy's natural one where the recipe gives none."""
    fsdp_version: int | None = None
    """Which torch FSDP `strategy: fsdp` runs (1 or 2): the recipe's `fsdp_version`, else what
    its native keys say, else 2; None under any other strategy."""
    backend: Backend
    """The launcher: the recipe's `launch.backend`, or the strategy's natural one."""
    precision: Precision
    """The training dtype; where the recipe leaves it to the HF Trainer (`auto`), the one
    `plan` assumes (its provenance says so)."""
    gpu_memory: int | None
    """Bytes per accelerator: the recipe's `cluster.gpu_memory`, else its `cluster.gpu`'s."""
    buckets: Buckets
    provenance: dict[str, str] = field(default_factory=dict)
    """Dotted key → how its value was obtained, e.g. "256 / (2 × 32), from global, micro, DP"."""

    @property
    def precision_bytes(self) -> int:
        return PRECISION_BYTES[self.precision]

    @property
    def reshard_after_forward(self) -> bool:
        """FSDP2 frees the gathered parameters after forward (and gathers again for
        backward) exactly at stage 3: that is what ZeRO-3 means in FSDP's words. The
        importers' inverse is `distrecipe.engines.stage_of_reshard`."""
        return self.stage == 3

    @property
    def gradient_bytes(self) -> int:
        """Bytes per gradient element (see `gradient_bytes`)."""
        return gradient_bytes(self.recipe.strategy, self.precision)

    @property
    def batch(self) -> ResolvedBatch:
        """The solved batch, or a refusal where the training script decides it: what needs
        the numbers (the plan, raw DeepSpeed, verl, launch) asks the user for them."""
        if self.resolved_batch is None:
            raise RecipeError(
                "the batch is the training script's (batch.micro and batch.global are auto: the HF Trainer's "
                "--per_device_train_batch_size and --gradient_accumulation_steps decide it), and this needs "
                "its numbers: --set batch.micro=N (and --set batch.accumulation=N unless it is 1)",
                self.recipe.at("batch.micro", "batch.global", "batch"))
        return self.resolved_batch

    @property
    def script_batch(self) -> bool:
        """The training script decides the batch: the files leave it to the program."""
        return self.resolved_batch is None

    @property
    def script_accumulation(self) -> int | None:
        """Within a script's batch, the accumulation the recipe still states (an Accelerate
        config's `gradient_accumulation_steps`); None where the script decides it too."""
        stated = self.recipe.batch.accumulation
        return stated if self.script_batch and isinstance(stated, int) else None

    def explain(self) -> list[tuple[str, object, str]]:
        """Every resolved value with where it came from, in a stable order."""
        values = plan_values(self)
        return [(key, values[key], self.provenance.get(key, "recipe")) for key in values]

    def at(self, *keys: str) -> Position:
        """Where the first of `keys` was written in the recipe, else the recipe's start."""
        return self.recipe.at(*keys)


def gradient_bytes(strategy: Strategy, precision: Precision) -> int:
    """Bytes per gradient element: Megatron keeps fp32 gradients, the rest the training dtype."""
    return 4 if strategy == "megatron" else PRECISION_BYTES[precision]


def derived_name_note(plan: Plan) -> str | None:
    """The note for a name `resolve` took from the recipe file's name and had to make a
    slug (compile and launch print it; `resolve` shows it as the name's provenance)."""
    note = name_from_file(plan.recipe.source)[1]
    return note if note is not None and plan.provenance.get("name") == note else None


BUCKET_KEYS = ("zero.reduce_bucket_size", "zero.stage3_prefetch_bucket_size",
               "zero.stage3_param_persistence_threshold")
RESOLVED_ONLY = ("cluster.world", "parallel.dp", *BUCKET_KEYS)
"""Keys a Plan has that no recipe writes: derived, never stated."""


def plan_values(plan: Plan) -> dict[str, object]:
    """Every value of the job in the recipe's dotted vocabulary, the resolved value where
    resolution decides one (`batch.micro`, `stage`, `launch.backend`, ...), walked from
    the recipe's fields, so a field added to the format is listed without touching this."""
    values = recipe_values(plan.recipe)
    dims, batch = plan.dims, plan.resolved_batch
    resolved: dict[str, object] = {
        "stage": plan.stage, "fsdp_version": plan.fsdp_version, "precision": plan.precision,
        "launch.backend": plan.backend,
        "cluster.gpus_per_node": dims.gpus_per_node, "cluster.gpu_memory": plan.gpu_memory,
        "parallel.shard_group": dims.shard_group,
    }
    if batch is not None:
        resolved |= {"batch.micro": batch.micro, "batch.accumulation": batch.accumulation,
                     "batch.global": batch.global_}
    else:  # the script's: not a number the job model knows, and never "auto" in a resolved value
        resolved |= dict.fromkeys(("batch.micro", "batch.global"))
        resolved["batch.accumulation"] = plan.script_accumulation  # what the recipe still states
    out: dict[str, object] = {}
    for key, value in values.items():
        out[key] = resolved.get(key, value)
        if key == "cluster.gpus_per_node":
            out["cluster.world"] = dims.world
        elif key == "parallel.shard_group":
            out["parallel.dp"] = dims.dp
    buckets = plan.buckets
    sizes = (buckets.reduce_bucket_size, buckets.stage3_prefetch_bucket_size,
             buckets.stage3_param_persistence_threshold)
    out.update(zip(BUCKET_KEYS, sizes, strict=True))
    return out


def plan_dict(plan: Plan) -> dict[str, Any]:
    """The Plan as plain data (`plan.json`): every field, the recipe without its positions
    (they point into a file the run directory does not keep), plus the derived world."""
    data = asdict(plan)
    del data["recipe"]["where"]
    data["world"] = plan.dims.world
    return data


def plan_from_dict(data: dict[str, Any]) -> Plan:
    """The Plan `plan_dict` made, rebuilt field by field from the dataclasses' own types."""
    plan: Plan = _build(Plan, {key: value for key, value in data.items() if key != "world"})
    return plan


def _build(cls: Any, data: dict[str, Any]) -> Any:
    hints = get_type_hints(cls)
    return cls(**{name: _value(hints[name], value) for name, value in data.items()})


def _value(hint: Any, value: Any) -> Any:
    if value is None:
        return None
    options = [arg for arg in get_args(hint) if arg is not type(None)] \
        if isinstance(hint, UnionType) else [hint]
    for option in options:
        if is_dataclass(option) and isinstance(value, dict):
            return _build(option, value)
        if get_origin(option) is tuple and isinstance(value, list):
            return tuple(value)
    return value
