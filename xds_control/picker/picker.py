"""One request -> the servers to name, best first: prefix key, index, rank. No gRPC here."""

from __future__ import annotations

from xds_control.picker.fleet import Fleet
from xds_control.picker.index import PrefixIndex
from xds_control.picker.metrics import PICKS
from xds_control.picker.prefix import prefix_key
from xds_control.picker.score import rank

__all__ = ["Picker"]


class Picker:
    """Picks for every pool of ``fleet``; one prefix index per pool (a prefix on one pool's
    server says nothing about another pool's)."""

    def __init__(self, *, fleet: Fleet) -> None:
        self.fleet = fleet
        self._indexes: dict[str, PrefixIndex] = {}

    def _index(self, pool: str, capacity: int) -> PrefixIndex:
        index = self._indexes.get(pool)
        if index is None or index.capacity != capacity:
            index = self._indexes[pool] = PrefixIndex(capacity=capacity)
        return index

    def pick(self, *, pool: str, body: bytes) -> list[str]:
        """Addresses for a request to ``pool`` with ``body``, best first; empty when there is
        nothing to pick on (no picker for the pool, a body too large or not a completion
        request, no healthy server): Envoy's fallback policy then decides."""
        settings = self.fleet.picker(pool)
        key = None
        if settings is not None and len(body) <= settings.max_body_bytes:
            key = prefix_key(body, prefix_bytes=settings.prefix_bytes)
        if settings is None or key is None:
            PICKS.labels(pool=pool, outcome="none").inc()
            return []
        index = self._index(pool, settings.index_size)
        holder = index.get(key)
        chosen = rank(
            self.fleet.candidates(pool),
            key=key,
            holder=holder,
            affinity=settings.affinity,
            count=1 + settings.fallbacks,
        )
        if not chosen:
            PICKS.labels(pool=pool, outcome="none").inc()
            return []
        index.put(key, chosen[0])
        PICKS.labels(pool=pool, outcome="held" if chosen[0] == holder else "placed").inc()
        return chosen
