"""Reading files: JSON positions built on demand, and one bounded reader for every file.

Hostile files (FIFO, /dev/zero, directories, symlink loops, files over the limit, bad
encodings, deep nesting) must each give one positioned line and exit 2, quickly.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from distrecipe import source
from distrecipe.errors import DistrecipeError
from distrecipe.source import BUDGET, parse_text, read_text
from tests.conftest import Result

TRICKY_JSON = [
    '{"a\\"b": {"c": [1, {"d": "x,y:z"}, [], {}]}, "e": -1.5e-3, "f": [[true], [null]]}',
    '[\n  1,\n  {"k": "\\u00e9t\\u00e9"}\n]', "{}", '"just a string"',
    '{\r\n  "a": 1,\r\n  "b": [1,\r\n 2]\r\n}', '{"#": "&x *y !z", "": {" ": "---"}}',
]
CORPUS = sorted((Path(__file__).parent / "lint_corpus").rglob("*.json"))


@pytest.mark.parametrize("text", TRICKY_JSON + [p.read_text() for p in CORPUS])
def test_json_reads_as_the_yaml_reader_does(text: str) -> None:
    """JSON is YAML: the data and every position agree with the YAML reader's."""
    as_yaml = parse_text(text, "x.yaml")
    doc = parse_text(text, "x.json")
    assert doc.data == as_yaml.data
    assert [(p, str(w)) for p, w in doc.positions.items()] == \
        [(p, str(w).replace("x.yaml", "x.json")) for p, w in as_yaml.positions.items()]
    assert {p: str(w) for p, w in doc.key_positions.items()} == \
        {p: str(w).replace("x.yaml", "x.json") for p, w in as_yaml.key_positions.items()}


class _Counting:
    """Stands in for the composer and counts how often positions are composed."""

    calls = 0

    def __new__(cls, text: str) -> Any:
        cls.calls += 1
        return yaml.SafeLoader(text)


def test_json_positions_are_composed_once_on_first_use(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(source, "_Composer", _Counting)
    doc = parse_text('{\n  "zero_optimization": {"stage": 3}\n}\n', "ds.json")
    assert doc.data == {"zero_optimization": {"stage": 3}} and _Counting.calls == 0
    assert str(doc.where(("zero_optimization", "stage"))) == "ds.json:2:34"
    assert str(doc.where(("zero_optimization", "stage"), key=True)) == "ds.json:2:25"
    assert str(doc.where(("zero_optimization", "missing"), key=True)) == "ds.json:2:3"
    assert _Counting.calls == 1, "the pure-Python composer gives the same positions, once"


def test_json_keeps_what_json_means() -> None:
    """Values are json.loads's, whatever YAML would make of the same text."""
    text = ('{"\\ud800": "\\ud83d\\ude00", "n": NaN, "i": -Infinity, "f": 1e5, "big": 123456789012345678901234,\n'
            ' "ctl": "\x7f\u2028\x85", "slash": "\\/", "after": [0.0, -0]}')
    doc = parse_text(text, "x.json")
    data = doc.data
    assert data["\ud800"] == "\U0001f600" and data["n"] != data["n"] and data["i"] == float("-inf")
    assert type(data["f"]) is float and data["big"] == 123456789012345678901234
    assert data["ctl"] == "\x7f\u2028\x85" and data["slash"] == "/" and data["after"] == [0.0, 0]
    # A raw U+2028 inside a string is not a line break; the next line is line 2.
    assert str(doc.where(("\ud800",))) == "x.json:1:12"
    assert str(doc.where(("after", 1))) == "x.json:2:46"


def test_json_positions_survive_what_yaml_cannot_compose() -> None:
    long_key = "k" * 2000
    doc = parse_text(f'{{"{long_key}": 1,\n "b": {{"c"\n   : 2}}}}', "x.json")
    assert str(doc.where((long_key,))) == "x.json:1:2006"
    assert str(doc.where(("b", "c"))) == "x.json:3:6"
    assert str(doc.where(("b", "c"), key=True)) == "x.json:2:8"
    # An empty key and a line break before its colon: positions fall back to the start.
    assert str(parse_text('{"a": {""\n: 1}}', "x.json").where(("a", ""))) == "x.json:1:1"


@pytest.mark.parametrize(("text", "where", "fragment"), [
    ('{"a": {"b": 1,\n "b": 2}}', "2:2", "duplicate key 'b' (first defined at line 1)"),
    ('[{"a": 1}, {"a": 1, "k' + "k" * 1500 + '": 0, "a": 2}]', "1:1529", "duplicate key 'a'"),
    ('{"a": 1' + "0" * 5000 + "}", "1:7", "value has 5001 digits"),
    ('{"a": {"b": 1, "b": 2}, "c": }', "1:30", "invalid JSON: Expecting value"),
    ("[" * 100_000 + "]" * 100_000, "1:1", "JSON nested too deeply"),
    ("\ufeff{}", "1:1", "Unexpected UTF-8 BOM"),
    ('{"a": "\x00"}', "1:8", "Invalid control character"),
])
def test_json_errors_are_positioned(text: str, where: str, fragment: str) -> None:
    with pytest.raises(DistrecipeError) as raised:
        parse_text(text, "x.json")
    assert str(raised.value).startswith(f"x.json:{where}: "), raised.value
    assert fragment in raised.value.message


def test_json_as_deep_as_yaml_may_be_has_positions_and_deeper_is_refused() -> None:
    doc = parse_text('{"a": ' + "[" * 63 + "1" + "]" * 63 + "}", "x.json")
    assert str(doc.where(("a", *[0] * 63))) == "x.json:1:70"
    with pytest.raises(DistrecipeError, match="nested more than 64 levels"):
        parse_text('{"a": ' + "[" * 64 + "1" + "]" * 64 + "}", "x.json")


def test_yaml_integers_longer_than_python_reads_are_refused_in_place() -> None:
    with pytest.raises(DistrecipeError, match=r"^x\.yaml:2:4: invalid number"):
        parse_text("a: 1\nb: " + "9" * 5000 + "\n", "x.yaml")


# --- one bounded reader -------------------------------------------------------------


@pytest.fixture
def deadline() -> Iterator[None]:
    """Fail, instead of hanging the suite, when a read blocks (a FIFO opened without O_NONBLOCK)."""

    def expire(signum: int, frame: object) -> None:
        raise TimeoutError("reading blocked")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, 10)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _special(kind: str, tmp_path: Path) -> Path:
    if kind == "fifo":
        os.mkfifo(tmp_path / "r.yaml")
    elif kind == "directory":
        (tmp_path / "r.yaml").mkdir()
    elif kind == "symlink loop":
        (tmp_path / "r.yaml").symlink_to(tmp_path / "other.yaml")
        (tmp_path / "other.yaml").symlink_to(tmp_path / "r.yaml")
    elif kind == "dev zero":
        (tmp_path / "r.yaml").symlink_to("/dev/zero")
    elif kind == "too big":
        (tmp_path / "r.yaml").write_bytes(b"a: 1\n" + b"#" * BUDGET.bytes)
    elif kind == "utf-16":
        (tmp_path / "r.yaml").write_bytes("recipe: 1\n".encode("utf-16"))
    elif kind == "latin-1":
        (tmp_path / "r.yaml").write_bytes("recipe: 1\nname: caf\xe9\n".encode("latin-1"))
    elif kind == "nul":
        (tmp_path / "r.yaml").write_bytes(b"recipe: 1\nname: a\x00b\n")
    elif kind == "deep yaml":
        (tmp_path / "r.yaml").write_text("[" * 100_000 + "]" * 100_000)
    return tmp_path / "r.yaml"


