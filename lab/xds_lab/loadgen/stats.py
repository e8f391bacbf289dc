"""Percentiles, goodput and the JSON summary of a load run (pure functions)."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from xds_lab.loadgen.client import Result

__all__ = ["Slo", "meets_slo", "percentile", "summarize"]


@dataclass(frozen=True, slots=True)
class Slo:
    """Service-level objective for goodput; ``None`` fields are not checked."""

    ttft_s: float | None = 2.0
    tpot_s: float | None = 0.1
    e2e_s: float | None = None


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0..100) with linear interpolation between closest ranks.

    This is NumPy's default ("linear") method: rank ``(n - 1) * q / 100`` of the sorted values.
    """
    if not values:
        return math.nan
    if not 0 <= q <= 100:
        raise ValueError("q must be within [0, 100]")
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def meets_slo(result: Result, slo: Slo) -> bool:
    """True when ``result`` succeeded within every objective that applies to it."""
    if not result.ok:
        return False
    if slo.ttft_s is not None and result.ttft_s is not None and result.ttft_s > slo.ttft_s:
        return False
    tpot = result.tpot_s
    if slo.tpot_s is not None and tpot is not None and tpot > slo.tpot_s:
        return False
    return slo.e2e_s is None or result.e2e_s <= slo.e2e_s


def _dist(values: list[float]) -> dict[str, float | int]:
    if not values:
        return {"count": 0}
    return {
        "count": len(values),
        "mean": sum(values) / len(values),
        "p50": percentile(values, 50),
        "p90": percentile(values, 90),
        "p99": percentile(values, 99),
        "max": max(values),
    }


def summarize(results: Sequence[Result], *, duration_s: float, slo: Slo) -> dict[str, Any]:
    """A JSON-ready summary: latency distributions of successful requests, goodput, servers."""
    ok = [r for r in results if r.ok]
    good = sum(1 for r in results if meets_slo(r, slo))
    prompt = sum(r.prompt_tokens for r in ok)
    span = max(duration_s, 1e-9)
    return {
        "requests": len(results),
        "ok": len(ok),
        "duration_s": duration_s,
        "throughput_rps": len(ok) / span,
        "goodput_rps": good / span,
        "slo": {"ttft_s": slo.ttft_s, "tpot_s": slo.tpot_s, "e2e_s": slo.e2e_s},
        "slo_attainment": good / len(results) if results else math.nan,
        "status": {str(k): v for k, v in sorted(Counter(r.status for r in results).items())},
        "errors": len([r for r in results if r.error]),
        "servers": dict(sorted(Counter(r.server for r in ok).items())),
        "prefix_hit_ratio": sum(r.cached_tokens for r in ok) / prompt if prompt else 0.0,
        "output_tokens_per_s": sum(r.output_tokens for r in ok) / span,
        "ttft_s": _dist([r.ttft_s for r in ok if r.ttft_s is not None]),
        "tpot_s": _dist([t for r in ok if (t := r.tpot_s) is not None]),
        "e2e_s": _dist([r.e2e_s for r in ok]),
    }
