"""Lint, the engines and the import round trip on a corpus no rule was written against.

`tests/corpus/unseen/` holds configs gathered from repositories that no other corpus of
this project uses (`PROVENANCE.csv`), stored byte for byte. This report runs on every file:

1. **Lint** (`distrecipe.lint.engine.lint`, `LintConfig()`), the file named explicitly as a
   user would name it, from a copy of its repository's layout (the other corpus files of
   that repository at their own paths, so a launch script finds the ds_config it names),
   launched from the directory its repository runs it from (`LAUNCH_FROM`). With
   `--engines` (the default here), `lint --engines` runs as well (DR900, DR901).
2. **The engine's verdict**, judged apart from lint (`distrecipe/judges`, as
   `tests/corpus_verdicts.py` judges the real corpus): DeepSpeed after the HF Trainer's
   fill (with the launch script's TrainingArguments flags and world where a corpus script
   names the ds_config), Accelerate's loader, launch and plugin, `TrainingArguments`
   (a file, or a launch command's flags), verl's compose/validate/split, the Kubernetes API
   server for a Kubeflow job (`tests/k8s/judge.py`: CRD schema, CEL, pod schemas), SkyPilot's
   `Task.from_yaml`, as `sky launch FILE` reads it (run by `.venv-skypilot`).
3. **Classification.** Each lint *error* on a file is TRUE when the engine refuses the file
   or confirms a silent difference (`differs`), FALSE when the engine accepts it as written,
   UNJUDGED when no engine judges the file. A MISS is a file the engine refuses (or runs
   differently) with no lint error on it. A CRASH is a traceback out of lint (or `lint
   --engines`), or exit 2 (lint found the file unusable): every corpus file is of a kind the
   README says lint reads.
4. **Import round trip** for the kinds `import` reads (ds_config, Accelerate YAML,
   TrainingArguments, verl): `distrecipe import`, `compile --target` the same engine, then
   `distrecipe diff` of the original and the compiled file; a changed key that nothing the two
   commands printed names (`tests/roundtrip.py`'s `named`) is a silent loss. A refused import
   or compile is loud, and counted apart.

    python -m tests.unseen_report                 # everything (a few minutes)
    python -m tests.unseen_report --no-engines    # lint and import only, no engine verdicts
    python -m tests.unseen_report --no-lint-engines  # the verdicts, without `lint --engines`
    python -m tests.unseen_report --csv FILE      # also the per-file rows

The output is deterministic: files in PROVENANCE.csv order, temporary paths replaced by the
file's repository path.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import traceback
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tests.corpus_verdicts import launch_flags

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "corpus" / "unseen"
KINDS = ("deepspeed", "accelerate", "hf", "scripts", "verl", "skypilot", "kubeflow")
IMPORTABLE = {"deepspeed": "deepspeed", "accelerate": "accelerate", "hf": "hf", "verl": "verl"}
"""Corpus folder → the engine `import` reads it as and `compile --target` writes back."""
MAIN_FILE = {"deepspeed": "ds_config.json", "accelerate": "accelerate_config.yaml",
             "verl": "verl_overrides.txt", "hf": "training_args.json"}

LAUNCH_FROM = {
    "huggingface/smollm": "vision",  # its slurm templates cd into vision/ and name ./experiments/...
    "InternLM/InternLM-XComposer": "finetune",  # finetune.sh names ds_config_zero2.json beside it
}
"""Repository → the directory (under its root) its files are launched from; default the root."""
LAUNCH_FROM_FILE = {
    "scripts/InternLM__InternLM-XComposer__InternLM-XComposer-2.5-Reward__training__script_train.sh":
        "InternLM-XComposer-2.5-Reward/training",
    "scripts/OpenBMB__MiniCPM__finetune__sft_finetune.sh": "finetune",
    "scripts/OpenBMB__MiniCPM__finetune__lora_finetune.sh": "finetune",
    "deepspeed/OpenBMB__MiniCPM__finetune__configs__ds_config_zero2.json": "finetune",
    "deepspeed/OpenBMB__MiniCPM__finetune__configs__ds_config_zero3_offload.json": "finetune",
    **{f"{kind}/OpenBMB__MiniCPM__minicpm_sala__finetune__trainer__{rest}": "minicpm_sala/finetune/trainer"
       for kind, rest in (("scripts", "scripts__accelerate__sft_finetune.sh"),
                          ("scripts", "scripts__deepspeed__sft_finetune.sh"),
                          ("accelerate", "configs__accelerate__fsdp_config.yaml"),
                          ("accelerate", "configs__accelerate__fsdp_config_multiple_nodes.yaml"),
                          ("accelerate", "configs__accelerate__multigpu_config.yaml"),
                          ("deepspeed", "configs__deepspeed__ds_config_zero3.json"))},
}
"""Corpus file → launch directory, where it differs from its repository's (the scripts `cd` there
or name their configs relative to it: `--deepspeed configs/ds_config_zero2.json`)."""

PAIRS = {
    "deepspeed/OpenBMB__MiniCPM__finetune__configs__ds_config_zero3_offload.json":
        "scripts/OpenBMB__MiniCPM__finetune__lora_finetune.sh",
    "deepspeed/OpenBMB__MiniCPM__minicpm_sala__finetune__trainer__configs__deepspeed__ds_config_zero3.json":
        "scripts/OpenBMB__MiniCPM__minicpm_sala__finetune__trainer__scripts__deepspeed__sft_finetune.sh",
    "deepspeed/BAAI-DCAI__Bunny__script__deepspeed__zero3.json": "scripts/BAAI-DCAI__Bunny__script__train__finetune_full.sh",
    "deepspeed/BAAI-DCAI__Bunny__script__deepspeed__zero2.json": "scripts/BAAI-DCAI__Bunny__script__train__pretrain.sh",
    "deepspeed/InternLM__InternLM-XComposer__finetune__ds_config_zero2.json":
        "scripts/InternLM__InternLM-XComposer__finetune__finetune.sh",
}
"""ds_config → the corpus launch script (an HF Trainer program) that names it: judged with that
script's TrainingArguments flags at its world. MiniCPM's `finetune/sft_finetune.sh` names
`ds_config_zero2.json` only after a comment that ends its command, so that file is judged alone."""

NOT_TRAINER = {
    **{f"scripts/allenai__open-instruct__scripts__{name}": "open_instruct's own ArgumentParserPlus dataclasses "
       "(FlatArguments / DPOExperimentConfig), not TrainingArguments"
       for name in ("finetune_with_accelerate.sh", "finetune_with_accelerate_config.sh",
                    "dpo_train_with_accelerate.sh")},
    "scripts/aws-samples__awsome-distributed-training__3.test_cases__pytorch__FSDP__slurm__llama3_1_8b-training.sbatch":
        "the FSDP test case's own argparse (train.py)",
    "scripts/pytorch__torchtitan__run_train.sh": "torchtitan's own config system (--module/--config)",
    "scripts/pytorch__torchtitan__multinode_trainer.slurm": "torchtitan's own config system (--module/--config)",
}
"""Launch scripts whose program is no HF Trainer program: their flags are not TrainingArguments."""

TEMPLATES = {
    "kubeflow/aws-samples__awsome-distributed-training__3.test_cases__pytorch__FSDP__kubernetes__llama3_1_8b-fsdp.yaml":
        "an envsubst template ($NUM_NODES, $GPU_PER_NODE, ${IMAGE_URI}) its README renders before kubectl apply",
}
"""Files that are templates a repository script fills before the engine reads them."""

IGNORED = "DeepSpeed never reads this key"
"""The DeepSpeed judge's note for a key DeepSpeed ignores: lint warns (DR311) on it."""
WARNED = "(Accelerate: "
"""In the report's Accelerate plugin check, a difference Accelerate itself logs a warning for
(`backward_prefetch is not supported in FSDP2`): lint warns on it too (DR342), as Accelerate
runs the file; one it makes without a word is DR332's error."""