SPECIAL = {
    "fifo": ("1:1", "it is a FIFO (named pipe), not a regular file"),
    "directory": ("1:1", "it is a directory, not a regular file"),
    "symlink loop": ("1:1", "symlink loop"),
    "dev zero": ("1:1", "it is a character device, not a regular file"),
    "too big": ("1:1", f"larger than {BUDGET.bytes:,} bytes"),
    "utf-16": ("1:1", "UTF-16"),
    "latin-1": ("2:10", "not UTF-8 text: byte 0xE9"),
    "nul": ("2:8", "control character U+0000"),
    "deep yaml": ("1:1001", "nested more than 64 levels"),
}


@pytest.mark.parametrize(("kind", "command"), [
    (kind, command) for kind in sorted(SPECIAL) for command in ("resolve", "lint", "import")
    if (kind, command) != ("directory", "lint")  # lint walks a directory
])
def test_hostile_files_are_one_positioned_line(
    kind: str, command: str, cli: Callable[..., Result], tmp_path: Path, deadline: None
) -> None:
    path = _special(kind, tmp_path)
    where, fragment = SPECIAL[kind]
    start = time.perf_counter()
    result = cli(command, path)
    assert time.perf_counter() - start < 2
    assert result.code == 2, result
    assert result.err.count("\n") == 1 and "Traceback" not in result.err, result.err
    assert result.err.startswith(f"{path}:{where}: error: "), result.err
    assert fragment in result.err, result.err


