"""Keep weights steady: smoothing, step limit, quantisation and hysteresis.

Every published weight change rebuilds Envoy's MAGLEV table and remaps some keys (cold KV
caches), so a weight moves only when the move is worth it.
"""

from __future__ import annotations

from typing import NamedTuple

from xds_control.config import WeightPolicy

__all__ = ["Published", "ewma", "passes_hysteresis", "publish", "quantise"]


def ewma(previous: float, target: float, *, alpha: float) -> float:
    """Exponentially weighted moving average: ``previous`` moved ``alpha`` of the way."""
    return previous + alpha * (target - previous)


def quantise(value: float, *, quantum: int) -> int:
    """Nearest multiple of ``quantum`` within 1..100; never 0 (Envoy rejects weight 0)."""
    q = int(value / quantum + 0.5) * quantum
    return 1 if q < 1 else 100 if q > 100 else q


def passes_hysteresis(published: int, smoothed: float, *, fraction: float, quantum: int) -> bool:
    """Whether ``smoothed`` has left the dead band around the ``published`` weight.

    The band is measured on the continuous value, not the quantised one: at low weights one
    quantum is more than ``fraction`` of the weight, and a value hovering on a quantum
    boundary would otherwise flip between the two levels every few cycles.
    """
    return abs(smoothed - published) >= max(fraction * published, quantum)


class Published(NamedTuple):
    """The outcome of one cycle: the weight to publish and the candidate state to carry."""

    weight: int
    candidate: int
    candidate_since: float
    suppressed: bool
    """True when the candidate differs from ``weight`` but did not pass hysteresis yet."""


def publish(
    *,
    smoothed: float,
    published: int,
    candidate_before: int,
    candidate_since: float,
    now: float,
    policy: WeightPolicy,
) -> Published:
    """Turn a smoothed weight into the weight to publish.

    The candidate is ``smoothed`` quantised and limited to ``max_step`` from ``published``.
    It replaces ``published`` when it passes hysteresis, or when it has stayed the same for
    ``settle_s`` and ``smoothed`` is at least three quarters of a quantum away (the hysteresis
    floor): hysteresis alone would leave a weight short of a steady target forever. The margin
    matters: a value hovering on a quantum boundary keeps one candidate for long stretches, and
    settling on it without a margin flipped low weights between two levels every ``settle_s``.
    """
    candidate = quantise(smoothed, quantum=policy.quantum)
    low, high = published - policy.max_step, published + policy.max_step
    candidate = max(1, low, min(candidate, high))
    since = candidate_since if candidate == candidate_before else now
    if candidate == published:
        return Published(published, candidate, since, False)
    moved = passes_hysteresis(
        published, smoothed, fraction=policy.hysteresis, quantum=policy.quantum
    )
    margin = 0.75 * policy.quantum
    settled = now - since >= policy.settle_s and abs(smoothed - published) >= margin
    if moved or settled:
        return Published(candidate, candidate, since, False)
    return Published(published, candidate, since, True)
