"""Seeds of one (policy, load) point into one row: median with min-max (pure).

A headline point runs several seeds (different arrivals, same for every policy); the row keeps
every metric's median across the seeds that are results (not lag-flagged) and, for the
figures the report shows with a range, their min and max. ``requests`` is the smallest number
of requests of any seed, so ``rests_on`` can say how many requests a percentile stands on.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = ["RANGED", "aggregate_points", "rests_on", "summarise"]

RANGED = ("ttft_p50_s", "ttft_p90_s", "ttft_p99_s", "goodput_rps", "prefix_hit_ratio")
"""Metrics whose min-max across seeds the report shows beside the median."""

_KEYS = ("policy", "load")


def rests_on(requests: int, q: float) -> int:
    """How many requests lie at or above the ``q``-th percentile: a P99 over 600 rests on 6."""
    return max(0, round(requests * (100 - q) / 100))


def summarise(values: Iterable[float]) -> tuple[float, float, float]:
    """(median, min, max) of the finite values; NaNs if there are none."""
    finite = [v for v in values if isinstance(v, int | float) and math.isfinite(v)]
    if not finite:
        return math.nan, math.nan, math.nan
    return statistics.median(finite), min(finite), max(finite)


def _row(points: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    first = points[0]
    kept = [p for p in points if not p.get("lag_flag")]
    row: dict[str, Any] = {k: first[k] for k in (*_KEYS, "ours") if k in first}
    row.update(
        {
            "reference": first.get("reference", False),
            "seeds": len(kept),
            "flagged": len(points) - len(kept),
            "flags": [p["lag_flag"] for p in points if p.get("lag_flag")],
            "range": {},
        }
    )
    if not kept:
        row["requests"] = 0
        return row
    numeric = {
        k for k, v in kept[0].items() if isinstance(v, int | float) and not isinstance(v, bool)
    }
    for key in sorted(numeric - set(_KEYS)):
        median, low, high = summarise(p.get(key, math.nan) for p in kept)
        row[key] = median
        if key in RANGED:
            row["range"][key] = (low, high)
    row["requests"] = min(int(p["requests"]) for p in kept)
    # Lists (TTFTs, weights, events) come from the first seed that is a result: plots need one.
    for key, value in kept[0].items():
        row.setdefault(key, value)
    return row


def aggregate_points(points: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One row per (policy, load), in first-seen order."""
    groups: dict[tuple[Any, ...], list[Mapping[str, Any]]] = {}
    for p in points:
        groups.setdefault(tuple(p[k] for k in _KEYS), []).append(p)
    return [_row(group) for group in groups.values()]