def test_hf_config_is_read_by_the_same_reader(cli: Callable[..., Result], tmp_path: Path, deadline: None) -> None:
    recipe = tmp_path / "r.yaml"
    for target, fragment in [("/dev/zero", "character device"), ("nowhere.json", "no such file"),
                             ("bad\x00name.json", "no file name can hold")]:
        recipe.write_text("recipe: 1\nmodel:\n  hf_config: " + json.dumps(target) + "\n"
                          "cluster: {nodes: 1, gpus_per_node: 8}\nstrategy: ddp\nbatch: {micro: 1}\n")
        result = cli("resolve", recipe)
        assert result.code == 2 and result.err.count("\n") == 1, result.err
        assert result.err.startswith(f"{recipe}:3:14: error: model.hf_config ") and fragment in result.err
        assert "\x00" not in result.err
    (tmp_path / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    recipe.write_text(recipe.read_text().replace(json.dumps("bad\x00name.json"), "deep.json"))
    result = cli("resolve", recipe)
    assert result.code == 2 and "nested too deeply" in result.err


def test_pyproject_is_read_by_the_same_reader(cli: Callable[..., Result], tmp_path: Path) -> None:
    from distrecipe.lint.config import load_config

    (tmp_path / "pyproject.toml").write_bytes(b"[tool.distrecipe]\nworld = 8 # \xff\n")
    with pytest.raises(DistrecipeError, match=r"pyproject.toml:2:13: not UTF-8 text: byte 0xFF"):
        load_config(tmp_path / "pyproject.toml", frozenset(), frozenset())


def test_the_size_on_disk_is_not_trusted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file that grows after `stat`: the reader counts what it reads, not what fstat said."""
    path = tmp_path / "grows.yaml"
    path.write_bytes(b"#" * (BUDGET.bytes + 10))
    real_fstat = os.fstat

    def small(fd: int) -> os.stat_result:
        st = real_fstat(fd)
        return os.stat_result((st.st_mode, *st[1:6], 10, *st[7:]))

    monkeypatch.setattr(os, "fstat", small)
    with pytest.raises(DistrecipeError, match="larger than"):
        read_text(path)
    path.write_bytes(b"#" * BUDGET.bytes)
    assert len(read_text(path)) == BUDGET.bytes


@pytest.mark.parametrize("command", ["lint", "compile"])
@pytest.mark.parametrize("suffix", [".json", ".yaml"])
def test_wide_files_are_quick(command: str, suffix: str, cli: Callable[..., Result], tmp_path: Path) -> None:
    """60,000 keys in under 1 MiB (a recipe with an unknown section, a ds_config with unknown keys)."""
    keys = {f"k{i:05d}": i for i in range(60_000)}
    if command == "compile":
        data: dict[str, Any] = {"recipe": 1, "model": {"params": 1.3e9}, "cluster": {"nodes": 1, "gpus_per_node": 8},
                                "strategy": "ddp", "batch": {"micro": 1}, "extra": keys}
    else:
        data = {"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 2, **dict(list(keys.items())[:100])},
                "extra": keys}
    text = json.dumps(data) if suffix == ".json" else yaml.safe_dump(data, default_flow_style=None, width=1 << 30)
    path = tmp_path / f"wide{suffix}"
    path.write_text(text)
    assert len(text) < BUDGET.bytes
    start = time.perf_counter()
    result = cli(command, path, *(["--world", "8"] if command == "lint" else []))
    elapsed = time.perf_counter() - start
    assert result.code == 2 and "more than 20,000 values" in result.err
    assert elapsed < 2, f"{elapsed:.1f} s"


def test_plain_scalars_yaml_reads_as_other_types_keep_their_text() -> None:
    from distrecipe.source import strings_as_written, written_text, yaml11_reading

    doc = parse_text("a: 12:00:00\nb: no\nc: 2024-01-01\nd: 0755\ne: 'x'\nf: [on, 8]\ng: true\n", "r.yaml")
    assert [written_text(doc, (k,)) for k in "abcde"] == ["12:00:00", "no", "2024-01-01", "0755", None]
    assert [yaml11_reading(written_text(doc, (k,)) or "", doc.data[k]) for k in "abcdg"] == [
        "the base-60 number 43200", "the boolean false", "the date 2024-01-01", "the octal number 493", None]
    kept = strings_as_written(doc, lambda path, value: path != ("g",))
    assert kept.data == {"a": "12:00:00", "b": "no", "c": "2024-01-01", "d": "0755", "e": "x", "f": ["on", "8"],
                         "g": True}


# --- a key written twice ---------------------------------------------------------------


def test_a_yaml_key_written_twice_is_refused_or_recorded_with_its_last_value() -> None:
    text = "fsdp:\n  version: 1\n  offload: {device: cpu, pin: true}\n  version: 2\n  offload: {device: none}\n"
    with pytest.raises(DistrecipeError, match=r"^x\.yaml:4:3: duplicate key 'version' \(first defined at line 2\)"):
        parse_text(text, "x.yaml")
    doc = parse_text(text, "x.yaml", keep_last=True)
    assert doc.data == {"fsdp": {"version": 2, "offload": {"device": "none"}}}  # as yaml.safe_load
    assert [(d.path, str(d.first), str(d.at)) for d in doc.duplicates] == [
        (("fsdp", "version"), "x.yaml:2:3", "x.yaml:4:3"), (("fsdp", "offload"), "x.yaml:3:3", "x.yaml:5:3")]
    assert str(doc.where(("fsdp", "offload", "device"))) == "x.yaml:5:21"  # the kept value's position
    assert str(doc.where(("fsdp", "offload", "pin"))) == "x.yaml:5:12"  # gone with the first value


def test_a_key_a_merge_brings_in_and_the_mapping_writes_again_is_an_override() -> None:
    doc = parse_text("defaults: &d {micro: 2, stage: 3}\nsmall:\n  <<: *d\n  micro: 1\n", "x.yaml")
    assert doc.data["small"] == {"micro": 1, "stage": 3} and doc.duplicates == ()
