"""Metrics read from state at each scrape: weights, their factors and signal ages, streams per
node group, rate-limit budgets. Set at scrape time, so a series for an endpoint (or a limited
route) that left goes with it."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from xds_control.admin.protocol import Streams
from xds_control.control import EngineView
from xds_control.control.metrics import (
    ENDPOINT_WEIGHT,
    ENDPOINT_WEIGHT_FACTOR,
    POOL_RECOMMENDED_REPLICAS,
    SIGNAL_AGE,
)
from xds_control.limits.metrics import (
    LIMIT_BUCKET_TOKENS,
    LIMIT_ENVOY_FILL_RATE,
    LIMIT_ENVOYS,
    LIMIT_FILL_RATE,
    LIMIT_P99,
    LIMIT_P99_TARGET,
    LIMIT_PRESSURE,
)
from xds_control.server.metrics import GROUP_STREAMS

__all__ = ["refresh", "refresh_limits"]


def refresh(*, engine: EngineView | None, registry: Streams, groups: Iterable[str]) -> None:
    """Replace the scrape-time series with what holds now."""
    gauges = (ENDPOINT_WEIGHT, ENDPOINT_WEIGHT_FACTOR, SIGNAL_AGE, GROUP_STREAMS)
    for gauge in (*gauges, POOL_RECOMMENDED_REPLICAS):
        gauge.clear()
    per_group = Counter(s.group for s in registry.streams() if s.node is not None)
    for group in {*groups, *per_group}:
        GROUP_STREAMS.labels(group=group).set(per_group.get(group, 0))
    if engine is None or not engine.enabled:
        return
    for pool, recommendation in engine.autoscale.items():
        POOL_RECOMMENDED_REPLICAS.labels(pool=pool).set(recommendation.replicas)
    now = time.time()
    for pool, decisions in engine.pools.items():
        for d in decisions:
            ENDPOINT_WEIGHT.labels(pool=pool, endpoint=d.address).set(d.weight)
            for factor, value in d.state.factors.as_dict().items():
                ENDPOINT_WEIGHT_FACTOR.labels(pool=pool, endpoint=d.address, factor=factor).set(
                    value
                )
            sample = d.explanation.sample
            if sample is None:
                continue
            for signal, reading in sample.readings.items():
                age = max(0.0, now - reading.observed_at)
                SIGNAL_AGE.labels(pool=pool, endpoint=d.address, signal=signal.value).set(age)


_LATENCIES = ("ttft", "tpot")


def refresh_limits(view: Mapping[str, Any]) -> None:
    """Replace the budget series with ``view`` (``admin.limits.limits_view``): one series per
    node group, route and class; P99s, targets and pressure once per route."""
    per_class = (LIMIT_FILL_RATE, LIMIT_ENVOY_FILL_RATE, LIMIT_BUCKET_TOKENS)
    for gauge in (*per_class, LIMIT_ENVOYS, LIMIT_P99, LIMIT_P99_TARGET, LIMIT_PRESSURE):
        gauge.clear()
    for row in view["budgets"]:
        route = {"listener": row["listener"], "route": row["route"]}
        labels = {**route, "group": row["group"], "class": row["priority"]}
        labels["unit"] = row.get("unit", "requests")
        LIMIT_FILL_RATE.labels(**labels).set(row["fleet_rps"])
        LIMIT_ENVOY_FILL_RATE.labels(**labels).set(row["envoy_rps"])
        LIMIT_BUCKET_TOKENS.labels(**labels).set(row["bucket"]["max_tokens"])
        LIMIT_ENVOYS.labels(group=row["group"]).set(row["envoys"])
        for latency in _LATENCIES:
            for pool, p99 in row["p99"].items():
                if p99[f"{latency}_s"] is not None:
                    LIMIT_P99.labels(**route, pool=pool, latency=latency).set(p99[f"{latency}_s"])
            target = row.get("target", {}).get(f"{latency}_s")
            if target is not None:
                LIMIT_P99_TARGET.labels(**route, latency=latency).set(target)
        if row["pressure"] is not None:
            LIMIT_PRESSURE.labels(**route).set(row["pressure"])