@dataclass(frozen=True)
class Entry:
    file: str
    """`kind/name`, relative to the corpus."""
    repo: str
    path: str

    @property
    def kind(self) -> str:
        return self.file.split("/", 1)[0]

    @property
    def launch_dir(self) -> str:
        return LAUNCH_FROM_FILE.get(self.file, LAUNCH_FROM.get(self.repo, ""))


@dataclass
class Result:
    entry: Entry
    errors: list[str] = field(default_factory=list)
    """lint's error findings on the file: `CODE line: message`."""
    codes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    crash: str = ""
    """`traceback: ...` or `exit 2: ...`; empty when lint read the file."""
    engines: list[str] = field(default_factory=lambda: ["not run"])
    """DR900/DR901/DR902 codes `lint --engines` gave (or its crash)."""
    verdict: str = "not run"
    engine: str = ""
    why: str = ""
    import_outcome: str = ""
    """`same`, `named`, `silent`, `refused at ...`, or empty when not importable."""
    silent: list[str] = field(default_factory=list)
    import_why: str = ""

    @property
    def judged(self) -> bool:
        return self.verdict in ("accepts", "refuses", "differs")

    @property
    def true_errors(self) -> int:
        return len(self.errors) if self.verdict in ("refuses", "differs") else 0

    @property
    def false_errors(self) -> int:
        return len(self.errors) if self.verdict == "accepts" else 0

    @property
    def unjudged_errors(self) -> int:
        return 0 if self.judged else len(self.errors)

    @property
    def miss(self) -> bool:
        if self.verdict not in ("refuses", "differs") or self.crash:
            return False
        notes = self.why.rsplit(" [", 1)[0].split("; ")  # the verdict's notes, without its context
        if self.verdict == "differs" and all(note.endswith(IGNORED) for note in notes):
            return not self.errors and not any(w.startswith("DR311") for w in self.warnings)
        if self.verdict == "differs" and all(WARNED in note for note in notes):
            # The engine logs each difference itself; lint's warning names the same key (DR342).
            return not self.errors and not any(w.startswith("DR342") for w in self.warnings)
        return not self.errors


