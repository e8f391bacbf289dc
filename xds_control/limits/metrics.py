"""Prometheus metrics of the priority classes' admission rates (docs/limits.md): the numbers
``/v1/limits`` shows, as series, and a counter of every change the adaptive rule made.

The gauges are set at each scrape from the limiter's last rows (``admin.exporter``), so a
route that lost its limits loses its series; the counter counts as the rule decides.
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge

__all__ = [
    "LIMIT_ADJUSTMENTS",
    "LIMIT_BUCKET_TOKENS",
    "LIMIT_ENVOYS",
    "LIMIT_ENVOY_FILL_RATE",
    "LIMIT_FILL_RATE",
    "LIMIT_P99",
    "LIMIT_P99_TARGET",
    "LIMIT_PRESSURE",
    "count_adjustment",
]

_CLASS_ON_ROUTE = ["group", "listener", "route", "class", "unit"]

LIMIT_FILL_RATE = Gauge(
    "xds_control_limit_fill_rate",
    "Fleet-wide fill rate per second of a class's budget on a route, in the node group "
    "(unit: requests or tokens); set at each scrape.",
    _CLASS_ON_ROUTE,
)
LIMIT_ENVOY_FILL_RATE = Gauge(
    "xds_control_limit_envoy_fill_rate",
    "Fill rate per second each Envoy's bucket really runs (its share of the fleet rate, in "
    "integer tokens per interval); set at each scrape.",
    _CLASS_ON_ROUTE,
)
LIMIT_BUCKET_TOKENS = Gauge(
    "xds_control_limit_bucket_tokens",
    "Size of each Envoy's bucket (burst_s of fill); set at each scrape.",
    _CLASS_ON_ROUTE,
)
LIMIT_ENVOYS = Gauge(
    "xds_control_limit_envoys",
    "Distinct Envoys sharing a node group's budgets when they were last divided (0: none yet, "
    "the first to connect gets the whole rate).",
    ["group"],
)
LIMIT_P99 = Gauge(
    "xds_control_limit_p99_seconds",
    "P99 latency read for a pool behind a limited route (latency: ttft, tpot); no series "
    "while not measured.",
    ["listener", "route", "pool", "latency"],
)
LIMIT_P99_TARGET = Gauge(
    "xds_control_limit_p99_target_seconds",
    "The P99 target of a limited route's listener (latency: ttft, tpot); no series when not "
    "watched.",
    ["listener", "route", "latency"],
)
LIMIT_PRESSURE = Gauge(
    "xds_control_limit_pressure",
    "A limited route's worst P99 over its target (1.2: 20% over); no series without a reading.",
    ["listener", "route"],
)
LIMIT_ADJUSTMENTS = Counter(
    "xds_control_limit_adjustments_total",
    "Changes the adaptive rule made to a class's rate on a route (direction: lower, raise).",
    ["listener", "route", "class", "direction"],
)

_DIRECTIONS = {"lowered": "lower", "raised": "raise"}


def count_adjustment(*, listener: str, route: str, action: str) -> None:
    """Count ``action`` (``lowered medium``, ``raised critical``) if it changed a rate; the
    rule's other actions (``held: ...``, ``fixed: ...``) change nothing."""
    verb, _, priority = action.partition(" ")
    direction = _DIRECTIONS.get(verb)
    if direction is not None and priority:
        LIMIT_ADJUSTMENTS.labels(
            listener=listener, route=route, **{"class": priority}, direction=direction
        ).inc()
