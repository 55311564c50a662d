"""OpenRLHF command lines in launch scripts, judged by the entry module's own parser and
the DeepSpeed batch its strategy builds."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from distrecipe.engines.openrlhf import (
    GROUP_ESTIMATORS,
    NAMES,
    DsBatch,
    Entry,
    ds_violation,
    entry,
    is_command,
    judging,
    option_history,
)
from distrecipe.keys import did_you_mean
from distrecipe.lint.rule import Problem
from distrecipe.lint.workspace import Source


def _command(src: Source) -> tuple[str, dict[str, Any], Entry | None]:
    """The entry module, its arguments and its parser; an empty module for a document that
    is no OpenRLHF command line (a file linted with `--kind openrlhf`)."""
    if not is_command(src.data):
        return "", {}, None
    module = next(iter(src.data))
    return module, src.data[module], entry(module)


def unknown_option(src: Source) -> Iterator[Problem]:
    """An option the OpenRLHF entry's parser does not have: it exits before Ray starts.

    Each `openrlhf.cli.train_*` module parses its command line with `argparse`
    (`parse_args`), which refuses an unrecognized option (a unique prefix of one is
    taken for it). OpenRLHF 0.10.2 renamed every option into groups
    (`--micro_train_batch_size` → `--train.micro_batch_size`, `--actor_num_gpus_per_node`
    → `--actor.num_gpus_per_node`): a script written for one release is refused by the
    other, and the message names the release and the new name.

    Fails: openrlhf
    ```sh
    python3 -m openrlhf.cli.train_ppo_ray --train.batch_size 128 --train.micro_batch_size 4 \\
        --actor.num_gpus_per_node 8 --rollout.samples_per_prompt 4
    ```

    Passes: openrlhf
    ```sh
    python3 -m openrlhf.cli.train_ppo_ray --train.batch_size 128 --train.micro_batch_size 4 \\
        --actor.num_gpus_per_node 8 --rollout.n_samples_per_prompt 4
    ```

    Fix: the option the message names; for a script of another release, run that release
    (`--engine-version openrlhf=RELEASE`).
    """
    module, arguments, parser = _command(src)
    if not module:
        yield Problem((), "no OpenRLHF command line here (`python -m openrlhf.cli.train_*` with its options)")
        return
    if parser is None:
        yield Problem((module,), f"{module} is no entry module of {judging()} (its entries: "
                                 f"{', '.join(sorted(_entries()))})")
        return
    for written in arguments:
        if parser.resolve(written) is not None:
            continue
        found = option_history(module, written)
        if found is not None:
            said, new = found
            hint = f"; {said}" + (f"; now {new}" if new else "")
        else:
            hint = did_you_mean(written, sorted(parser.options))
        yield Problem((module, written), f"{written} is no option of {judging()}'s {module}: argparse exits "
                                         f"(\"unrecognized arguments: {written}\"){hint}", key=True)


def _entries() -> list[str]:
    from distrecipe.engines.openrlhf import entries

    return sorted(entries())


def value_refused(src: Source) -> Iterator[Problem]:
    """A value the entry's parser refuses: argparse exits before Ray starts.

    Not a number where the option converts with `int` or `float`, or a value outside
    its `choices`.

    Fails: openrlhf
    ```sh
    python3 -m openrlhf.cli.train_ppo_ray --train.batch_size 12.8 \\
        --actor.num_gpus_per_node 8 --train.micro_batch_size 2
    ```

    Passes: openrlhf
    ```sh
    python3 -m openrlhf.cli.train_ppo_ray --train.batch_size 128 \\
        --actor.num_gpus_per_node 8 --train.micro_batch_size 2
    ```

    Fix: a value of the option's type, or one of its choices.
    """
    module, arguments, parser = _command(src)
    if parser is None:
        return
    for written, value in arguments.items():
        option = parser.resolve(written)
        if option is None or not isinstance(value, str):
            continue
        found = parser.options[option]
        kind = found.get("type")
        convert = {"int": int, "float": float}.get(str(kind))
        converted: Any = value
        if convert is not None:
            try:
                converted = convert(value)
            except ValueError:
                yield Problem((module, written),
                              f"{written} {value!r}: argparse refuses it "
                              f"(\"invalid {kind} value: {value!r}\"; {judging()})")
                continue
        choices = found.get("choices")
        if choices and converted not in choices:
            yield Problem((module, written), f"{written} {value!r}: argparse refuses it (\"invalid choice\"; "
                                             f"{judging()} takes {', '.join(map(str, choices))})")


def _number(value: object) -> int | None:
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            return None
    return None


def batch(src: Source) -> Iterator[Problem]:
    """A batch DeepSpeed refuses inside OpenRLHF's actor or critic workers, after start-up.

    The assertion comes after Ray, vLLM and the models have started.

    OpenRLHF writes `train_batch_size` = B × ring × TP and `train_micro_batch_size_per_gpu`
    = m into the ds_config and derives the accumulation as B × ring × TP // m // N, with N
    = the group's `num_nodes × num_gpus_per_node`; DeepSpeed then asserts B × ring × TP =
    m × accumulation × N ("256 != 2 * 18 * 7"). The critic (GAE) is checked at its own
    world. The rollout makes `rollout_batch_size × n_samples_per_prompt` samples in
    micro-batches of `micro_rollout_batch_size`, which must be at least the actor's data
    parallel ranks (train_ppo_ray's own assertion).

    Fails: openrlhf
    ```sh
    python3 -m openrlhf.cli.train_ppo_ray --train.batch_size 256 --train.micro_batch_size 2 \\
        --actor.num_nodes 1 --actor.num_gpus_per_node 7 --critic.num_gpus_per_node 7 \\
        --rollout.batch_size 256 --rollout.n_samples_per_prompt 4
    ```

    Passes: openrlhf
    ```sh
    python3 -m openrlhf.cli.train_ppo_ray --train.batch_size 256 --train.micro_batch_size 2 \\
        --actor.num_nodes 1 --actor.num_gpus_per_node 8 --critic.num_gpus_per_node 8 \\
        --rollout.batch_size 256 --rollout.n_samples_per_prompt 4
    ```

    Options the script leaves to a variable are not judged; an option not given takes the
    parser's default (`--actor.num_gpus_per_node` 8).

    Fix: the message names every factor and the nearest valid train batch.
    """
    module, arguments, parser = _command(src)
    if parser is None or module != "openrlhf.cli.train_ppo_ray":
        return
    values: dict[str, tuple[Any, str | None]] = {}
    for quantity in NAMES:
        dest = parser.dest(quantity)
        if dest is None:
            continue
        written = next((w for w in arguments
                        if (o := parser.resolve(w)) and parser.options[o]["dest"] == dest), None)
        values[quantity] = (arguments[written] if written is not None else parser.default(dest), written)

    def number(quantity: str) -> int | None:
        value, written = values.get(quantity, (None, None))
        if written is None:
            return value if isinstance(value, int) and not isinstance(value, bool) else None
        return _number(value)

    def at(*quantities: str) -> tuple[str, ...]:
        for quantity in quantities:
            written = values.get(quantity, (None, None))[1]
            if written is not None:
                return (module, written)
        return (module,)

    if values.get("dynamic_batch", (False, None))[0] not in (False, None):
        return  # dynamic batches: micro 1, accumulation 1, DeepSpeed's check does not apply
    train, micro = number("train_batch"), number("micro_train_batch")
    ring, tp = number("ring") or 1, number("tp") or 1
    groups = [("actor", "actor_nodes", "actor_gpus")]
    estimator = values.get("estimator", (None, None))[0]
    if estimator == "gae":
        groups.append(("critic", "critic_nodes", "critic_gpus"))
    for who, nodes_q, gpus_q in groups:
        nodes, gpus = number(nodes_q), number(gpus_q)
        if None in (train, micro, nodes, gpus):
            continue
        assert train is not None and micro is not None and nodes is not None and gpus is not None
        said = f"{who} num_nodes {nodes} × num_gpus_per_node {gpus}"
        message = ds_violation(DsBatch(who, train, micro, nodes * gpus, said, ring, tp))
        if message:
            yield Problem(at("train_batch", "micro_train_batch", gpus_q), f"{message} ({judging()})")
    rollout, micro_rollout, n = number("rollout_batch"), number("micro_rollout_batch"), number("n_samples")
    nodes, gpus = number("actor_nodes"), number("actor_gpus")
    if None not in (rollout, micro_rollout, n, nodes, gpus) and micro_rollout:
        assert rollout is not None and n is not None and nodes is not None and gpus is not None
        ranks = nodes * gpus // ring // tp
        if n * rollout // micro_rollout < ranks:
            yield Problem(at("rollout_batch", "n_samples"),
                          f"rollout batch {rollout} × n_samples_per_prompt {n} // micro rollout batch "
                          f"{micro_rollout} = {n * rollout // micro_rollout} sample batches, fewer than the "
                          f"actor's {ranks} data-parallel ranks: train_ppo_ray's assertion stops it "
                          f"({judging()})")


def refused_combination(src: Source) -> Iterator[Problem]:
    """A combination `train_ppo_ray`'s own checks refuse before Ray starts anything.

    After parsing, the entry module's `__main__` asserts (OpenRLHF ≥ 0.10.2): a group
    baseline (`rloo`, `reinforce_baseline`, `group_norm`, `dr_grpo`) needs
    `--rollout.n_samples_per_prompt` > 1, as does dynamic filtering; packed samples
    (`--ds.packing_samples`, forced on by ring attention and dynamic batches) need vLLM
    engines; a partial rollout, and a vLLM generation batch larger than the rollout
    batch, need `--train.async_enable`; dynamic filtering needs a remote reward or an agent.

    Fails: openrlhf
    ```sh
    python3 -m openrlhf.cli.train_ppo_ray --actor.model_name_or_path m --reward.remote_url http://rm \\
        --actor.num_gpus_per_node 8 --algo.advantage.estimator group_norm
    ```

    Passes: openrlhf
    ```sh
    python3 -m openrlhf.cli.train_ppo_ray --actor.model_name_or_path m --reward.remote_url http://rm \\
        --actor.num_gpus_per_node 8 --algo.advantage.estimator group_norm --rollout.n_samples_per_prompt 8
    ```

    Fix: the option the message names.
    """
    found = _Values.of(src)
    if found is None or found.module != "openrlhf.cli.train_ppo_ray":
        return
    if found.parser.dest("packing") is None:
        return  # a flat-option release: its checks are not judged
    n = found.number("n_samples") or 1
    estimator = found.value("estimator")
    if estimator in GROUP_ESTIMATORS and n <= 1:
        yield Problem(found.at("estimator", "n_samples"),
                      f"{estimator} requires n_samples_per_prompt > 1 (it is {n}): train_ppo_ray's "
                      f"assertion stops it ({judging()})")
    if found.value("dynamic_filtering"):
        if n <= 1:
            yield Problem(found.at("dynamic_filtering", "n_samples"),
                          "n_samples_per_prompt must be greater than 1 when using dynamic filtering "
                          f"(it is {n}): train_ppo_ray's assertion ({judging()})")
        if not found.value("remote_reward") and not found.value("agent"):
            yield Problem(found.at("dynamic_filtering"),
                          "remote_rm_url or agent_func_path must be specified when using dynamic "
                          f"filtering: train_ppo_ray's assertion ({judging()})")
    packing = found.value("packing") or (found.number("ring") or 1) > 1 or found.value("dynamic_batch")
    engines = found.number("vllm_engines")
    if packing and (engines is None or engines <= 0):
        said = engines if engines is not None else "not set"
        yield Problem(found.at("packing", "ring", "dynamic_batch"),
                      f"Only support `--packing_samples` with vLLM: --vllm.num_engines is {said} "
                      f"({judging()})")
    asynchronous = found.value("async")
    if found.value("partial_rollout") and not asynchronous:
        yield Problem(found.at("partial_rollout"),
                      f"--train.partial_rollout_enable requires --train.async_enable ({judging()})")
    generate, rollout = found.number("generate_batch"), found.number("rollout_batch")
    if generate is not None and rollout is not None and generate > rollout and not asynchronous:
        yield Problem(found.at("generate_batch"), f"--rollout.vllm_generate_batch_size {generate} > "
                      f"--rollout.batch_size {rollout} requires --train.async_enable ({judging()})")


class _Values:
    """A command line's quantities (`NAMES`) as the entry's parser reads them: the value
    written (its text), else the parser's default; where each is written."""

    def __init__(self, module: str, arguments: dict[str, Any], parser: Entry) -> None:
        self.module, self.parser = module, parser
        self._found: dict[str, tuple[Any, str | None]] = {}
        for quantity in NAMES:
            dest = parser.dest(quantity)
            if dest is None:
                continue
            written = next((w for w in arguments
                            if (o := parser.resolve(w)) and parser.options[o]["dest"] == dest), None)
            value = arguments[written] if written is not None else parser.default(dest)
            self._found[quantity] = (value, written)

    @classmethod
    def of(cls, src: Source) -> _Values | None:
        module, arguments, parser = _command(src)
        return None if parser is None else cls(module, arguments, parser)

    def value(self, quantity: str) -> Any:
        return self._found.get(quantity, (None, None))[0]

    def written(self, quantity: str) -> str | None:
        return self._found.get(quantity, (None, None))[1]

    def number(self, quantity: str) -> int | None:
        value, written = self._found.get(quantity, (None, None))
        if written is None:
            return value if isinstance(value, int) and not isinstance(value, bool) else None
        return _number(value)

    def at(self, *quantities: str) -> tuple[str, ...]:
        for quantity in quantities:
            if (written := self.written(quantity)) is not None:
                return (self.module, written)
        return (self.module,)