def entries() -> list[Entry]:
    with (CORPUS / "PROVENANCE.csv").open(newline="", encoding="utf-8") as f:
        return [Entry(row["file"], row["repo"], row["path"]) for row in csv.DictReader(f)]


# ----------------------------------------------------------------------------- layout
@contextlib.contextmanager
def layout(all_entries: list[Entry]) -> Iterator[dict[str, Path]]:
    """Every corpus file copied to `<tmp>/<owner>+<repo>/<its path>`; yields file → placed path."""
    with tempfile.TemporaryDirectory(prefix="distrecipe-unseen-") as tmp:
        placed = {}
        for entry in all_entries:
            target = Path(tmp) / entry.repo.replace("/", "+") / entry.path
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(CORPUS / entry.file, target)
            placed[entry.file] = target
        yield placed


def repo_root(entry: Entry, placed: Path) -> Path:
    return Path(str(placed)[: -len(entry.path)])


def clean(text: str, entry: Entry, placed: Path) -> str:
    """`text` with the temporary layout replaced by `<owner/repo>`."""
    text = text.replace(str(repo_root(entry, placed)), f"<{entry.repo}>")
    return re.sub(r"/tmp/[\w./+-]*distrecipe-unseen-\w+/?", "<tmp>/", text)


# ----------------------------------------------------------------------------- lint
def run_lint(result: Result, placed: Path, engines: bool) -> None:
    from distrecipe.lint.config import LintConfig
    from distrecipe.lint.engine import lint

    entry = result.entry
    here = os.path.realpath(placed)
    start = repo_root(entry, placed) / entry.launch_dir
    with contextlib.chdir(start), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            report = lint([placed], config=LintConfig())
        except Exception:
            result.crash = "traceback: " + clean(_last_line(traceback.format_exc()), entry, placed)
            return
        if report.unusable:
            result.crash = "exit 2: " + clean(report.unusable[0].message, entry, placed)
        for finding in report.findings:
            if finding.where is not None and os.path.realpath(finding.where.file) != here:
                continue  # a finding on the other half of a pair: that file's own run says it
            line = finding.where.line if finding.where is not None else 0
            text = f"{finding.code} line {line}: {clean(finding.message, entry, placed)}"
            if finding.severity == "error":
                result.errors.append(text)
                result.codes.append(finding.code)
            elif finding.severity == "warning":
                result.warnings.append(text)
        if engines:
            try:
                report = lint([placed], config=LintConfig(), engines=True)
            except Exception:
                result.engines = ["traceback: " + clean(_last_line(traceback.format_exc()), entry, placed)]
                if not result.crash:
                    result.crash = "traceback in lint --engines: " + result.engines[0][len("traceback: "):]
                return
            result.engines = sorted({f.code for f in report.findings if f.code in ("DR900", "DR901", "DR902")})


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1].strip() if lines else text


# ----------------------------------------------------------------------------- judges
def trainer_launch(text: str, name: str) -> Any:
    """The first launch command of a script passing the Trainer's batch flag, or None."""
    from distrecipe.engines.argv import launches

    return next((found for found in launches(text, name) if "per_device_train_batch_size" in found.flags), None)


