"""Limits: priority-class admission rates that follow the measured P99 (docs/limits.md).

The stage in the order a rate is made: ``rule`` (the pure rule, one cycle of one route: lower
while P99 is over target, raise back while under, hold for ``period_s`` after a change),
``keeper`` (``Limiter``: the P99s from ``signals.latency`` folded per pool, the rates kept
across cycles, divided among each node group's Envoys), ``buckets`` (``Buckets``: what each
group's Envoys enforce, the value the route builder takes) and ``metrics``. The config models
are ``config.limits``; Envoy's filter and per-route config ``xds.ratelimit``; the admin view
``admin.limits``.
"""

from xds_control.limits.buckets import Bucket, Buckets, RouteBucket, bucket_for_rate
from xds_control.limits.keeper import Limiter, RateRow, pool_latency
from xds_control.limits.rule import (
    RAISE_BELOW,
    Latency,
    RouteRates,
    adapt_rates,
    next_rates,
    pressure,
)

__all__ = [
    "RAISE_BELOW",
    "Bucket",
    "Buckets",
    "Latency",
    "Limiter",
    "RateRow",
    "RouteBucket",
    "RouteRates",
    "adapt_rates",
    "bucket_for_rate",
    "next_rates",
    "pool_latency",
    "pressure",
]
