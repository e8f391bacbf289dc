"""The token buckets each node group's Envoys enforce: one frozen value from the limits stage
to the route builder.

A class's admission rate is fleet-wide; what an Envoy runs is a bucket of whole tokens, its share of
that rate (``bucket_for_rate``). ``Buckets`` holds one bucket per node group, listener, route
and priority class. It is a value (frozen, compared by content), so the loop can tell that
nothing changed and the builders cannot change it. Pure.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from xds_control.config import PriorityClass

__all__ = ["Bucket", "Buckets", "RouteBucket", "bucket_for_rate"]

_MIN_INTERVAL_S = 0.05
"""Envoy refuses a fill interval under 50 ms."""


@dataclass(frozen=True, slots=True)
class Bucket:
    """One Envoy token bucket: ``tokens_per_fill`` every ``fill_interval_s``, at most
    ``max_tokens`` saved up."""

    max_tokens: int
    tokens_per_fill: int
    fill_interval_s: float

    @property
    def rate(self) -> float:
        """The fill rate Envoy really runs, per second (integers make it round)."""
        return self.tokens_per_fill / self.fill_interval_s


def bucket_for_rate(rate: float, *, burst_s: float) -> Bucket:
    """The bucket nearest to ``rate`` per second: the fewest tokens per fill that lets the
    interval be at least Envoy's 50 ms, and the interval that makes them ``rate`` (to the
    microsecond), so a third of 10/s is 3.33/s and not 3. It holds ``burst_s`` seconds of
    fill, at least one token."""
    tokens = max(1, math.ceil(rate * _MIN_INTERVAL_S))
    return Bucket(
        max_tokens=max(1, math.ceil(rate * burst_s)),
        tokens_per_fill=tokens,
        fill_interval_s=max(_MIN_INTERVAL_S, round(tokens / rate, 6)),
    )


@dataclass(frozen=True, slots=True)
class RouteBucket:
    """The bucket each Envoy of ``group`` runs for one class of one route."""

    group: str
    listener: str
    route: str
    priority: PriorityClass
    bucket: Bucket


@dataclass(frozen=True, slots=True)
class Buckets:
    """Every bucket the Envoys enforce, in config order; a class with none is not limited."""

    entries: tuple[RouteBucket, ...] = ()

    def of_group(self, group: str) -> Buckets:
        """The buckets ``group``'s Envoys enforce (what one group's snapshot is built with)."""
        return Buckets(tuple(e for e in self.entries if e.group == group))

    def of_route(self, listener: str, route: str) -> Mapping[PriorityClass, Bucket]:
        """Class -> bucket of one route, in a one-group ``Buckets`` (``of_group``)."""
        return {
            e.priority: e.bucket
            for e in self.entries
            if e.listener == listener and e.route == route
        }