def judge_deepspeed(entry: Entry, placed: Path, placed_all: dict[str, Path]) -> tuple[str, str, str]:
    from distrecipe.judges import deepspeed as deepspeed_judge
    from distrecipe.judges import hf as hf_judge
    from distrecipe.judges import version

    text = placed.read_text(encoding="utf-8")
    try:
        config = json.loads(text)
    except json.JSONDecodeError as exc:
        return "not-judgeable", version("deepspeed"), f"not JSON ({exc.msg}, line {exc.lineno})"
    if entry.file in PAIRS:
        script = PAIRS[entry.file]
        launch = trainer_launch(placed_all[script].read_text(encoding="utf-8"), script)
        assert launch is not None, f"{script} passes no TrainingArguments"
        flags, unknown = launch_flags(launch)
        words = [part for name, value in flags if name not in ("deepspeed", "output_dir", "fsdp_config")
                 for part in ([f"--{name}"] if value is None else [f"--{name}", value])]
        values = hf_judge.flag_values(words)
        world = launch.world()[0] or hf_judge.WORLD_DEFAULT
        source = f"from {script.split('/', 1)[1]}" + (f" (left to the environment: {', '.join(unknown)})"
                                                       if unknown else "")
        verdict = deepspeed_judge.judge(config, world, trainer=values, trainer_from=source)
    else:
        world, world_from = deepspeed_judge.implied_world(config)
        verdict = deepspeed_judge.judge(config, world)
        verdict = type(verdict)(verdict.outcome, verdict.engine, verdict.message, verdict.notes,
                                verdict.context.replace(f"world {world}", f"world {world} ({world_from})", 1))
    return verdict.outcome, verdict.engine, _why(verdict)


def _why(verdict: Any) -> str:
    notes = "; ".join(dict.fromkeys(note.message for note in verdict.notes))
    text = notes or verdict.message
    return f"{text} [{verdict.context}]" if verdict.context and verdict.outcome != "accepts" else text


def judge_accelerate(entry: Entry, placed: Path) -> tuple[str, str, str]:
    """Accelerate's judge, and what its FSDP2 plugin drops of the file's FSDP1 keys
    (`fsdp2_dropped`): the judge reports only a ds_config's accumulation as a difference."""
    from distrecipe.judges import Note
    from distrecipe.judges import accelerate as accelerate_judge

    start = repo_root(entry, placed) / entry.launch_dir
    verdict = accelerate_judge.judge(placed, directory=start)
    if verdict.outcome in ("accepts", "differs"):
        dropped = fsdp2_dropped(placed, start)
        if dropped:
            notes = verdict.notes + tuple(Note((), text) for text in dropped)
            verdict = type(verdict)("differs", verdict.engine, "; ".join(n.message for n in notes), notes,
                                    verdict.context)
    return verdict.outcome, verdict.engine, clean(_why(verdict), entry, placed)


FSDP1_RESHARD = {"FULL_SHARD": True, "HYBRID_SHARD": True, "SHARD_GRAD_OP": False, "_HYBRID_SHARD_ZERO2": False}
"""An FSDP1 sharding strategy → the FSDP2 `reshard_after_forward` that does the same."""


def fsdp2_dropped(placed: Path, start: Path) -> list[str]:
    """The FSDP1 settings of an `fsdp_version: 2` config that Accelerate's FSDP2 plugin does
    not run, read off the plugin a worker builds (`accelerate launch`'s environment, then
    `FullyShardedDataParallelPlugin()`): a backward prefetch it sets to None ("not supported
    in FSDP2"), a forward prefetch it never reads, a sharding strategy that
    `reshard_after_forward` contradicts."""
    from distrecipe.judges import accelerate as accelerate_judge

    data = yaml.safe_load(placed.read_text(encoding="utf-8")) or {}
    fsdp = data.get("fsdp_config") or {}
    if data.get("distributed_type") != "FSDP" or str(fsdp.get("fsdp_version")) != "2":
        return []
    with contextlib.chdir(start):
        args, env = accelerate_judge.launch_env(placed.resolve())
        plugin = accelerate_judge.worker_plugin(args, env)
    notes = []
    prefetch = fsdp.get("fsdp_backward_prefetch")
    if prefetch not in (None, "NO_PREFETCH") and plugin.backward_prefetch is None:
        notes.append(f"fsdp_config.fsdp_backward_prefetch: {prefetch} is set to None by the FSDP2 plugin "
                     "(Accelerate: backward_prefetch is not supported in FSDP2)")
    if fsdp.get("fsdp_forward_prefetch") is True and not plugin.forward_prefetch:
        notes.append("fsdp_config.fsdp_forward_prefetch: true is never read by the FSDP2 plugin "
                     f"(it holds {plugin.forward_prefetch})")
    strategy = str(fsdp.get("fsdp_sharding_strategy", "")).upper()
    if strategy in FSDP1_RESHARD and plugin.reshard_after_forward is not FSDP1_RESHARD[strategy]:
        notes.append(f"fsdp_config.fsdp_sharding_strategy: {strategy} is not what runs: the FSDP2 plugin "
                     f"reshards after forward = {plugin.reshard_after_forward} (fsdp_reshard_after_forward)")
    return notes


