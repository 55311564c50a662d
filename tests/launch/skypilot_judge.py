"""SkyPilot's own judgement of task files, run by SkyPilot's interpreter (`.venv-skypilot`).

SkyPilot pins click<8.2, which the project's venv cannot hold, so the tests call this
script in a subprocess of `.venv-skypilot/bin/python` (`make skypilot`), once for all
files: `import sky` alone costs seconds. Each file goes through what `sky launch` runs
before it asks any cloud (`dag_utils.load_chain_dag_from_yaml`): `sky.Task.from_yaml_config`,
which turns the envs' values into strings, checks the task schema
(`sky.utils.schemas.get_task_schema` with `common_utils.validate_schema`, SkyPilot's
"did you mean" wording), refuses an env left null, and parses the resources (their own
schema), `num_nodes` and the workdir. The schema is not applied to the file as read
beforehand: `sky launch` never does, and a number in `envs` (`MAX_JOBS: 4`) passes
there. No API server, credentials or catalog are needed; the accelerator's name is
looked up only at launch (it is not judged here).

Prints one JSON object per file: `{"file", "ok", "error", "skypilot" (its version),
"num_nodes", "accelerators", "cpus", "workdir", "run", "setup", "file_mounts"}`. Exit 0 when every file was read (accepted or not).
Importing sky writes `~/.sky/`: run it with HOME set to a scratch directory.
"""

from __future__ import annotations

import json
import sys

import yaml


def judge(path: str) -> dict[str, object]:
    import sky

    with open(path, encoding="utf-8") as handle:
        config = yaml.safe_load(handle)
    verdict: dict[str, object] = {"file": path, "ok": False, "error": None, "skypilot": sky.__version__}
    try:
        task = sky.Task.from_yaml_config(dict(config))
    except Exception as exc:  # SkyPilot's refusals are ValueErrors and its own config errors
        verdict["error"] = f"{type(exc).__name__}: {exc}"
        return verdict
    resources = next(iter(task.resources))
    verdict.update(ok=True, num_nodes=task.num_nodes, accelerators=resources.accelerators,
                   cpus=resources.cpus, workdir=task.workdir, run=task.run, setup=task.setup,
                   file_mounts=task.file_mounts)
    return verdict


def main(paths: list[str]) -> int:
    for path in paths:
        print(json.dumps(judge(path), sort_keys=True, default=str), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
