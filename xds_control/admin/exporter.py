"""Metrics read from state at each scrape: weights, their factors and signal ages, streams per
node group. Set at scrape time, so a series for an endpoint that left goes with it."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable

from xds_control.control import EngineView
from xds_control.control.metrics import (
    ENDPOINT_WEIGHT,
    ENDPOINT_WEIGHT_FACTOR,
    POOL_RECOMMENDED_REPLICAS,
    SIGNAL_AGE,
)
from xds_control.server import StreamRegistry
from xds_control.server.metrics import GROUP_STREAMS

__all__ = ["refresh"]


def refresh(*, engine: EngineView | None, registry: StreamRegistry, groups: Iterable[str]) -> None:
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
            for factor, value in d.factors.as_dict().items():
                ENDPOINT_WEIGHT_FACTOR.labels(pool=pool, endpoint=d.address, factor=factor).set(
                    value
                )
            if d.sample is None:
                continue
            for signal, reading in d.sample.readings.items():
                age = max(0.0, now - reading.observed_at)
                SIGNAL_AGE.labels(pool=pool, endpoint=d.address, signal=signal.value).set(age)
