"""Each endpoint's capacity estimate, smoothed on its own, and the pool's best and typical.

Capacity (batch slots per second of decode step) is smoothed before anything else: one rate
window's inter-token latency swings +-25% on a lightly loaded server, and the maximum of noisy
raw readings is biased high, which would pull every other endpoint down. It falls fast (a quick
estimate that drops ``capacity_drop`` below the slow one wins at once) and rises slowly.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from xds_control.config import WeightPolicy
from xds_control.engine.columns import Column
from xds_control.engine.factors import capacity_estimate
from xds_control.engine.inputs import Inputs
from xds_control.engine.stability import ewma
from xds_control.signals import Signal

__all__ = ["CAPACITY_CEILING", "Capacity", "assess_capacity"]

CAPACITY_CEILING = 1e12
"""Slots per second beyond any real engine; larger comes from garbage and would overflow."""


@dataclass(frozen=True, slots=True)
class Capacity:
    """This cycle's capacity estimates (NaN: no reading) and the pool's reference points."""

    slots: Column
    """Batch slots: exported, else the endpoint's configured, else the pool's default."""
    estimate: Column
    """Smoothed absolute capacity; the capacity factor is this over ``best``."""
    recent: Column
    """Quick EWMA of the same readings."""
    kept_estimate: Column
    """``estimate``, else the last one: what the next cycle smooths from."""
    kept_recent: Column
    """``recent``, else the last one."""
    best: float
    """The pool's best estimate, counting idle endpoints at their last one; 0 if none."""
    typical: float
    """Median estimate over ``best``: what an endpoint with no reading yet is assumed to be."""


def assess_capacity(inputs: Inputs, policy: WeightPolicy) -> Capacity:
    """Smooth this cycle's capacity readings into each endpoint's estimate."""
    exported = inputs.signal(Signal.BATCH_SLOTS)
    # An exported 0 is no better than none.
    slots = np.where((exported == exported) & (exported != 0.0), exported, inputs.fallback_slots)
    step = inputs.signal(Signal.DECODE_STEP_S)
    raw = capacity_estimate(batch_slots=slots, decode_step_s=step)
    # No reading (idle: no tokens, no steps), or absurd slots or step.
    valid = (raw > 0.0) & (raw < CAPACITY_CEILING)
    last = inputs.last("capacity_estimate")
    last_recent = inputs.last("capacity_recent")
    last_recent = np.where(last_recent == last_recent, last_recent, last)
    has_last = last == last
    estimate = np.where(has_last, ewma(last, raw, alpha=policy.capacity_alpha), raw)
    # The recent capacity is never the slower average: on a rise it must not lag the estimate.
    recent_alpha = max(policy.capacity_recent_alpha, policy.capacity_alpha)
    recent = np.where(has_last, ewma(last_recent, raw, alpha=recent_alpha), raw)
    # A real drop, not noise: follow it now.
    estimate = np.where(recent < (1.0 - policy.capacity_drop) * estimate, recent, estimate)
    estimate = np.where(valid, estimate, np.nan)
    recent = np.where(valid, recent, np.nan)
    # The best counts endpoints with no reading this cycle at their last estimate: an idle
    # fast server (no tokens, so no decode step) has not lost its speed, and without it the
    # best would be a slow busy one, whose weight would jump to the top.
    known = np.concatenate((estimate[valid], last[~valid & has_last]))
    best = float(known.max()) if known.size else 0.0
    typical = float(np.median(known / best)) if best > 0.0 else 1.0
    return Capacity(
        slots=slots,
        estimate=estimate,
        recent=recent,
        kept_estimate=np.where(valid, estimate, last),
        kept_recent=np.where(valid, recent, inputs.last("capacity_recent")),
        best=best,
        typical=typical,
    )
