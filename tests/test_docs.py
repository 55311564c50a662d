"""The documentation's examples run: every ```python block of README.md and docs/*.md, every
`distrecipe ...` command of their ```sh blocks, and the README's recipe.

Each runs in a fresh directory holding what the examples name: the repository's `recipes/`,
and a `recipe.yaml`, `my.yaml`, `rl.yaml`, `train.py`, `config.json`, ds_configs and a verl
launch script standing for the reader's own files (`WORKSPACE`). A command exits as its line
says (`# exit N: ...`), else 0; what a line writes (`-o`, `--write`, `> FILE`) is not there
before it runs, and is there after. A command of another program is skipped with the
reason it cannot run here (a cluster, a GPU, the network: `ELSEWHERE`); one nobody gave a
reason for fails, so a new example is either run or explained.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import shlex
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from distrecipe import api
from distrecipe.cli import main
from distrecipe.launch.rundir import plan_json
from distrecipe.translator import deepspeed
from tests.conftest import RECIPES, ROOT

DOCS = (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")))
SEED = RECIPES / "seed-8b-32gpu-zero2.yaml"


@dataclass(frozen=True)
class Block:
    file: str
    line: int
    """The line of the opening fence, 1-based."""
    lang: str
    text: str

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"


def blocks(lang: str) -> list[Block]:
    """Every fenced block of `lang` in the documentation, in order."""
    found = []
    for path in DOCS:
        lines = path.read_text(encoding="utf-8").splitlines()
        opened: tuple[int, str] | None = None
        body: list[str] = []
        for number, line in enumerate(lines, 1):
            fence = re.match(r"^\s*```(\w*)\s*$", line)
            if fence and opened is None:
                opened, body = (number, fence.group(1)), []
            elif fence:
                assert opened is not None
                if opened[1] == lang:
                    found.append(Block(path.relative_to(ROOT).as_posix(), opened[0], lang, "\n".join(body)))
                opened = None
            elif opened is not None:
                body.append(line)
    return found


# The reader's own files, as the examples name them.
TRAIN_PY = '''\
import torch.distributed as dist

dist.init_process_group()
print("rank", dist.get_rank())
'''
RUN_GRPO = '''\
#!/usr/bin/env bash
# GRPO on 2 nodes of 8 GPUs
set -euo pipefail
python3 -m verl.trainer.main_ppo \\
    algorithm.adv_estimator=grpo \\
    data.train_batch_size=128 \\
    actor_rollout_ref.rollout.n=4 \\
    actor_rollout_ref.actor.ppo_mini_batch_size=64 \\
    actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4 \\
    actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=4 \\
    trainer.nnodes=2 \\
    trainer.n_gpus_per_node=8 "$@"
'''


def _ds_config(*overrides: str) -> str:
    return json.dumps(deepspeed.emit(api.load(SEED, overrides)), indent=2) + "\n"


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """What every example starts from (copied, so one example's files never reach another)."""
    root = tmp_path_factory.mktemp("workspace")
    shutil.copytree(RECIPES, root / "recipes")
    files = {
        "recipe.yaml": SEED.read_text(encoding="utf-8"),
        "my.yaml": SEED.read_text(encoding="utf-8"),
        "rl.yaml": (ROOT / "tests" / "launch" / "rl-tiny-2x2.yaml").read_text(encoding="utf-8"),
        "train.py": TRAIN_PY,
        "config.json": (ROOT / "tests" / "corpus" / "hf_configs" / "real" / "qwen3-8b.json").read_text(
            encoding="utf-8"),
        "ds_config.json": _ds_config(),
        "configs/ds_config.json": _ds_config(),
        "old/ds_config.json": _ds_config(),
        "new/ds_config.json": _ds_config("batch.global=512", "stage=3"),
        "run_grpo.sh": RUN_GRPO,
    }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    return root


@pytest.fixture
def workspace(template: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh copy of the template, as the working directory."""
    root = tmp_path / "ws"
    shutil.copytree(template, root)
    monkeypatch.chdir(root)
    return root


# ---------------------------------------------------------------------------- python

class StandIn:
    """A name an example uses from the reader's script or an engine (`model`, `deepspeed`,
    `TrainingArguments`): callable with anything, every attribute another stand-in, and a
    call unpacks as DeepSpeed's 4-tuple. The engines' own acceptance of what `distrecipe.api`
    returns is tests/test_api.py's (`test_the_engines_take_the_dicts`)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = []

    def __call__(self, *args: Any, **kwargs: Any) -> StandIn:
        self.calls.append((args, kwargs))
        return StandIn(f"{self.name}()")

    def __getattr__(self, name: str) -> StandIn:
        if name.startswith("__"):
            raise AttributeError(name)
        child = StandIn(f"{self.name}.{name}")
        object.__setattr__(self, name, child)
        return child

    def __iter__(self) -> Iterator[StandIn]:
        return iter([self] * 4)


STAND_INS = ("model", "deepspeed", "TrainingArguments", "Accelerator", "FullyShardedDataParallelPlugin",
             "DeepSpeedPlugin")
"""The names a Python example may use without defining: the reader's model and the engines'."""


@pytest.mark.parametrize("block", blocks("python"), ids=lambda block: block.where)
def test_python_examples_run(block: Block, workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run as inside `distrecipe launch` (`DISTRECIPE_PLAN` is recipe.yaml's plan.json)."""
    (workspace / "plan.json").write_text(plan_json(api.load("recipe.yaml")), encoding="utf-8")
    monkeypatch.setenv("DISTRECIPE_PLAN", str(workspace / "plan.json"))
    namespace: dict[str, Any] = {name: StandIn(name) for name in STAND_INS}
    exec(compile(block.text, block.where, "exec"), namespace)


def test_there_are_python_examples() -> None:
    assert [block.where for block in blocks("python")], "the README's API example was not found"


# ---------------------------------------------------------------------------- yaml

@pytest.mark.parametrize("block", [b for b in blocks("yaml") if re.search(r"^recipe: 1$", b.text, re.M)],
                         ids=lambda block: block.where)
def test_recipe_examples_resolve(block: Block, workspace: Path) -> None:
    (workspace / "example.yaml").write_text(block.text + "\n", encoding="utf-8")
    plan = api.load("example.yaml")
    assert plan.batch.micro * plan.batch.accumulation * plan.dims.dp == plan.batch.global_


# ---------------------------------------------------------------------------- shell

ELSEWHERE: dict[str, str] = {
    "make demo": "builds .venv from the package registry (network), then trains for a minute",
    "make test": "is the whole test suite, this test among it",
    "sbatch ": "needs a SLURM cluster (tests/slurm/ runs the scripts on one)",
    "sky launch": "needs a cloud account (network)",
    "kubectl apply": "needs a Kubernetes API server",
    "ray start": "starts a Ray cluster (tests/launch/test_ray_cluster.py does)",
    "entry=$(": "reads the RayJob of the Ray cluster above (tests/launch/test_ray_cluster.py)",
    "ray job submit": "submits to the Ray cluster above (tests/launch/test_ray_cluster.py)",
    "gpu_wheels.sh": "downloads wheels from the package registry (network)",
    "set -o pipefail": "runs on the GPU machine (benchmarks/gpu_memory.py)",
}
"""A fragment of a command of another program → why it cannot run here."""

SLOW: dict[str, str] = {
    "lint --engines": "imports torch and every engine (≈ 7 s)",
}
"""A fragment of a distrecipe command → why it runs only in the slow suite."""

OPERATORS = frozenset({"&&", "||", ";", "|", "&"})


@dataclass(frozen=True)
class Line:
    """One command line of a shell block (continuations joined)."""

    block: Block
    offset: int
    """Its first line within the block, 0-based."""
    text: str

    @property
    def where(self) -> str:
        return f"{self.block.file}:{self.block.line + 1 + self.offset}"

    @property
    def exit_code(self) -> int:
        """What the line's comment says it exits with (`# exit 1: ...`), else 0."""
        said = re.search(r"#\s*exit (\d+):", self.text)
        return int(said.group(1)) if said else 0

    def segments(self) -> list[list[str]]:
        """Its simple commands (split at `&&`, `;`, `|`, `&`), each as words."""
        lexer = shlex.shlex(self.text, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        lexer.commenters = "#"
        out: list[list[str]] = [[]]
        for word in lexer:
            if word in OPERATORS:
                out.append([])
            else:
                out[-1].append(word)
        return [words for words in out if words]


def command_lines() -> list[Line]:
    found = []
    for block in blocks("sh"):
        raw = block.text.split("\n")
        start, pending = 0, ""
        for offset, line in enumerate(raw):
            if not pending:
                start = offset
            if line.endswith("\\"):
                pending += line[:-1] + " "
                continue
            text, pending = (pending + line).strip(), ""
            if text and not text.startswith("#"):
                found.append(Line(block, start, text))
    return found


def _param(line: Line) -> Any:
    slow = [why for fragment, why in SLOW.items() if fragment in line.text]
    return pytest.param(line, id=line.where, marks=[pytest.mark.slow] if slow else [])


@dataclass
class Run:
    """One distrecipe command of a line: its environment, argv and stdout's file."""

    env: dict[str, str]
    argv: list[str]
    stdout: str | None


def _distrecipe(words: list[str]) -> Run | None:
    """The distrecipe command in `words`, unwrapping `eval "$(...)"`; None for another program."""
    if words[:1] == ["eval"] and len(words) == 2 and (inner := re.fullmatch(r"\$\((.*)\)", words[1])):
        words = shlex.split(inner.group(1))
    env = {}
    while words and re.fullmatch(r"[A-Za-z_]\w*=.*", words[0]) and len(words) > 1:
        name, _, value = words.pop(0).partition("=")
        env[name] = value
    if words[:1] != ["distrecipe"]:
        return None
    argv, stdout = words[1:], None
    if ">" in argv:
        at = argv.index(">")
        stdout, argv = argv[at + 1], argv[:at] + argv[at + 2:]
    return Run(env, argv, stdout)


def _writes(run: Run) -> list[str]:
    """What a command writes in the working directory: `-o`, `--output`, `--write`, `> FILE`."""
    named = [run.argv[i + 1] for i, word in enumerate(run.argv[:-1]) if word in ("-o", "--output", "--write")]
    return [path for path in [*named, run.stdout] if path is not None and not path.startswith(("/", "~"))]


def _run(run: Run, monkeypatch: pytest.MonkeyPatch) -> tuple[int, str, str]:
    # Byte streams beneath, as a terminal's: click writes the completion script as bytes.
    out, err = (io.TextIOWrapper(io.BytesIO(), encoding="utf-8") for _ in range(2))
    with monkeypatch.context() as patched:
        for name, value in run.env.items():
            patched.setenv(name, value)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(run.argv)
            except SystemExit as exc:  # click's shell completion exits on its own
                code = exc.code if isinstance(exc.code, int) else 1
    return code, _text(out), _text(err)


def _text(stream: io.TextIOWrapper) -> str:
    stream.flush()
    buffer = stream.buffer
    assert isinstance(buffer, io.BytesIO)
    return buffer.getvalue().decode("utf-8")


@pytest.mark.parametrize("line", [_param(line) for line in command_lines()])
def test_shell_examples_run(line: Line, workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ran, elsewhere = 0, []
    for words in line.segments():
        run = _distrecipe(words)
        if run is None:
            text = shlex.join(words)
            why = [f"`{fragment.strip()}` {reason}" for fragment, reason in ELSEWHERE.items()
                   if fragment in text or fragment in line.text]
            assert why, f"{line.where}: `{text}` is not distrecipe: run it here, or say in ELSEWHERE why not"
            elsewhere.append(why[0])
            continue
        for path in _writes(run):
            shutil.rmtree(path, ignore_errors=True) if Path(path).is_dir() else Path(path).unlink(missing_ok=True)
        code, out, err = _run(run, monkeypatch)
        assert code == line.exit_code, f"{line.where}: distrecipe {shlex.join(run.argv)} exited {code}:\n{err}"
        if code == 0:
            if run.stdout is not None:
                assert out, f"{line.where}: nothing on stdout for {run.stdout}"
                if not run.stdout.startswith(("/", "~")):
                    Path(run.stdout).write_text(out, encoding="utf-8")
            for path in _writes(run):
                assert Path(path).exists(), f"{line.where}: {path} was not written"
        ran += 1
    if not ran:
        pytest.skip(f"{line.where}: " + "; ".join(dict.fromkeys(elsewhere)))


def test_every_skip_reason_is_still_needed() -> None:
    """A reason for a command the documentation no longer shows is removed with it."""
    text = "\n".join(line.text for line in command_lines())
    assert [fragment for fragment in (*ELSEWHERE, *SLOW) if fragment not in text] == []
