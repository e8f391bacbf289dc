"""How many streams may answer an initial request at once: what keeps a reconnecting fleet from
holding every stream's whole snapshot in memory at the same moment.

An initial request (no nonce: a new stream, a new type, a reconnect) is answered with every
resource asked for: with 10,000 endpoints, about 300 kB per stream, serialised once more by
gRPC and held until the Envoy has read it. A thousand streams syncing at once took RSS up by
200 to 350 MB that way in the fleet benchmark (``docs/benchmarks.md``). Through the gate, at
most ``limit`` such answers are being built and written at a time; the rest wait their turn,
which costs the fleet's first sync nothing measurable, since it is CPU-bound anyway.

A slot is given back when the write completes, or after ``hold_s`` whatever happens: an Envoy
that never reads cannot keep a slot, so stuck streams never stop the others' first sync.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

__all__ = ["InitialGate"]


class InitialGate:
    """A semaphore whose slots also come back on their own after ``hold_s`` seconds."""

    def __init__(self, *, limit: int = 32, hold_s: float = 2.0) -> None:
        self._slots = asyncio.Semaphore(limit)
        self._hold_s = hold_s

    async def enter(self) -> Callable[[], None]:
        """Wait for a slot; return what gives it back (safe to call more than once)."""
        await self._slots.acquire()
        given_back = False

        def release() -> None:
            nonlocal given_back
            if not given_back:
                given_back = True
                timer.cancel()
                self._slots.release()

        timer = asyncio.get_running_loop().call_later(self._hold_s, release)
        return release
