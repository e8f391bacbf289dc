"""Counters and histograms one simulated server accumulates for its metrics endpoint.

prometheus-client's ``Histogram`` observes one value at a time; a decode step yields one
inter-token latency per running sequence, so observing per token would cost a Python call per
token. ``Histogram.observe(value, count=n)`` records the same value ``n`` times in O(1).
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

__all__ = [
    "E2E_BUCKETS",
    "ITL_BUCKETS",
    "TTFT_BUCKETS",
    "EngineStats",
    "Histogram",
]

# The bucket boundaries vLLM uses for these histograms (vllm/v1/metrics/loggers.py).
TTFT_BUCKETS = (
    0.001,
    0.005,
    0.01,
    0.02,
    0.04,
    0.06,
    0.08,
    0.1,
    0.25,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
    160.0,
    640.0,
    2560.0,
)
ITL_BUCKETS = (
    0.01,
    0.025,
    0.05,
    0.075,
    0.1,
    0.15,
    0.2,
    0.3,
    0.4,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
)
E2E_BUCKETS = (
    0.3,
    0.5,
    0.8,
    1.0,
    1.5,
    2.0,
    2.5,
    5.0,
    10.0,
    15.0,
    20.0,
    30.0,
    40.0,
    50.0,
    60.0,
    120.0,
    240.0,
    480.0,
    960.0,
    1920.0,
    7680.0,
)


class Histogram:
    """A cumulative histogram with fixed upper bounds (``+Inf`` implied)."""

    __slots__ = ("bounds", "count", "counts", "sum")

    def __init__(self, bounds: Sequence[float]) -> None:
        self.bounds = tuple(bounds)
        self.counts = [0] * (len(self.bounds) + 1)
        self.sum = 0.0
        self.count = 0

    def observe(self, value: float, count: int = 1) -> None:
        """Record ``value`` ``count`` times."""
        self.counts[bisect.bisect_left(self.bounds, value)] += count
        self.sum += value * count
        self.count += count

    def cumulative(self) -> list[tuple[float, int]]:
        """``(upper_bound, cumulative_count)`` pairs, ending with ``(inf, count)``."""
        out: list[tuple[float, int]] = []
        running = 0
        for bound, n in zip((*self.bounds, float("inf")), self.counts, strict=True):
            running += n
            out.append((bound, running))
        return out


@dataclass(slots=True)
class EngineStats:
    """Everything a server counts since it (re)started."""

    requests_success: int = 0
    requests_failed: int = 0
    requests_rejected: int = 0
    prompt_tokens: int = 0
    generation_tokens: int = 0
    prefix_queries: int = 0
    prefix_hits: int = 0
    busy_seconds: float = 0.0
    prefill_seconds: float = 0.0
    compute_seconds: float = 0.0
    """Admission to end, summed over the requests that finished: Triton's compute time, which
    it counts when a request ends, so it never goes back."""
    ttft: Histogram = field(default_factory=lambda: Histogram(TTFT_BUCKETS))
    itl: Histogram = field(default_factory=lambda: Histogram(ITL_BUCKETS))
    e2e: Histogram = field(default_factory=lambda: Histogram(E2E_BUCKETS))
    queue_time: Histogram = field(default_factory=lambda: Histogram(E2E_BUCKETS))
    started_at: float = field(default_factory=time.time)
    """Unix time of the (re)start, exported as ``process_start_time_seconds`` as a Python
    server's process collector does: a later value tells a scraper the process restarted."""
