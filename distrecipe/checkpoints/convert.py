"""Run the engine's own converter, all or nothing, and record what was done.

Every converter writes into a fresh temporary folder beside its destination, which is
renamed into place only when the converter succeeded; the record (`distrecipe-convert.json`:
converter, command, source, what it changes) is written inside before the rename. A
failing converter leaves nothing behind and is one line, exit 2.

* `universal`: DeepSpeed's `ds_to_universal` (a subprocess, as its README runs it), into
  `TAG_universal` beside the tag, then `latest_universal` in the save dir naming it;
* `fp32`: DeepSpeed's `zero_to_fp32` into `TAG_fp32/model.safetensors`, with the model's
  `config.json` copied beside it when given, so `from_pretrained` loads the folder;
* `torch` / `dcp`: torch's `dcp_to_torch_save` / `torch_save_to_dcp`;
* `merged`: Accelerate's `merge_fsdp_weights` (`accelerate merge-weights`) on an Accelerate
  FSDP checkpoint's `pytorch_model_fsdp_0` (or a model-only DCP folder), into
  `model.safetensors`, with `config.json` beside it when given.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Literal

from distrecipe.checkpoints.layout import CONVERTED, DS_LATEST_UNIVERSAL, CheckpointError, Layout, read
from distrecipe.output import to_json

Target = Literal["universal", "fp32", "torch", "dcp", "merged"]
ACCEPTS: dict[Target, tuple[str, ...]] = {"universal": ("deepspeed",), "fp32": ("deepspeed",),
                                          "torch": ("dcp",), "dcp": (), "merged": ("accelerate", "dcp")}
"""The checkpoint kinds each conversion reads (`dcp` reads a torch.save file, not a folder)."""


def destination(source: Path, to: Target) -> Path:
    if to == "dcp":
        return source.with_name(source.stem + "_dcp")
    if to == "torch":
        return source.with_name(source.name + ".pt")
    return source.with_name(f"{source.name}_{to}")


def convert(source: Path, to: Target, *, out: Path | None = None, hf_config: Path | None = None) -> Path:
    """Convert the checkpoint at `source`; returns what was written."""
    origin = source
    if to == "dcp":
        if not source.is_file():
            raise CheckpointError(f"{source}: --to dcp reads a torch.save file, and this is not a file")
        kind = "torch.save file"
    else:
        from distrecipe.checkpoints.inspect import deepen

        layout = deepen(read(source))
        if not layout.complete:
            raise CheckpointError(f"checkpoint {layout.path} is partial ({layout.partial}): not converted")
        if layout.kind not in ACCEPTS[to]:
            accepted = " or ".join(ACCEPTS[to])
            raise CheckpointError(f"checkpoint {layout.path} is a {layout.kind} checkpoint; --to {to} "
                                  f"converts {accepted} checkpoints")
        source, kind = layout.path, layout.kind
        origin = layout.path
        if to == "merged" and layout.kind == "accelerate":
            if layout.inner is None or layout.inner.kind != "dcp":
                raise CheckpointError(f"checkpoint {layout.path} holds no sharded FSDP model "
                                      "(pytorch_model_fsdp_0): its model is already whole")
            source = layout.inner.path
    target = out or destination(origin, to)
    if target.exists():
        raise CheckpointError(f"{target} already exists: nothing converted (remove it or give --out)")
    if hf_config is not None and not hf_config.is_file():
        raise CheckpointError(f"--hf-config {hf_config} is not a file")
    steps: dict[Target, Callable[[Path, Path], list[str]]] = {
        "universal": _universal, "fp32": _fp32, "torch": _to_torch, "dcp": _to_dcp, "merged": _merged}
    work = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        written = work / "out"
        command = steps[to](source, written)
        if hf_config is not None:
            shutil.copyfile(hf_config, written / "config.json")
        record = {"converter": to, "command": command, "source": str(source), "source_kind": kind,
                  "changes": CHANGES[to]}
        if written.is_dir():
            (written / CONVERTED).write_text(to_json(record), encoding="utf-8")
        else:
            (work / CONVERTED).write_text(to_json(record), encoding="utf-8")
        os.rename(written, target)
        if not target.is_dir():
            os.rename(work / CONVERTED, target.with_name(target.name + "." + CONVERTED))
        if to == "universal":
            _mark_universal(target)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return target


CHANGES: dict[Target, str] = {
    "universal": "each parameter whole with its optimizer moments (zero/<param>/); loads at any DP/TP/PP "
                 "world with the ds_config's checkpoint.load_universal true",
    "fp32": "the full fp32 weights as model.safetensors; no optimizer state or step",
    "torch": "the whole DCP state as one torch.save file",
    "dcp": "the torch.save state as a DCP folder, resharded on load",
    "merged": "the whole model as model.safetensors (from_pretrained loads it beside its config.json); "
              "no optimizer state",
}


def _universal(source: Path, written: Path) -> list[str]:
    # --inject_missing_state: only Megatron-DeepSpeed stores `universal_checkpoint_info`; for
    # any other model the converter adds the version marker it checks for (and nothing else).
    command = [sys.executable, "-m", "deepspeed.checkpoint.ds_to_universal", "--input_folder", str(source),
               "--output_folder", str(written), "--num_extract_workers", "1", "--num_merge_workers", "1",
               "--inject_missing_state"]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        said = result.stderr.strip() or result.stdout.strip() or f"exit {result.returncode}"
        last = said.splitlines()[-1]
        raise CheckpointError(f"ds_to_universal failed on {source}: {last}")
    return ["python", "-m", "deepspeed.checkpoint.ds_to_universal", "--input_folder", str(source),
            "--output_folder", str(source.with_name(source.name + "_universal")), "--inject_missing_state"]


def _mark_universal(target: Path) -> None:
    """`latest_universal` in the save dir, written through a temporary file and a rename."""
    marker = target.parent / DS_LATEST_UNIVERSAL
    temporary = target.parent / f".{DS_LATEST_UNIVERSAL}.{os.getpid()}"
    temporary.write_text(target.name, encoding="utf-8")
    os.replace(temporary, marker)


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """The in-process converters' prints and progress bars held back: the command's own
    output is one line, and a failure's message carries the converter's reason."""
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        yield


def _fp32(source: Path, written: Path) -> list[str]:
    with _quiet():
        from deepspeed.utils.zero_to_fp32 import convert_zero_checkpoint_to_fp32_state_dict

    try:
        with _quiet():
            convert_zero_checkpoint_to_fp32_state_dict(str(source.parent), str(written), tag=source.name,
                                                       safe_serialization=True)
    except BaseException as exc:  # torch's CheckpointException is no Exception
        raise _failed("zero_to_fp32", source, exc) from None
    return ["python", "-m", "deepspeed.utils.zero_to_fp32", str(source.parent), str(written),
            "--tag", source.name, "--safe_serialization"]


def _to_torch(source: Path, written: Path) -> list[str]:
    return _dcp_format("dcp_to_torch", source, written)


def _to_dcp(source: Path, written: Path) -> list[str]:
    return _dcp_format("torch_to_dcp", source, written)


def _dcp_format(mode: str, source: Path, written: Path) -> list[str]:
    """torch's own DCP ↔ torch.save converter, `mode` as its command line names it."""
    from torch.distributed.checkpoint import format_utils

    converter = format_utils.dcp_to_torch_save if mode == "dcp_to_torch" else format_utils.torch_save_to_dcp
    try:
        with _quiet():
            converter(source, written)
    except BaseException as exc:  # torch's CheckpointException is no Exception
        raise _failed(converter.__name__, source, exc) from None
    return ["python", "-m", "torch.distributed.checkpoint.format_utils", mode, str(source), str(written)]


def _failed(converter: str, source: Path, exc: BaseException) -> BaseException:
    """The converter's own refusal as one line (its last: torch's DCP errors carry the
    rank's traceback before it), or `exc` itself for an interrupt."""
    if isinstance(exc, (KeyboardInterrupt, SystemExit)):
        return exc
    said = str(exc).strip().splitlines()
    last = said[-1] if said else ""
    return CheckpointError(f"{converter} failed on {source}: {type(exc).__name__}: {last}")


def _merged(source: Path, written: Path) -> list[str]:
    try:
        with _quiet():
            from accelerate.utils import merge_fsdp_weights

            merge_fsdp_weights(str(source), str(written), safe_serialization=True)
    except BaseException as exc:  # torch's CheckpointException is no Exception
        raise _failed("merge_fsdp_weights", source, exc) from None
    return ["accelerate", "merge-weights", str(source), str(written)]


def record_of(path: Path) -> dict[str, object] | None:
    """What `convert` recorded for `path`, if it wrote it."""
    found = path / CONVERTED if path.is_dir() else path.with_name(path.name + "." + CONVERTED)
    try:
        data: object = json.loads(found.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def describe(layout: Layout) -> str:
    return layout.describe()