def judge_hf(entry: Entry, placed: Path) -> tuple[str, str, str]:
    from distrecipe.judges import hf as hf_judge

    data = yaml.safe_load(placed.read_text(encoding="utf-8"))
    verdict = hf_judge.judge(data)
    return verdict.outcome, verdict.engine, _why(verdict)


def judge_script(entry: Entry, placed: Path) -> tuple[str, str, str]:
    from distrecipe.judges import hf as hf_judge
    from distrecipe.judges import version

    engine = version("transformers")
    if entry.file in NOT_TRAINER:
        return "not-judgeable", engine, f"not judgeable: {NOT_TRAINER[entry.file]}"
    launch = trainer_launch(placed.read_text(encoding="utf-8"), entry.path)
    if launch is None:
        return "not-judgeable", engine, "not judgeable: no launch command passes TrainingArguments"
    flags, unknown = launch_flags(launch)
    world = launch.world()[0] or hf_judge.WORLD_DEFAULT
    verdict = hf_judge.judge_flags(flags, world)
    why = _why(verdict)
    if unknown:
        why += f" (left to the environment: {', '.join(unknown)})"
    return verdict.outcome, verdict.engine, why


def judge_verl(verl: Any, placed: Path) -> tuple[str, str, str]:
    from distrecipe.judges import verl as verl_judge

    verdict = verl_judge.judge_script(verl, placed.read_text(encoding="utf-8"))
    return verdict.outcome, verdict.engine, _why(verdict)


def judge_kubeflow(entry: Entry, placed: Path) -> tuple[str, str, str]:
    """The API server on each job of the file, as `tests/k8s/judge.py` judges it: the CRD's
    defaults, schema and CEL rules, and every pod the operator will create against Kubernetes'
    own schemas. Refused when any job is. The operator rules distrecipe models itself
    (`engines.k8s.breaches`, lint's own DR38x/DR39x) are lint's, not the engine's: they are
    named in the verdict's reason and never decide it."""
    from distrecipe.engines.k8s import breaches, kind_of
    from tests.k8s import judge as k8s_judge

    engine = f"kubernetes {k8s_judge.KUBERNETES} (kubernetes-validate) + operator CRDs"
    if entry.file in TEMPLATES:
        return "not-judgeable", engine, f"not judgeable: {TEMPLATES[entry.file]}"
    errors: list[str] = []
    modelled: list[str] = []
    jobs = 0
    for doc in yaml.safe_load_all(placed.read_text(encoding="utf-8")):
        kind = kind_of(doc) if isinstance(doc, dict) else None
        if kind is None:
            continue
        jobs += 1
        schema = k8s_judge.openapi(kind)
        defaulted = k8s_judge.apply_defaults(schema, doc)
        found = k8s_judge.schema_errors(kind, defaulted) + k8s_judge.list_errors(schema, defaulted)
        if not found:  # CEL runs on what the schema admitted
            found += k8s_judge.cel_errors(schema, defaulted)
        for where, template in k8s_judge.pod_templates(defaulted).items():
            found += [f"{where}: {e}" for e in k8s_judge.pod_errors(template)]
        errors += found
        modelled += [f"{b.code} {'.'.join(map(str, b.path))}" for b in breaches(kind, defaulted)]
    if not jobs:
        return "not-judgeable", engine, "not judgeable: no TrainJob, RayJob or PyTorchJob in the file"
    why = "; ".join(errors)
    if modelled:
        why += ("; " if why else "") + "distrecipe's own operator model (not the engine) also says: " + \
            ", ".join(modelled)
    return ("refuses" if errors else "accepts"), engine, why


