"""lint as a user meets it: formats, SARIF validity, suppression, config, exit codes."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import jsonschema
import pytest

from distrecipe.engines import KINDS
from distrecipe.engines.hydra import parse_value as hydra_value
from distrecipe.engines.hydra import read_overrides
from distrecipe.engines.native import DATA_SUFFIXES, OVERRIDE_SUFFIXES
from distrecipe.engines.tables import table
from distrecipe.errors import DistrecipeError
from distrecipe.lint.config import LintConfig, load_config
from distrecipe.lint.engine import lint
from distrecipe.lint.formats import FORMATS
from distrecipe.lint.rules import RULES
from tests.conftest import Result

SCHEMA = json.loads((Path(__file__).parent / "sarif-2.1.0.schema.json").read_text())
"""The OASIS SARIF 2.1.0 schema (errata 01, as published; draft-04), shipped with the tests."""

BROKEN = """{
  "train_batch_size": 30,
  "gradient_accumulation_steps": 1,
  "zero_optimisation": {"stage": 3},
  "zero_optimization": {"stage": 2, "offload_param": {"device": "cpu"}}
}
"""


def check(text: str, name: str = "ds_config.json", world: int | None = 4, **config: object) -> set[tuple[int, str]]:
    """The yamllint-style one-line helper: lint `text` as a file, return {(line, code)}."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / name
        path.write_text(text, encoding="utf-8")
        report = lint([path], config=LintConfig(**config), world=world)  # type: ignore[arg-type]
        assert not report.unusable, report.unusable
        return {(f.where.line, f.code) for f in report.findings if f.where}


def test_helper_reads_like_the_rule() -> None:
    assert check(BROKEN) == {(2, "DR102"), (4, "DR317"), (5, "DR320")}
    assert check('{"train_batch_size": 32, "zero_optimization": {"stage": 2}}') == set()
    assert check('{"train_batch_size": 32}', world=None) == {(1, "DR300")}


def test_exit_codes(cli: Callable[..., Result], write: Callable[[str, str], Path]) -> None:
    bad = write("ds_config.json", BROKEN)
    assert cli("lint", bad, "--world", "4").code == 1
    warn_only = write("warn.json", '{"train_batch_size": 8, "zero_optimization": {"offload_param": {"device": "cpu"}}}')
    assert cli("lint", warn_only, "--world", "4").code == 0
    broken = write("broken.json", '{"train_batch_size": 8,,}')
    result = cli("lint", broken)
    assert result.code == 2
    assert result.err.strip().splitlines() == [f"{broken}:1:24: error: invalid JSON: Expecting property name "
                                               "enclosed in double quotes"]
    assert "Traceback" not in result.err
    unknown = write("notes.yaml", "title: hello\n")
    result = cli("lint", unknown)
    assert (result.code, result.err.strip()) == (2, f"{unknown}:1:1: error: not a config distrecipe reads "
                                                    f"(none of {', '.join(KINDS)}): pass --kind if it is one")


def test_every_format_is_deterministic(cli: Callable[..., Result], write: Callable[[str, str], Path]) -> None:
    bad = write("ds_config.json", BROKEN)
    for name in FORMATS:
        first = cli("lint", bad, "--world", "4", "--format", name)
        assert first == cli("lint", bad, "--world", "4", "--format", name)


def test_text_and_github_formats(cli: Callable[..., Result], write: Callable[[str, str], Path]) -> None:
    bad = write("ds_config.json", BROKEN)
    text = cli("lint", bad, "--world", "4", "--format", "text").out.splitlines()
    assert text[1] == (f"{bad}:4:3: error DR317: 'zero_optimisation' is not a key of DeepSpeed "
                       f"{table('deepspeed')['version']}'s top level: silently ignored, so the setting never "
                       "applies; did you mean 'zero_optimization'?")
    assert text[-1] == "1 file checked: 2 errors, 1 warning, 0 infos"
    github = cli("lint", bad, "--world", "4", "--format", "github").out.splitlines()
    assert github[1].startswith(f"::error title=DR317,file={bad},line=4,col=3::'zero_optimisation' is not")
    assert github[2].startswith("::warning title=DR320,")


