"""Free loopback ports for processes the harness starts."""

from __future__ import annotations

import os
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


def _lane() -> tuple[int, int]:
    """``(index, count)`` of this process among test runs started side by side, else ``(0, 1)``:
    ``XDS_LAB_PORT_LANE=<index>/<count>`` (``make test``'s two lanes), or pytest-xdist's
    ``PYTEST_XDIST_WORKER=gw<index>`` and ``PYTEST_XDIST_WORKER_COUNT``. Each lane draws only
    ports ``p`` with ``p % count == index``: two lanes never hand out the same port, even when
    one has not bound its port yet when the other checks it."""
    lane = os.environ.get("XDS_LAB_PORT_LANE", "")
    worker = os.environ.get("PYTEST_XDIST_WORKER", "").removeprefix("gw")
    index_s, _, count_s = lane.partition("/")
    if not lane:
        index_s, count_s = worker, os.environ.get("PYTEST_XDIST_WORKER_COUNT", "")
    try:
        index, count = int(index_s), int(count_s)
    except ValueError:
        return 0, 1
    return (index, count) if 0 <= index < count else (0, 1)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now, below the kernel's ephemeral
    range: a port handed out by ``bind(0)`` comes from that range, which every outgoing
    connection (the load generator's, Envoy's) also draws from, and a busy test could lose
    its port to one before its server binds it."""
    high = _ephemeral_floor() - 1
    index, count = _lane()
    for _ in range(200):
        # No range to share: 0, the kernel's pick (unique among bound ports).
        port = _pick.randrange(_LOWEST + index, high, count) if high - _LOWEST > count else 0
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
