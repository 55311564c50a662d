"""A rank that waits (for scancel and requeue tests), or fails on purpose.

`--fail-rank N`: the rank whose RANK is N exits 3 at once; every other rank sleeps
`--seconds`. A requeued job (SLURM_RESTART_COUNT > 0) exits 0 at once. Launchers'
own arguments (`--local_rank=…`) are ignored. Each rank writes its pid to
`$DISTRECIPE_RUN_DIR/rank<RANK>.pid`, so a test can check that every rank is gone.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--fail-rank", type=int, default=-1)
    parser.add_argument("--seconds", type=float, default=600)
    args, _ = parser.parse_known_args()
    rank = int(os.environ.get("RANK", "0"))
    Path(os.environ["DISTRECIPE_RUN_DIR"], f"rank{rank}.pid").write_text(str(os.getpid()), encoding="utf-8")
    print(f"rank {rank} started", flush=True)
    if rank == args.fail_rank:
        sys.exit(3)
    if int(os.environ.get("SLURM_RESTART_COUNT") or 0) > 0:
        print(f"rank {rank}: requeued run, done", flush=True)
        return
    time.sleep(args.seconds)


if __name__ == "__main__":
    main()
