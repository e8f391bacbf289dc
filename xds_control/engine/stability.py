"""Keep weights steady: smoothing, step limit, quantisation and hysteresis, over columns.

Every published weight change rebuilds Envoy's MAGLEV table and remaps some keys (cold KV
caches), so a weight moves only when the move is worth it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar

import numpy as np

from xds_control.config import WeightPolicy
from xds_control.engine.columns import Column, Mask

__all__ = ["Published", "ewma", "passes_hysteresis", "publish", "quantise"]

Value = TypeVar("Value", float, Column)


def ewma(previous: Value, target: Value, *, alpha: float) -> Value:
    """Exponentially weighted moving average: ``previous`` moved ``alpha`` of the way."""
    return previous + alpha * (target - previous)


def quantise(value: Column, *, quantum: int) -> Column:
    """Nearest multiple of ``quantum`` within 1..100; never 0 (Envoy rejects weight 0).

    Half a quantum rounds up (``value`` is never negative)."""
    quantised: Column = np.clip(np.trunc(value / quantum + 0.5) * quantum, 1, 100)
    return quantised


def passes_hysteresis(
    published: Column, smoothed: Column, *, fraction: float, quantum: int
) -> Mask:
    """Whether ``smoothed`` has left the dead band around the ``published`` weight.

    The band is measured on the continuous value, not the quantised one: at low weights one
    quantum is more than ``fraction`` of the weight, and a value hovering on a quantum
    boundary would otherwise flip between the two levels every few cycles.
    """
    return np.abs(smoothed - published) >= np.maximum(fraction * published, quantum)


@dataclass(frozen=True, slots=True)
class Published:
    """The outcome of one cycle: the weights to publish and the candidate state to carry."""

    weight: Column
    candidate: Column
    candidate_since: Column
    suppressed: Mask
    """Where the candidate differs from ``weight`` but did not pass hysteresis yet."""


def publish(
    *,
    smoothed: Column,
    published: Column,
    candidate_before: Column,
    candidate_since: Column,
    now: float,
    policy: WeightPolicy,
) -> Published:
    """Turn smoothed weights into the weights to publish.

    The candidate is ``smoothed`` quantised and limited to ``max_step`` from ``published``.
    It replaces ``published`` when it passes hysteresis, or when it has stayed the same for
    ``settle_s`` and ``smoothed`` is at least three quarters of a quantum away (the hysteresis
    floor): hysteresis alone would leave a weight short of a steady target forever. The margin
    matters: a value hovering on a quantum boundary keeps one candidate for long stretches, and
    settling on it without a margin flipped low weights between two levels every ``settle_s``.
    A row never published before (``published`` NaN) publishes its candidate at once.
    """
    quantum = policy.quantum
    candidate = quantise(smoothed, quantum=quantum)
    published = np.where(published == published, published, candidate)
    low, high = published - policy.max_step, published + policy.max_step
    candidate = np.maximum(np.maximum(low, 1.0), np.minimum(candidate, high))
    since = np.where(candidate == candidate_before, candidate_since, now)
    moved = passes_hysteresis(published, smoothed, fraction=policy.hysteresis, quantum=quantum)
    distance = np.abs(smoothed - published)
    settled = (now - since >= policy.settle_s) & (distance >= 0.75 * quantum)
    take = (candidate == published) | moved | settled
    return Published(
        weight=np.where(take, candidate, published),
        candidate=candidate,
        candidate_since=since,
        suppressed=~take,
    )
