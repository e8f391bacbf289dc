"""The held requests of one pool: a bounded queue per priority band, tenants in turn within a
band, arrival order within a tenant. Pure: the controller owns the clock and the waiting."""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Hashable, Iterator
from dataclasses import dataclass, field
from enum import IntEnum

__all__ = ["Band", "FlowQueues", "Held"]


class Band(IntEnum):
    """Priority bands, dispatched highest first (the limits' classes)."""

    CRITICAL = 2
    HIGH = 1
    MEDIUM = 0

    @classmethod
    def of(cls, name: str) -> Band:
        """The band a class name says (``critical``, ``high``); anything else: MEDIUM."""
        return {"critical": cls.CRITICAL, "high": cls.HIGH}.get(name.lower(), cls.MEDIUM)


@dataclass(eq=False)
class Held:
    """One held request: who it is for, what it weighs, when it came."""

    request: Hashable
    band: Band
    tenant: str
    size: int
    arrived: float


@dataclass
class _BandQueue:
    tenants: OrderedDict[str, deque[Held]] = field(default_factory=OrderedDict)
    """Tenant -> its requests; the tenant first in order is served next (round robin)."""
    count: int = 0


class FlowQueues:
    """Bounded by ``max_queued`` requests per band and ``max_bytes`` body bytes in all."""

    def __init__(self, *, max_queued: int, max_bytes: int) -> None:
        self.max_queued = max_queued
        self.max_bytes = max_bytes
        self._bands = {band: _BandQueue() for band in Band}
        self.bytes = 0

    def __len__(self) -> int:
        return sum(q.count for q in self._bands.values())

    def queued(self, band: Band) -> int:
        """Requests held in ``band``."""
        return self._bands[band].count

    def push(self, held: Held) -> str | None:
        """Hold ``held``; the reason it cannot be (``queue-full``), else ``None``."""
        queue = self._bands[held.band]
        if queue.count >= self.max_queued or self.bytes + held.size > self.max_bytes:
            return "queue-full"
        queue.tenants.setdefault(held.tenant, deque()).append(held)
        queue.count += 1
        self.bytes += held.size
        return None

    def pop(self) -> Held | None:
        """The next to dispatch: the highest band holding any, its next tenant's oldest; that
        tenant goes to the back of its band's turn."""
        for band in sorted(Band, reverse=True):
            queue = self._bands[band]
            if not queue.count:
                continue
            tenant, waiting = next(iter(queue.tenants.items()))
            held = waiting.popleft()
            del queue.tenants[tenant]
            if waiting:
                queue.tenants[tenant] = waiting  # to the back of the turn
            self._taken(queue, held)
            return held
        return None

    def remove(self, held: Held) -> bool:
        """Take ``held`` out (it expired or its client left); whether it was held."""
        queue = self._bands[held.band]
        waiting = queue.tenants.get(held.tenant)
        if waiting is None or held not in waiting:
            return False
        waiting.remove(held)
        if not waiting:
            del queue.tenants[held.tenant]
        self._taken(queue, held)
        return True

    def _taken(self, queue: _BandQueue, held: Held) -> None:
        queue.count -= 1
        self.bytes -= held.size

    def expired(self, *, now: float, max_wait_s: float) -> Iterator[Held]:
        """Those held longer than ``max_wait_s`` at ``now`` (not removed: ``remove`` them)."""
        for queue in self._bands.values():
            for waiting in queue.tenants.values():
                for held in waiting:
                    if now - held.arrived < max_wait_s:
                        break  # arrival order within a tenant
                    yield held
