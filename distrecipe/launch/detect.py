"""What launch asks the machine: its GPU count without torch, and a local port held for the job.

How many GPUs this node has, for `cluster.gpus_per_node: auto`:

`CUDA_VISIBLE_DEVICES` first, because it is what the job will actually see (a SLURM
allocation or a user narrowing the devices sets it); then `nvidia-smi -L`, one line
per GPU. Importing torch to ask would cost seconds and, on a login node, initialise
CUDA for nothing.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
from collections.abc import Callable, Mapping

from distrecipe.errors import LaunchError

Run = Callable[[list[str]], str]


def _nvidia_smi(argv: list[str]) -> str:
    return subprocess.run(argv, capture_output=True, text=True, timeout=30, check=True).stdout


def visible_devices(value: str) -> int:
    """Devices named in a CUDA_VISIBLE_DEVICES value.

    CUDA stops enumerating at the first invalid entry, and `-1` is the usual way to
    hide every device, so counting stops there too.
    """
    count = 0
    for entry in value.split(","):
        entry = entry.strip()
        if not entry or entry.startswith("-"):
            break
        count += 1
    return count


def detect_gpus(env: Mapping[str, str], *, run: Run = _nvidia_smi,
                which: Callable[[str], str | None] = shutil.which) -> int:
    """GPUs visible to a job started from `env`; a `LaunchError` when there are none."""
    if "CUDA_VISIBLE_DEVICES" in env:
        count = visible_devices(env["CUDA_VISIBLE_DEVICES"])
        if count == 0:
            raise LaunchError(f"CUDA_VISIBLE_DEVICES={env['CUDA_VISIBLE_DEVICES']!r} hides every GPU; "
                              "set cluster.gpus_per_node or cluster.device: cpu")
        return count
    tool = which("nvidia-smi")
    if tool is None:
        raise LaunchError("cluster.gpus_per_node is auto but there is no nvidia-smi here; "
                          "write the number, or use cluster.device: cpu")
    try:
        listing = run([tool, "-L"])
    except (OSError, subprocess.SubprocessError) as exc:
        raise LaunchError(f"nvidia-smi -L failed ({exc}); write cluster.gpus_per_node") from None
    count = sum(1 for line in listing.splitlines() if line.startswith("GPU "))
    if count == 0:
        raise LaunchError("nvidia-smi -L lists no GPUs; write cluster.gpus_per_node")
    return count


def hold_port(preferred: int) -> socket.socket:
    """A socket bound to `preferred` here, else to a free port the kernel picks; the caller
    keeps it open until the job has ended.

    Only for one-node jobs, whose rendezvous nobody else needs to find. Probing a port
    and releasing it lets two launches started together pick the same one (both see
    29500 free, one rank 0 then dies with EADDRINUSE). So the port stays bound, never
    listening: it is bound first without SO_REUSEADDR, which fails while anything else
    holds the port (another launch's reservation, a listener, a closing connection),
    and then marked SO_REUSEADDR, which lets the job's own rank 0 (torch's TCPStore, whose
    sockets set SO_REUSEADDR) bind and listen on it beside this socket.
    """
    sock = socket.socket()
    try:
        try:
            sock.bind(("127.0.0.1", preferred))
        except OSError:
            sock.bind(("127.0.0.1", 0))
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    except OSError as exc:
        sock.close()
        raise LaunchError(f"cannot reserve a local port for the rendezvous: {exc.strerror or exc}") from None
    return sock
