"""A free TCP port for a test's rendezvous (torch.distributed, Ray, a local API server).

A fixed port collides when tests run in parallel (pytest-xdist) or beside another
job on the machine: `EADDRINUSE`, and a test fails for a reason not its own.
"""

from __future__ import annotations

import socket


def free_port() -> int:
    """A port the kernel had free a moment ago (bound to port 0, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port
