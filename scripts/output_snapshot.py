"""Write every output distrecipe gives for the shipped recipes and the real corpus into a folder.

    python scripts/output_snapshot.py OUT                       # this tree's distrecipe
    git worktree add /tmp/base BASE
    python scripts/output_snapshot.py BASE_OUT --code /tmp/base # the same inputs, BASE's code
    diff -r BASE_OUT OUT                                        # what a change altered, file by file

A change that must keep outputs byte-identical ("where nothing was lost before") is
checked by comparing two snapshots: `compile --target T` of each shipped recipe (its
files and what it prints), `resolve --format json`, `plan --format json`, and
`import` of every corpus file. Each command runs in its own process, as a user runs
it, so the snapshot holds exactly the bytes a user sees, exit code included; the
inputs are always this tree's, named by absolute path (printed as `ROOT`), so two
snapshots differ only where the code does.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGETS = ("deepspeed", "accelerate", "verl", "hf", "all")
WORLD = "8"
"""The world a corpus file that does not state one is imported at."""


def run(argv: list[str], code: Path) -> str:
    """One command's exit code and output, run with `code`'s distrecipe (`-m` imports from
    the working directory first)."""
    done = subprocess.run([sys.executable, "-m", "distrecipe", *argv], cwd=code, capture_output=True,
                          text=True, errors="backslashreplace", check=False)
    text = (f"$ distrecipe {' '.join(argv)}\nexit {done.returncode}\n"
            f"--- stdout\n{done.stdout}--- stderr\n{done.stderr}")
    return text.replace(str(ROOT), "ROOT")


def snapshot(out: Path, code: Path) -> None:
    for recipe in sorted((ROOT / "recipes").glob("*.yaml")):
        for target in TARGETS:
            with tempfile.TemporaryDirectory() as tmp:
                printed = run(["compile", str(recipe), "--target", target, "-o", tmp], code)
                folder = out / "compile" / recipe.stem / target
                folder.mkdir(parents=True)
                (folder / "_printed.txt").write_text(printed.replace(tmp, "OUT"))
                for file in sorted(Path(tmp).rglob("*")):
                    if file.is_file():
                        dest = folder / file.relative_to(tmp)
                        dest.parent.mkdir(parents=True, exist_ok=True)
                        shutil.copyfile(file, dest)
        for command in ("resolve", "plan"):
            dest = out / command / f"{recipe.stem}.txt"
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_text(run([command, str(recipe), "--format", "json"], code))
    corpus = ROOT / "tests" / "corpus" / "real"
    for file in sorted(corpus.rglob("*")):
        if not file.is_file() or file.name.endswith(".csv"):
            continue
        rel = file.relative_to(corpus)
        dest = out / "import" / f"{str(rel).replace('/', '__')}.txt"
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(run(["import", str(file), "--world", WORLD], code))


def main(argv: list[str]) -> int:
    code = ROOT
    if len(argv) == 3 and argv[1] == "--code":
        code, argv = Path(argv[2]).resolve(), argv[:1]
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    out = Path(argv[0])
    if out.exists():
        print(f"{out} exists; give a new folder", file=sys.stderr)
        return 2
    snapshot(out, code)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
