"""A bounded ring of recent events (pushes, ACKs, NACKs, publishes, reloads, errors): what
``xdsctl events`` shows, so an operator sees what just happened without reading logs."""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from xds_control.tasks import wait_set

__all__ = ["Event", "EventLog"]


@dataclass(frozen=True, slots=True)
class Event:
    """One thing that happened; fields that do not apply are empty."""

    seq: int
    at: float
    kind: str
    """connect, disconnect, push, ack, nack, publish, reload or error."""
    node_id: str = ""
    type: str = ""
    version: str = ""
    message: str = ""

    def to_json(self) -> dict[str, Any]:
        """The shape ``/v1/events`` and ``xdsctl events -o json`` give."""
        return asdict(self)


class EventLog:
    """The newest ``capacity`` events, numbered from 1; older ones fall off."""

    def __init__(self, *, capacity: int = 1000, clock: Callable[[], float] = time.time) -> None:
        self._events: deque[Event] = deque(maxlen=capacity)
        self._clock = clock
        self._seq = 0
        self._changed = asyncio.Event()

    def add(
        self, kind: str, *, node_id: str = "", type: str = "", version: str = "", message: str = ""
    ) -> Event:
        """Record an event now."""
        self._seq += 1
        event = Event(self._seq, self._clock(), kind, node_id, type, version, message)
        self._events.append(event)
        self._changed.set()
        self._changed = asyncio.Event()
        return event

    def since(self, after: int = 0, *, limit: int = 0) -> list[Event]:
        """Events numbered above ``after``, oldest first; with ``limit``, only the newest."""
        out = [e for e in self._events if e.seq > after]
        return out[-limit:] if limit > 0 else out

    async def wait(self, after: int, *, timeout: float) -> list[Event]:
        """Events above ``after``, waiting up to ``timeout`` seconds for one to come."""
        if not (out := self.since(after)):
            if not await wait_set(self._changed, timeout=timeout):
                return []
            out = self.since(after)
        return out