def sky_python() -> Path | None:
    for candidate in (os.environ.get("DISTRECIPE_SKYPILOT_PYTHON"), ROOT / ".venv-skypilot" / "bin" / "python"):
        if candidate and Path(candidate).exists():
            return Path(candidate)
    return None


SKY_JUDGE = """
import json, sys
import sky
for path in sys.argv[1:]:
    try:
        sky.Task.from_yaml(path)
    except Exception as exc:
        print(json.dumps({"file": path, "ok": False, "error": f"{type(exc).__name__}: {exc}",
                          "skypilot": sky.__version__}))
    else:
        print(json.dumps({"file": path, "ok": True, "skypilot": sky.__version__}))
"""
"""What `sky launch FILE` does with the task before it asks any cloud: `Task.from_yaml`, which
turns numeric `envs` into strings, validates the task schema, then refuses an env left null (a
value the command line must give). `tests/launch/skypilot_judge.py` validates the schema
before that normalisation, so it would refuse `envs: {EPOCHS: 3}`, which SkyPilot accepts."""


def judge_skypilot(placed: list[Path]) -> dict[Path, tuple[str, str, str]]:
    """SkyPilot's verdict on each task, as `sky launch FILE` reads it (no `--env`), in one
    subprocess of `.venv-skypilot` (`import sky` is slow); HOME is a scratch directory."""
    python = sky_python()
    if python is None:
        return {path: ("not-judgeable", "skypilot", "not judgeable: no .venv-skypilot (make skypilot), "
                       "nor DISTRECIPE_SKYPILOT_PYTHON") for path in placed}
    with tempfile.TemporaryDirectory() as home:
        done = subprocess.run([str(python), "-c", SKY_JUDGE, *map(str, placed)], capture_output=True, text=True,
                              env={**os.environ, "HOME": home}, check=False, timeout=300)
    out = {}
    for line in done.stdout.splitlines():
        if not line.startswith("{"):
            continue
        verdict = json.loads(line)
        engine = f"skypilot {verdict['skypilot']}"
        path = Path(verdict["file"])
        out[path] = ("accepts", engine, "") if verdict["ok"] else ("refuses", engine, str(verdict["error"]))
    for path in placed:
        out.setdefault(path, ("unavailable", "skypilot", f"the SkyPilot judge failed: {done.stderr[-200:]}"))
    return out


def judge_all(results: list[Result], placed: dict[str, Path]) -> None:
    from distrecipe.judges import engine_output

    verl = None
    sky = judge_skypilot([placed[r.entry.file] for r in results if r.entry.kind == "skypilot"])
    try:
        for result in results:
            entry, path = result.entry, placed[result.entry.file]
            with warnings.catch_warnings(), engine_output(), contextlib.chdir(repo_root(entry, path)):
                warnings.simplefilter("ignore")
                try:
                    if entry.kind == "deepspeed":
                        verdict = judge_deepspeed(entry, path, placed)
                    elif entry.kind == "accelerate":
                        verdict = judge_accelerate(entry, path)
                    elif entry.kind == "hf":
                        verdict = judge_hf(entry, path)
                    elif entry.kind == "scripts":
                        verdict = judge_script(entry, path)
                    elif entry.kind == "verl":
                        from distrecipe.judges import verl as verl_judge

                        verl = verl or verl_judge.VerlJudge()
                        verdict = judge_verl(verl, path)
                    elif entry.kind == "kubeflow":
                        verdict = judge_kubeflow(entry, path)
                    else:
                        verdict = sky[path]
                except Exception as exc:  # the judge's own failure, never a verdict on the file
                    verdict = ("unavailable", "", f"the judge failed: {type(exc).__name__}: {exc}")
            result.verdict, result.engine, result.why = verdict[0], verdict[1], clean(verdict[2], entry, path)
    finally:
        if verl is not None:
            verl.close()


