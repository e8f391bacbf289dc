"""Free loopback ports for processes the harness starts."""

from __future__ import annotations

import random
import socket
from pathlib import Path

__all__ = ["free_port"]

_LOWEST = 10_000
_pick = random.Random()  # its own generator: a test that seeds ``random`` must not repeat ports
_handed: set[int] = set()
"""Ports this process handed out already: one not bound yet must not be handed out twice."""


def _ephemeral_floor() -> int:
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32_768  # Linux's default
    return low


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now, below the kernel's ephemeral
    range: a port handed out by ``bind(0)`` comes from that range, which every outgoing
    connection (the load generator's, Envoy's) also draws from, and a busy test could lose
    its port to one before its server binds it."""
    high = _ephemeral_floor() - 1
    for _ in range(200):
        port = _pick.randint(_LOWEST, high) if high > _LOWEST else 0
        if port in _handed:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            found: int = sock.getsockname()[1]
        _handed.add(found)
        return found
    raise OSError("no free loopback port below the ephemeral range")
