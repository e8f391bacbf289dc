"""Per-point metrics from the load generator's results (pure functions).

Latency percentiles use the load generator's ``percentile`` (linear interpolation). A request
that timed out before its first token is kept in the TTFT distribution with the time it waited
(a lower bound): dropping it would make the policies that starve a server look better the
more they starve it.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from xds_lab.loadgen.client import Result
from xds_lab.loadgen.stats import Slo, meets_slo, percentile

__all__ = ["REQUIRED_FIELDS", "point_metrics", "prefix_hit_ratio"]

REQUIRED_FIELDS = (
    "requests",
    "ok",
    "errors",
    "timeouts",
    "shed",
    "ttft_p50_s",
    "ttft_p90_s",
    "ttft_p99_s",
    "tpot_p99_s",
    "e2e_p99_s",
    "throughput_rps",
    "output_tokens_per_s",
    "goodput_rps",
    "slo_attainment",
    "prefix_hit_ratio",
    "eds_pushes",
)
"""Every point result has these; the smoke test checks them."""


def _timed_out(result: Result) -> bool:
    return result.error.startswith("TimeoutError")


def prefix_hit_ratio(
    before: Mapping[str, Mapping[str, int]], after: Mapping[str, Mapping[str, int]]
) -> float:
    """Prefix-cache hits over queries (tokens), summed over servers, between two readings."""
    hits = sum(after[s]["prefix_hits"] - before.get(s, {}).get("prefix_hits", 0) for s in after)
    queries = sum(
        after[s]["prefix_queries"] - before.get(s, {}).get("prefix_queries", 0) for s in after
    )
    return hits / queries if queries > 0 else 0.0


def point_metrics(
    results: Sequence[Result], *, duration_s: float, slo: Slo, time_scale: float
) -> dict[str, Any]:
    """Counts, latency percentiles (seconds, divided by ``time_scale``: simulated time),
    throughput and goodput over ``duration_s`` (the nominal arrival window)."""
    ok = [r for r in results if r.ok]
    ttft = [r.ttft_s for r in ok if r.ttft_s is not None]
    ttft += [r.e2e_s for r in results if r.stream and _timed_out(r) and r.ttft_s is None]
    tpot = [t for r in ok if (t := r.tpot_s) is not None]
    e2e = [r.e2e_s for r in ok] + [r.e2e_s for r in results if _timed_out(r)]
    scaled = Slo(
        ttft_s=None if slo.ttft_s is None else slo.ttft_s * time_scale,
        tpot_s=None if slo.tpot_s is None else slo.tpot_s * time_scale,
    )
    good = sum(1 for r in results if meets_slo(r, scaled))
    span = max(duration_s, 1e-9)

    def pct(values: list[float], q: float) -> float:
        return percentile(values, q) / time_scale if values else math.nan

    return {
        "requests": len(results),
        "ok": len(ok),
        "errors": len(results) - len(ok),
        "timeouts": sum(1 for r in results if _timed_out(r)),
        "shed": sum(1 for r in results if r.status in (429, 503)),
        "status": {str(k): v for k, v in sorted(Counter(r.status for r in results).items())},
        "ttft_samples": len(ttft),
        "ttft_p50_s": pct(ttft, 50),
        "ttft_p90_s": pct(ttft, 90),
        "ttft_p99_s": pct(ttft, 99),
        "tpot_p99_s": pct(tpot, 99),
        "e2e_p99_s": pct(e2e, 99),
        # Rates are per simulated second too, so levels compare across time scales.
        "throughput_rps": len(ok) / span * time_scale,
        "output_tokens_per_s": sum(r.output_tokens for r in ok) / span * time_scale,
        "goodput_rps": good / span * time_scale,
        "slo_attainment": good / len(results) if results else math.nan,
        "servers": dict(sorted(Counter(r.server for r in ok).items())),
        "ttft_s": sorted(round(t / time_scale, 4) for t in ttft),
    }