# ----------------------------------------------------------------------------- import round trip
def run_import(result: Result, placed: Path) -> None:
    """`import`, `compile --target` the same engine, `diff` against the original; a changed key
    nothing printed names is silent (`tests/roundtrip.py`'s `named`)."""
    from tests.roundtrip import ENGINE_CHOICE, _error, _word, in_process, named

    entry = result.entry
    engine = IMPORTABLE.get(entry.kind)
    if engine is None:
        return
    world = world_args(entry, placed)
    start = repo_root(entry, placed) / entry.launch_dir
    said = []
    with tempfile.TemporaryDirectory() as tmp, contextlib.chdir(start), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        work = Path(tmp)
        try:
            code, out, err = in_process(["import", str(placed), *world])
            said.append(err)
            if code != 0:
                result.import_outcome, result.import_why = "refused at import", clean(_error(err), entry, placed)
                return
            (work / "r.yaml").write_text(out, encoding="utf-8")
            code, _, err = in_process(["compile", str(work / "r.yaml"), "--target", engine, "-o", str(work / "out")])
            said.append(err)
            if code != 0:
                result.import_outcome = "refused at compile"
                result.import_why = clean(_error(err), entry, placed)
                return
            final = work / "out" / MAIN_FILE[engine]
            code, out, err = in_process(["diff", str(placed), str(final), *recipe_world(out, world),
                                         "--format", "json"])
        except Exception:
            result.import_outcome = "traceback"
            result.import_why = clean(_last_line(traceback.format_exc()), entry, placed)
            return
        if code not in (0, 1):
            result.import_outcome, result.import_why = "refused at diff", clean(_error(err), entry, placed)
            return
    text = "\n".join(said)
    keys = sorted(str(change["key"]) for change in json.loads(out)["changes"])
    choice, sections = ENGINE_CHOICE.get(engine, ((), ()))
    engine_named = any(key in keys for key in choice) and (
        any(named(key, text) for key in choice if key in keys) or _word("strategy", text))
    changed_named: list[str] = []
    for key in keys:
        follows = engine_named and key.split(".")[0] in sections
        (changed_named if follows or named(key, text) else result.silent).append(key)
    result.import_outcome = "silent" if result.silent else "named" if changed_named else "same"


def world_args(entry: Entry, placed: Path) -> list[str]:
    """`--world` for a file that does not state its ranks: a ds_config at the world its batch
    numbers imply (as its verdict), a TrainingArguments file or verl script at 8."""
    if entry.kind == "deepspeed":
        from distrecipe.judges import deepspeed as deepspeed_judge

        with contextlib.suppress(json.JSONDecodeError):
            data = json.loads(placed.read_text(encoding="utf-8"))
            if isinstance(data, dict):
                return ["--world", str(deepspeed_judge.implied_world(data)[0])]
    if entry.kind in ("hf", "verl"):
        return ["--world", "8"]
    return []


def recipe_world(recipe: str, fallback: list[str]) -> list[str]:
    """`--world`/`--nodes` of the imported recipe's cluster, for `diff` to read both files at."""
    cluster = (yaml.safe_load(recipe) or {}).get("cluster") or {}
    nodes, gpus = cluster.get("nodes", 1), cluster.get("gpus_per_node")
    return ["--world", str(nodes * gpus), "--nodes", str(nodes)] if isinstance(gpus, int) else fallback or ["--world", "8"]


# ----------------------------------------------------------------------------- the report
def run(*, engines: bool = True, judges: bool = True, imports: bool = True,
        kinds: tuple[str, ...] = KINDS) -> list[Result]:
    """Every corpus file of `kinds`: lint, then (`engines`) `lint --engines`, (`judges`) the
    engines' verdicts, (`imports`) the import round trip."""
    chosen = [entry for entry in entries() if entry.kind in kinds]
    results = [Result(entry) for entry in chosen]
    with layout(entries()) as placed:
        for result in results:
            run_lint(result, placed[result.entry.file], engines)
        if judges:
            judge_all(results, placed)
        if imports:
            for result in results:
                run_import(result, placed[result.entry.file])
    return results


def table(results: list[Result]) -> str:
    head = ("| kind | files | lint errors | true | false | unjudged | misses | crashes | judged | "
            "imported | import silent losses (keys) | import refused |")
    lines = [head, "|---" * (head.count("|") - 1) + "|"]
    for kind in (*KINDS, "total"):
        rows = results if kind == "total" else [r for r in results if r.entry.kind == kind]
        if not rows:
            continue
        imported = [r for r in rows if r.import_outcome]
        cells = {
            "files": len(rows), "errors": sum(len(r.errors) for r in rows),
            "true": sum(r.true_errors for r in rows), "false": sum(r.false_errors for r in rows),
            "unjudged": sum(r.unjudged_errors for r in rows), "misses": sum(r.miss for r in rows),
            "crashes": sum(bool(r.crash) for r in rows), "judged": sum(r.judged for r in rows),
            "imported": len(imported), "silent": sum(bool(r.silent) for r in imported),
            "silent_keys": sum(len(r.silent) for r in imported),
            "refused": sum(r.import_outcome.startswith(("refused", "traceback")) for r in imported),
        }
        import_cells = (f"{cells['imported']} | {cells['silent']} ({cells['silent_keys']}) | "
                        f"{cells['refused']}") if cells["imported"] else "– | – | –"
        lines.append(f"| {kind} | {cells['files']} | {cells['errors']} | {cells['true']} | "
                     f"{cells['false']} | {cells['unjudged']} | {cells['misses']} | {cells['crashes']} | "
                     f"{cells['judged']} | {import_cells} |")
    return "\n".join(lines)


