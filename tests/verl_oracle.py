"""verl as the judge, without GPUs: its config composition, `validate_config`, and
the batch splitting its GPU workers do, all run in one process on CPU.

Importing verl costs ~8 s and a Hydra compose ~0.5 s, so one `VerlJudge` serves a
whole test module. Composition has a full path (Hydra's `compose`, exactly what
`python3 -m verl.trainer.main_ppo OVERRIDES` does) and a fast path (compose the
engine's defaults once, then apply the overrides with Hydra's own override parser
and applier, the last step of `compose`); the judge runs the full path on a share
of the calls and requires the two to agree, so the fast path stays honest.

The worker-side rules are checked by running verl's own functions on a fake rollout
of `data.train_batch_size × rollout.n` rows: the dispatch split over DP ranks
(`chunk_tensordict`), the mini-batch iterator (`make_iterator`) and the micro-batch
split (`prepare_micro_batches`). Only the one-line `mini_batch_size % dp` assertion
of `TrainingWorker.train_mini_batch` is restated here, because that method needs a
live engine.
"""

from __future__ import annotations

import contextlib
import copy
import zlib
from dataclasses import dataclass
from typing import Any

import torch
from hydra import compose, initialize_config_module
from hydra._internal.config_loader_impl import ConfigLoaderImpl
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import DictConfig, OmegaConf
from tensordict import TensorDict
from verl.trainer.ppo.utils import need_critic, need_reference_policy
from verl.utils import tensordict_utils as tu
from verl.utils.config import omega_conf_to_dataclass, validate_config
from verl.utils.torch_dtypes import PrecisionType
from verl.workers.engine.utils import prepare_micro_batches

BASE_OVERRIDES = ["algorithm.adv_estimator=grpo"]
"""GRPO needs no critic model, so validation needs no model files."""


@dataclass(frozen=True)
class WorkerSplit:
    """What verl's workers make of one RL step's rollout."""

    optimizer_steps: int
    micro_batches_per_step: int
    micro_batch_size: int
    data_parallel: int


class VerlJudge:
    def __init__(self, full_every: int = 20) -> None:
        self._stack = contextlib.ExitStack()
        self._stack.enter_context(initialize_config_module("verl.trainer.config", version_base=None))
        self._base = {
            "dp": compose("ppo_trainer", overrides=BASE_OVERRIDES),
            "megatron": compose("ppo_trainer", overrides=[*BASE_OVERRIDES, "model_engine=megatron"]),
        }
        self._parser = OverridesParser.create()
        self._full_every = full_every
        self.calls = 0

    def close(self) -> None:
        self._stack.close()

    def compose(self, lines: list[str]) -> DictConfig:
        """The config verl's entry point would build from `lines` (see module docstring)."""
        self.calls += 1
        group = [line for line in lines if line.startswith("model_engine=")]
        rest = [line for line in lines if not line.startswith("model_engine=")]
        engine = group[0].split("=", 1)[1] if group else "dp"
        cfg = copy.deepcopy(self._base[engine])
        ConfigLoaderImpl._apply_overrides_to_config(self._parser.parse_overrides(rest), cfg)
        # Which calls take the full path depends on the input only, so a failure replays.
        if self.calls == 1 or zlib.crc32("\n".join(lines).encode()) % self._full_every == 0:
            full = compose("ppo_trainer", overrides=[*BASE_OVERRIDES, *lines])
            assert OmegaConf.to_container(full) == OmegaConf.to_container(cfg)
            if engine == "megatron":
                # verl's own Megatron entry config must read the overrides the same way.
                alias = compose("ppo_megatron_trainer", overrides=[*BASE_OVERRIDES, *rest])
                assert OmegaConf.to_container(alias.actor_rollout_ref) == OmegaConf.to_container(
                    cfg.actor_rollout_ref
                )
        return cfg

    @staticmethod
    def validate(cfg: DictConfig) -> None:
        """verl's own pre-flight check (raises AssertionError or ValueError)."""
        validate_config(cfg, need_reference_policy(cfg), need_critic(cfg))

    @staticmethod
    def dtype(name: str) -> str:
        """The torch dtype verl's engines build from a precision name."""
        return str(PrecisionType.to_dtype(name))

    @staticmethod
    def actor(cfg: DictConfig) -> Any:
        """The actor's typed config (FSDPActorConfig / McoreActorConfig) as the workers get it."""
        return omega_conf_to_dataclass(cfg.actor_rollout_ref.actor)

    @classmethod
    def refuses(cls, cfg: DictConfig) -> bool:
        """True when verl's pre-flight check or its workers' batch split would stop the job."""
        try:
            cls.validate(cfg)
            cls.split(cfg)
        except (AssertionError, ValueError):
            return True
        return False

    @classmethod
    def split(cls, cfg: DictConfig, actor: Any = None) -> WorkerSplit:
        """Run verl's worker-side splitting of one RL step; raises where the workers would."""
        actor = actor if actor is not None else cls.actor(cfg)
        n = cfg.actor_rollout_ref.rollout.n
        world = cfg.trainer.nnodes * cfg.trainer.n_gpus_per_node
        if actor.strategy == "megatron":
            meg = actor.megatron
            model_parallel = (
                meg.tensor_model_parallel_size * meg.pipeline_model_parallel_size * meg.context_parallel_size
            )
            assert world % model_parallel == 0, "Megatron's parallel state needs whole DP groups"
            dp = world // model_parallel
        else:
            sp = actor.fsdp_config.ulysses_sequence_parallel_size
            fsdp_size = actor.fsdp_config.fsdp_size
            assert world % sp == 0, "the (dp, sp) device mesh needs whole groups"
            # create_device_mesh: (world // fsdp_size, fsdp_size) must cover the world.
            assert fsdp_size < 0 or fsdp_size >= world or world % fsdp_size == 0
            dp = world // sp
        rows = cfg.data.train_batch_size * n
        rollout = TensorDict({"index": torch.arange(rows)}, batch_size=[rows])
        shard = tu.chunk_tensordict(rollout, dp)[0]
        mini_batch_size = actor.ppo_mini_batch_size * n
        # TrainingWorker.train_mini_batch (engine_workers.py), restated: needs an engine.
        assert mini_batch_size % dp == 0, f"{mini_batch_size=} not divisible by {dp=}"
        steps, micro_counts = 0, set()
        for mini in tu.make_iterator(shard, mini_batch_size // dp, epochs=actor.ppo_epochs):
            tu.assign_non_tensor(
                mini, use_dynamic_bsz=False, micro_batch_size_per_gpu=actor.ppo_micro_batch_size_per_gpu
            )
            micro_batches, _ = prepare_micro_batches(mini)
            steps += 1
            micro_counts.add(len(micro_batches))
        assert len(micro_counts) == 1
        return WorkerSplit(steps, micro_counts.pop(), actor.ppo_micro_batch_size_per_gpu, dp)
