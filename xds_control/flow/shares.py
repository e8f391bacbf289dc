"""Each tenant's recent share of what a pool let go: the fairness that comes before bands.

Every request the pool lets go for a tenant (at once, or from its queue) counts for that
tenant, and the counts halve every ``HALF_LIFE_S``, so the shares follow what tenants send now.
Among the tenants holding requests, one that was let go more than ``SLACK`` over an equal share
of theirs is over its share; the queues serve every tenant within its share first
(``FlowQueues.pop``). Tenants near equal are none of them over, so their bands decide. Pure:
the caller passes the clock.
"""

from __future__ import annotations

from collections.abc import Collection

__all__ = ["HALF_LIFE_S", "SLACK", "TenantShares"]

HALF_LIFE_S = 10.0
"""How fast a tenant's past dispatches stop counting: long enough that one burst does not flip
the order, short enough that a tenant that turns heavy is over its share within seconds."""

SLACK = 0.1
"""A tenant is over its share past 110% of it: tenants sending alike are all within."""

_FORGOTTEN = 1e-3
"""A count decayed below this is dropped (the tenant has sent nothing for ~100 s)."""


class TenantShares:
    """The decayed dispatch count of each tenant of one pool."""

    def __init__(self, *, half_life_s: float = HALF_LIFE_S, slack: float = SLACK) -> None:
        self.half_life_s = half_life_s
        self.slack = slack
        self._counts: dict[str, float] = {}
        self._at: float | None = None

    def served(self, tenant: str, *, now: float) -> None:
        """One request of ``tenant`` let go at ``now``."""
        self._decay(now)
        self._counts[tenant] = self._counts.get(tenant, 0.0) + 1.0

    def over(self, waiting: Collection[str], *, now: float) -> frozenset[str]:
        """Those of ``waiting`` (the tenants holding requests) let go more than their equal
        share of what all of them were let go, by more than the slack."""
        if len(waiting) < 2:
            return frozenset()
        self._decay(now)
        counts = {tenant: self._counts.get(tenant, 0.0) for tenant in waiting}
        bound = sum(counts.values()) / len(counts) * (1.0 + self.slack)
        return frozenset(tenant for tenant, count in counts.items() if count > bound)

    def _decay(self, now: float) -> None:
        if self._at is not None and now > self._at:
            factor = 0.5 ** ((now - self._at) / self.half_life_s)
            self._counts = {
                tenant: kept
                for tenant, count in self._counts.items()
                if (kept := count * factor) >= _FORGOTTEN
            }
        if self._at is None or now > self._at:
            self._at = now