def test_auto_format_is_github_in_actions(cli: Callable[..., Result], write: Callable[[str, str], Path],
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    bad = write("ds_config.json", BROKEN)
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    assert cli("lint", bad, "--world", "4").out.startswith("::error ")
    monkeypatch.delenv("GITHUB_ACTIONS")
    assert cli("lint", bad, "--world", "4").out.startswith(str(bad))


def test_sarif_validates_against_the_schema(cli: Callable[..., Result]) -> None:
    corpus = Path(__file__).parent / "lint_corpus"
    result = cli("lint", corpus, "--world", "8", "--format", "sarif")
    log = json.loads(result.out)
    jsonschema.Draft4Validator.check_schema(SCHEMA)
    jsonschema.Draft4Validator(SCHEMA).validate(log)
    run = log["runs"][0]
    assert {rule["id"] for rule in run["tool"]["driver"]["rules"]} == set(RULES)
    assert len(run["results"]) >= 2 * len(RULES) - 2
    for res in run["results"]:
        assert run["tool"]["driver"]["rules"][res["ruleIndex"]]["id"] == res["ruleId"]
        uri = res["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
        assert not uri.startswith("/") and "\\" not in uri


def test_json_format(cli: Callable[..., Result], write: Callable[[str, str], Path]) -> None:
    bad = write("ds_config.json", BROKEN)
    data = json.loads(cli("lint", bad, "--world", "4", "--format", "json").out)
    assert data["files"] == 1
    assert [(f["line"], f["code"], f["name"], f["severity"]) for f in data["findings"]] == [
        (2, "DR102", "batch-not-exact", "error"), (4, "DR317", "deepspeed-misspelt-key", "error"),
        (5, "DR320", "offload-param-below-stage3", "warning")]


def test_yaml_suppression_on_the_line_or_above() -> None:
    accelerate = """compute_environment: LOCAL_MACHINE
distributed_type: FSDP
num_processes: 8
gpu_idss: all  # distrecipe: ignore[DR341]
fsdp_config:
  fsdp_version: 2
  # distrecipe: ignore[DR349, DR332]
  fsdp_offload_param: true
  fsdp_forward_prefetch: true
"""
    assert check(accelerate, "accelerate_config.yaml", world=8) == {(9, "DR332")}
    assert check("# distrecipe: ignore-file[DR332]\n" + accelerate, "a.yaml", world=8) == set()
    assert check(accelerate.replace("ignore[DR349, DR332]", "ignore"), "a.yaml", world=8) == {(9, "DR332")}
    assert check(accelerate.replace("  # distrecipe: ignore[DR341]", ""), "a.yaml", world=8) == {
        (4, "DR341"), (9, "DR332")}


def test_json_suppression_list_covers_the_file() -> None:
    assert check(BROKEN.replace("{\n", '{\n"//distrecipe-ignore": ["DR317", "DR102"],\n', 1)) == {(6, "DR320")}
    # DeepSpeed's ZeRO block forbids extra keys, so a list there is reported, not obeyed.
    nested = BROKEN.replace('"stage": 2,', '"stage": 2, "//distrecipe-ignore": ["DR320"],')
    assert check(nested) == {(2, "DR102"), (4, "DR317"), (5, "DR313"), (5, "DR320")}


def test_pyproject_defaults(cli: Callable[..., Result], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[tool.distrecipe]\nworld = 4\ndisable = ["DR317"]\nseverity = { DR320 = "error" }\nformat = "json"\n')
    (tmp_path / "ds.json").write_text(BROKEN)
    monkeypatch.chdir(tmp_path)
    result = cli("lint", "ds.json")
    assert [(f["code"], f["severity"]) for f in json.loads(result.out)["findings"]] == [
        ("DR102", "error"), ("DR320", "error")]
    assert cli("lint", "ds.json", "--world", "2", "--format", "text").out.startswith("ds.json:5:")
    (tmp_path / "pyproject.toml").write_text("[tool.distrecipe]\nwrold = 4\n")
    result = cli("lint", "ds.json")
    assert result.code == 2
    assert "unknown key 'wrold'; did you mean 'world'?" in result.err


def test_a_pyproject_that_never_names_distrecipe_is_not_parsed(tmp_path: Path) -> None:
    """Its TOML is its own tools' to judge (compile reads the project on every run)."""
    (tmp_path / "pyproject.toml").write_text("[tool.ruff\nline-length = [\n")
    assert load_config(tmp_path / "pyproject.toml", frozenset(RULES), frozenset(FORMATS)) == LintConfig()
    (tmp_path / "pyproject.toml").write_text("[tool.ruff\n[tool.distrecipe]\n")
    with pytest.raises(DistrecipeError, match="invalid TOML"):
        load_config(tmp_path / "pyproject.toml", frozenset(RULES), frozenset(FORMATS))


def test_config_rejects_unknown_codes(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.distrecipe]\ndisable = ["DR999"]\n')
    with pytest.raises(DistrecipeError, match="'DR999' is not one of"):
        load_config(tmp_path / "pyproject.toml", frozenset(RULES), frozenset(FORMATS))


def test_world_from_the_accelerate_config_naming_the_ds_config(tmp_path: Path) -> None:
    (tmp_path / "accelerate_config.yaml").write_text(
        "compute_environment: LOCAL_MACHINE\ndistributed_type: DEEPSPEED\nnum_processes: 8\n"
        "deepspeed_config:\n  deepspeed_config_file: ds_config.json\n")
    (tmp_path / "ds_config.json").write_text(
        '{"train_batch_size": 4, "gradient_accumulation_steps": 1, "zero_optimization": {"stage": 1}}')
    report = lint([tmp_path / "ds_config.json"], config=LintConfig())
    assert [(f.code, f.message.split(":")[0]) for f in report.findings] == [
        ("DR103", "train_batch_size 4 is smaller than DP 8 (world 8 from num_processes in accelerate_config.yaml)")]


def test_directories_skip_files_that_are_not_configs(tmp_path: Path) -> None:
    (tmp_path / ".github").mkdir()
    (tmp_path / ".github" / "ci.yaml").write_text("on: push\njobs: {}\n")
    (tmp_path / "requirements.txt").write_text("torch==2.13.0\n")
    (tmp_path / "run.sh").write_bytes(b"\xff\xfe not text")
    (tmp_path / "ds.json").write_text('{"train_batch_size": 8, "zero_optimization": {"stage": 2}}')
    report = lint([tmp_path], config=LintConfig(), world=8)
    assert (report.files, report.findings, report.unusable) == (1, [], [])


def test_verl_overrides_are_read_with_positions() -> None:
    doc = read_overrides("python3 -m verl.trainer.main_ppo \\\n  data.train_batch_size=64 \\\n"
                         "  +actor_rollout_ref.actor.optim.betas=[0.9,0.95] trainer.nnodes=2\n", "run.sh")
    assert doc.data == {"data": {"train_batch_size": 64},
                        "actor_rollout_ref": {"actor": {"optim": {"betas": [0.9, 0.95]}}},
                        "trainer": {"nnodes": 2}}
    assert str(doc.where(("data", "train_batch_size"))) == "run.sh:2:25"
    assert str(doc.where(("trainer", "nnodes"), key=True)) == "run.sh:3:51"
    assert hydra_value("{eps:1e-08,x:[1,2]}") == {"eps": 1e-08, "x": [1, 2]}
    assert hydra_value("inf") == float("inf") and hydra_value("'a b'") == "a b"


def test_explain(cli: Callable[..., Result]) -> None:
    result = cli("explain", "dr310")
    assert result.code == 0
    assert result.out.startswith("DR310 (auto-in-raw-deepspeed; error by default; lint: deepspeed)\n\n`\"auto\"`")
    assert 'Level: error by default. A project sets it in pyproject.toml:' in result.out
    assert 'rules = { DR310 = "error" }' in result.out
    assert '"stage": "auto"' in result.out
    assert cli("explain", "DR201").out.startswith("DR201 (warning; reported by compile)")
    listing = cli("explain", "--list").out.splitlines()
    assert len(listing) == len(set(listing)) and any(line.startswith("DR371") for line in listing)
    missing = cli("explain", "DR31")
    assert missing.code == 2 and "unknown code 'DR31'" in missing.err
    settings = cli("explain", "config")
    assert settings.code == 0 and "[tool.distrecipe.lint]" in settings.out and "per_file_ignores" in settings.out


def test_every_rule_documents_itself() -> None:
    for code, rule in RULES.items():
        assert rule.summary.endswith("."), code
        assert "\nFix: " in rule.explanation, code  # its examples are run by test_rule_docs


def test_pre_commit_hook_runs_on_any_json_and_yaml(cli: Callable[..., Result], tmp_path: Path) -> None:
    import yaml

    hooks = yaml.safe_load((Path(__file__).parent.parent / ".pre-commit-hooks.yaml").read_text())
    assert [hook["id"] for hook in hooks] == ["distrecipe-lint"]
    entry = hooks[0]["entry"].split()
    assert entry[:2] == ["distrecipe", "lint"]
    # The hook is handed exactly the files lint can read (verl overrides are .txt).
    assert {s for s in (*DATA_SUFFIXES, *OVERRIDE_SUFFIXES, ".py", ".md", "")
            if re.search(hooks[0]["files"], f"x{s}")} == {*DATA_SUFFIXES, *OVERRIDE_SUFFIXES}
    (tmp_path / "package.json").write_text('{"name": "web"}')
    (tmp_path / "requirements.txt").write_text("torch==2.13.0\n")
    (tmp_path / "ds.json").write_text(BROKEN)
    result = cli(*entry[1:], tmp_path / "package.json", tmp_path / "ds.json", "--world", "4")
    assert result.code == 1 and "DR317" in result.out and "package.json" not in result.out + result.err
    assert cli(*entry[1:], tmp_path / "package.json", tmp_path / "requirements.txt").code == 0


def test_references_resolve_from_the_launch_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "ds.json").write_text('{"train_micro_batch_size_per_gpu": 2, "zero_optimization": {}}')
    (tmp_path / "configs" / "acc.yaml").write_text(
        "distributed_type: DEEPSPEED\nnum_processes: 8\ndeepspeed_config:\n  deepspeed_config_file: configs/ds.json\n")
    monkeypatch.chdir(tmp_path)  # accelerate launch opens the file from where it runs
    report = lint(["configs"], config=LintConfig())
    assert [(f.where.file if f.where else "", f.code) for f in report.findings] == [
        ("configs/acc.yaml", "DR344"), ("configs/ds.json", "DR318")]  # each file says its side


def test_every_code_in_the_package_can_be_explained() -> None:
    from distrecipe.translator.codes import CODES

    package = Path(__file__).parent.parent / "distrecipe"
    written = {code for path in package.rglob("*.py") for code in re.findall(r'"(DR\d{3})"', path.read_text())}
    assert written - set(RULES) - set(CODES) == set()


def test_dr371_quotes_the_plans_traffic(cli: Callable[..., Result], write: Callable[[str, str], Path]) -> None:
    """DR371's bytes are the engine's, the same `plan` and its advice print: FSDP2 stage 3's
    sent less stage 2's for the same recipe, accumulation included; DeepSpeed's ZeRO-3 of
    a small model sends less than its ZeRO-2 (every micro-step's all-reduce), so no DR371."""
    from distrecipe.api import load_plan
    from distrecipe.plan.report import estimate
    from distrecipe.plan.units import gb

    recipe = write("z3.yaml", """recipe: 1
model: {params: 1.0e9, hidden_size: 2048, layers: 16, heads: 16}
cluster: {nodes: 1, gpus_per_node: 8, gpu_memory: 80GB}
strategy: fsdp
stage: 3
batch: {micro: 1, accumulation: 4, global: 32, seq_len: 2048}
""")
    three = estimate(load_plan(recipe))
    two = estimate(load_plan(recipe, ("stage=2",)))
    extra = three.traffic_engine.total - two.traffic_engine.total
    out = cli("lint", recipe).out
    assert extra > 0 and f"sends {gb(extra)} less per step than stage 3" in out
    deepspeed = write("ds.yaml", recipe.read_text().replace("strategy: fsdp", "strategy: zero"))
    assert "DR371" not in cli("lint", deepspeed).out