def figures(results: list[Result]) -> dict[str, int]:
    """The headline numbers: files, false errors, misses, crashes, import silent losses (files)."""
    return {"files": len(results), "false errors": sum(r.false_errors for r in results),
            "misses": sum(r.miss for r in results), "crashes": sum(bool(r.crash) for r in results),
            "import silent losses": sum(bool(r.silent) for r in results)}


def listing(results: list[Result]) -> str:
    out = io.StringIO()
    sections = (
        ("FALSE errors (the engine accepts the file as written)", lambda r: r.false_errors,
         lambda r: [f"{e}" for e in r.errors] + [f"  engine: {r.engine}; {r.why}" if r.why else f"  engine: {r.engine}"]),
        ("MISSES (the engine refuses or runs it differently; lint has no error, nor the warning that "
         "stands for one where the engine ignores or logs the difference itself)", lambda r: r.miss,
         lambda r: [f"{r.verdict} ({r.engine}): {r.why}"]),
        ("CRASHES (traceback, or exit 2 on a file lint should read)", lambda r: r.crash,
         lambda r: [r.crash]),
        ("UNJUDGED errors (no engine judges the file)", lambda r: r.unjudged_errors,
         lambda r: [*r.errors, f"  {r.verdict}: {r.why}"]),
        ("TRUE errors (the engine refuses or confirms a difference)", lambda r: r.true_errors,
         lambda r: [*r.errors, f"  {r.verdict} ({r.engine}): {r.why}"]),
        ("lint --engines disagrees with the verdict (DR900 exactly on refusals, DR901 on differences; "
         "it judges the file alone, without the launch context the verdict used)", engines_disagree,
         lambda r: [f"lint --engines: {' '.join(r.engines) or 'nothing'}; verdict {r.verdict}"]),
        ("IMPORT silent losses (changed by import + compile, named by nothing printed)", lambda r: r.silent,
         lambda r: [", ".join(r.silent)]),
        ("IMPORT refused", lambda r: r.import_outcome.startswith(("refused", "traceback")),
         lambda r: [f"{r.import_outcome}: {r.import_why}"]),
    )
    for title, chosen, lines in sections:
        rows = [r for r in results if chosen(r)]
        out.write(f"\n## {title}: {len(rows)} file(s)\n")
        for r in rows:
            out.write(f"- {r.entry.file}\n")
            for line in lines(r):
                out.write(f"    {line}\n")
    return out.getvalue()


LINT_ENGINES = ("deepspeed", "accelerate", "hf", "verl")
"""The corpus folders whose files `lint --engines` judges (DR900/DR901)."""


def engines_disagree(r: Result) -> bool:
    if r.entry.kind not in LINT_ENGINES or not r.judged or r.crash or r.engines == ["not run"]:
        return False
    expected = {"refuses": {"DR900"}, "differs": {"DR901"}, "accepts": set()}[r.verdict]
    return set(r.engines) & {"DR900", "DR901"} != expected


def write_csv(results: list[Result], path: Path) -> None:
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(["file", "kind", "verdict", "engine", "why", "lint errors", "lint --engines", "crash",
                         "import", "silent keys"])
        for r in results:
            writer.writerow([r.entry.file, r.entry.kind, r.verdict, r.engine, r.why, " | ".join(r.errors),
                             " ".join(r.engines), r.crash, r.import_outcome, " ".join(r.silent)])


def main(argv: list[str]) -> int:
    judges = "--no-engines" not in argv
    results = run(engines=judges and "--no-lint-engines" not in argv, judges=judges)
    print(table(results))
    print(listing(results))
    if "--csv" in argv:
        write_csv(results, Path(argv[argv.index("--csv") + 1]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
