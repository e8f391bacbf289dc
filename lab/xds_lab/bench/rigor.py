"""How long and how often the suite measures: ``FULL`` for ``make bench``, ``QUICK`` for a look
and the smoke test.

``FULL`` runs the headline point (the scenario's load level closest to 80%) with ``seeds``
different arrival sequences, each of at least ``min_requests`` measured requests per policy,
so a P99 rests on six requests or more and the report gives the median with min-max across
seeds; it also adds a 100% point (scenarios without events) that confirms the capacity.
Other load levels run once, for the curves.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["FULL", "QUICK", "Rigor", "headline_load"]


@dataclass(frozen=True, slots=True)
class Rigor:
    """Run length and repetitions of a scenario's points."""

    name: str
    seeds: int
    min_requests: int
    """Per seed at the headline point; the point runs longer than the scenario says if needed."""
    headline: float = 0.8
    confirm_load: float | None = 1.0
    """Added to the load levels (no events) so the best policy can confirm the capacity."""

    def seconds(self, *, duration_s: float, rate_sim: float, headline: bool) -> float:
        """Seconds of arrivals for a point at ``rate_sim`` simulated requests/s."""
        if not headline or self.min_requests <= 0:
            return duration_s
        return max(duration_s, self.min_requests / rate_sim)

    def loads(self, levels: Sequence[float], *, events: bool) -> tuple[float, ...]:
        """The scenario's levels, plus the confirmation level where it applies."""
        extra = self.confirm_load
        if events or extra is None or any(abs(x - extra) < 1e-9 for x in levels):
            return tuple(levels)
        return tuple(sorted((*levels, extra)))


FULL = Rigor("full", seeds=3, min_requests=600)
QUICK = Rigor("quick", seeds=1, min_requests=0, confirm_load=None)


def headline_load(levels: Sequence[float], *, target: float = 0.8) -> float:
    """The level closest to ``target`` (an events scenario's only level is its headline)."""
    return min(levels, key=lambda x: (abs(x - target), x))
