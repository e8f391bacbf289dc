"""The held requests of one pool: a bounded queue per priority band, tenants in turn within a
band, arrival order within a tenant; tenants over their fair share (``TenantShares``) after all
the others. Pure: the controller owns the clock and the waiting."""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Collection, Hashable
from dataclasses import dataclass, field
from enum import IntEnum

__all__ = ["Band", "FlowQueues", "Held"]


class Band(IntEnum):
    """Priority bands, dispatched highest first (the limits' classes)."""

    CRITICAL = 2
    HIGH = 1
    MEDIUM = 0

    @classmethod
    def of(cls, name: str, *, default: Band | None = None) -> Band:
        """The band a class name says (``critical``, ``high``, ``medium``); anything else:
        ``default`` (unset: MEDIUM)."""
        named = {"critical": cls.CRITICAL, "high": cls.HIGH, "medium": cls.MEDIUM}
        return named.get(name.lower(), cls.MEDIUM if default is None else default)


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

    def tenants(self) -> set[str]:
        """The tenants holding requests, in any band."""
        return {tenant for queue in self._bands.values() for tenant in queue.tenants}

    def pop(self, *, over: Collection[str] = ()) -> Held | None:
        """The next to dispatch: of the tenants not ``over`` their share (if any holds a
        request, else of all), the highest band holding any, its next tenant's oldest; that
        tenant goes to the back of its band's turn."""
        for within in (True, False):
            for band in sorted(Band, reverse=True):
                queue = self._bands[band]
                tenant = next((t for t in queue.tenants if (t not in over) == within), None)
                if tenant is None:
                    continue
                waiting = queue.tenants.pop(tenant)
                held = waiting.popleft()
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
