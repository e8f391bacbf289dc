"""Each tenant's recent share of what a pool let go: the fairness that comes before bands.

Every request the pool lets go for a tenant (at once, or from its queue) counts for that
tenant, and the counts halve every ``HALF_LIFE_S``, so the shares follow what tenants send now.
Among the tenants holding requests, one that was let go more than ``SLACK`` over an equal share
of theirs is over its share; the queues serve every tenant within its share first
(``FlowQueues.pop``). Tenants near equal are none of them over, so their bands decide. Pure:
the caller passes the clock.
"""

from __future__ import annotations

import math
from collections.abc import Collection

__all__ = ["HALF_LIFE_S", "SLACK", "TenantShares"]

HALF_LIFE_S = 10.0
"""How fast a tenant's past dispatches stop counting: long enough that one burst does not flip
the order, short enough that a tenant that turns heavy is over its share within seconds."""

SLACK = 0.1
"""A tenant is over its share past 110% of it: tenants sending alike are all within."""

_FORGOTTEN = 1e-3
"""A count decayed below this is dropped (the tenant has sent nothing for ~100 s)."""

_PRUNE_EVERY = 1024
"""Dispatches between two sweeps for forgotten tenants (each dispatch touches one tenant only)."""


class TenantShares:
    """The decayed dispatch count of each tenant of one pool, each decayed when it is read."""

    def __init__(self, *, half_life_s: float = HALF_LIFE_S, slack: float = SLACK) -> None:
        self.half_life_s = half_life_s
        self.slack = slack
        self._counts: dict[str, tuple[float, float]] = {}
        """Tenant -> (its count, when that count was taken)."""
        self._served = 0

    def served(self, tenant: str, *, now: float) -> None:
        """One request of ``tenant`` let go at ``now``."""
        self._counts[tenant] = (self._count(tenant, now=now) + 1.0, now)
        self._served += 1
        if self._served % _PRUNE_EVERY == 0:
            self._counts = {
                t: (count, at)
                for t, (count, at) in self._counts.items()
                if self._count(t, now=now) >= _FORGOTTEN
            }

    def over(self, waiting: Collection[str], *, now: float) -> frozenset[str]:
        """Those of ``waiting`` (the tenants holding requests) let go more than their equal
        share of what all of them were let go, by more than the slack."""
        if len(waiting) < 2:
            return frozenset()
        counts = {tenant: self._count(tenant, now=now) for tenant in waiting}
        bound = sum(counts.values()) / len(counts) * (1.0 + self.slack)
        return frozenset(tenant for tenant, count in counts.items() if count > bound)

    def _count(self, tenant: str, *, now: float) -> float:
        count, at = self._counts.get(tenant, (0.0, now))
        return count * math.exp2(-max(0.0, now - at) / self.half_life_s)
