"""An endpoint's factors and score: each factor from its fresh reading, else kept from last cycle.

A factor whose signal is missing this cycle keeps its last value (neutral 1.0 for a new
endpoint; capacity: the pool's typical relative capacity). A stale endpoint, with no weight
signal fresh at all, keeps all of its last factors, the engine's base included, and a new
stale endpoint has neutral ones: it gets the base weight (``staleness.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from xds_control.config import WeightPolicy
from xds_control.engine.averages import Averaged, average, kernel_mean
from xds_control.engine.capacity import Capacity
from xds_control.engine.columns import Column, Mask
from xds_control.engine.factors import (
    capacity_factor,
    gpu_memory_factor,
    kv_factor,
    prefix_factor,
    queue_factor,
    slo_factor,
)
from xds_control.engine.inputs import Inputs
from xds_control.signals import Signal

__all__ = ["Scored", "product", "score_factors"]

# Below this the typical relative capacity is garbage (one absurd reading set the best).
_MIN_TYPICAL = 1e-6


@dataclass(frozen=True, slots=True)
class Scored:
    """The factors of every endpoint and the averaged TTFT compliance it keeps."""

    factors: Column
    """Shape (7, n), in ``Factors`` field order."""
    compliance: Column
    """Each endpoint's TTFT compliance averaged at ``slo_alpha`` (NaN: never read)."""
    compliance_noise: Column
    """Mean square distance of one window's compliance from that average."""


def _compliance(inputs: Inputs, *, alpha: float) -> tuple[Averaged, Column]:
    """Each endpoint's averaged TTFT compliance with its noise, and, where it has a reading,
    the compliance the SLO factor is read from: 1 less its shortfall against the pool's best.

    Averaged: one window's compliance swings with a few requests that arrived together, which
    the queue factor answers at once. Pooled within its noise (``averages.py``): identical
    servers' averages still wander apart for tens of seconds. Against the pool's best: a pool
    where every server misses alike gains nothing by moving load between them, and a level
    that moved for all of them would be a push for each."""
    reading = inputs.signal(Signal.SLO_TTFT)
    # A server whose TTFT histogram nobody reads is judged by what Envoy saw.
    reading = np.where(reading == reading, reading, inputs.signal(Signal.DATAPATH_SLO_TTFT))
    averaged = average(
        reading,
        mean=inputs.last("slo_compliance"),
        noise=inputs.last("slo_noise"),
        members=np.ones(len(inputs.addresses), dtype=np.bool_),
        alpha=alpha,
    )
    rows = np.flatnonzero(averaged.mean == averaged.mean)
    if rows.size == 0:
        return averaged, np.full(len(inputs.addresses), np.nan)
    pooled = averaged.mean.copy()
    pooled[rows] = kernel_mean(averaged.mean[rows], width2=2.0 * averaged.pool_noise)
    best = float(pooled[rows].max())
    return averaged, np.where(reading == reading, 1.0 - (best - pooled), np.nan)


def score_factors(
    inputs: Inputs, capacity: Capacity, *, stale: Mask, engine_base: Column, policy: WeightPolicy
) -> Scored:
    """The seven factors of every endpoint, in ``Factors`` field order, and the compliance
    to keep; ``engine_base`` is each endpoint's engine base weight."""
    known = inputs.known
    if capacity.best > 0.0:  # capacities can underflow to 0 on garbage
        relative = capacity.estimate / capacity.best  # best >= estimate >= 0: in [0, 1]
    else:
        relative = np.full(len(inputs.addresses), np.nan)
    # An endpoint with no capacity reading and none before is assumed typical.
    typical = max(capacity.typical, _MIN_TYPICAL)
    relative = np.where((relative == relative) | known | stale, relative, typical)
    # So is one whose timing the pool cannot compare (``Capacity.assumed``), every cycle.
    relative = np.where(capacity.assumed & ~stale, typical, relative)
    waiting = inputs.signal(Signal.WAITING)
    kv = inputs.signal(Signal.KV_USAGE)
    hits = inputs.signal(Signal.PREFIX_HIT_RATIO)
    gpu = inputs.signal(Signal.GPU_MEMORY_USED)
    compliance, slo = _compliance(inputs, alpha=policy.slo_alpha)
    readings = (relative, waiting, kv, hits, gpu, slo)
    computed = (
        capacity_factor(relative, exponent=policy.capacity_exponent),
        queue_factor(waiting, slots=capacity.slots, exponent=policy.queue_exponent),
        kv_factor(kv, coefficient=policy.kv_coefficient),
        prefix_factor(hits, coefficient=policy.prefix_coefficient),
        gpu_memory_factor(gpu, coefficient=policy.gpu_memory_coefficient),
        slo_factor(slo, coefficient=policy.slo_coefficient),
    )
    last = inputs.last_factors
    factors = np.empty((7, len(inputs.addresses)))
    for row, (reading, value) in enumerate(zip(readings, computed, strict=True)):
        kept = np.where(known, last[row], 1.0)
        factors[row] = np.where(reading == reading, value, kept)
    factors[6] = np.where(stale & known, last[6], engine_base)
    return Scored(factors=factors, compliance=compliance.mean, compliance_noise=compliance.noise)


def product(factors: Column) -> Column:
    """The score: the product of the factors, in (0, 1]."""
    capacity, queue, kv, prefix, gpu_memory, slo, engine = factors
    score: Column = capacity * queue * kv * prefix * gpu_memory * slo * engine
    return score
