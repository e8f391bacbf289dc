"""The factors of an endpoint's score: pure functions of validated signals, each in (0, 1].

Neutral (missing) inputs are handled by the caller; these functions take real values.
``docs/weights.md`` gives each formula's reasoning and defaults.
"""

from __future__ import annotations

__all__ = [
    "MIN_STEP_S",
    "capacity_estimate",
    "capacity_factor",
    "gpu_memory_factor",
    "kv_factor",
    "prefix_factor",
    "queue_factor",
    "slo_factor",
]

# A decode step faster than 10 microseconds is a broken metric, not a fast GPU; flooring it
# keeps one bogus endpoint from becoming "the pool's best" and flattening everyone else.
MIN_STEP_S = 1e-5


def capacity_estimate(*, batch_slots: float, decode_step_s: float) -> float:
    """Sequences served per second at full batch: slots over the (smoothed) decode-step time.

    This is DESIGN.md's capacity. It is used relative to the pool's best, so any quantity
    proportional to the step time (e.g. Triton's compute time per execution) works.
    """
    return batch_slots / max(decode_step_s, MIN_STEP_S)


def capacity_factor(relative: float, *, exponent: float) -> float:
    """``relative ** exponent``, with ``relative`` = capacity / pool's best, clamped to (0, 1]."""
    return float(min(1.0, max(relative, 1e-6)) ** exponent)


def queue_factor(waiting: float, *, slots: float, exponent: float) -> float:
    """``1 / (1 + waiting/slots) ** exponent``: a queue as long as the batch quarters it
    (exponent 2); the seed's "sharp decay above 200 pending" is the limit of large queues."""
    return float((1.0 + waiting / max(slots, 1.0)) ** -exponent)


def kv_factor(kv_usage: float, *, coefficient: float) -> float:
    """``1 - c * kv_usage``: softened KV headroom (a full cache preempts, it does not fail)."""
    return max(1e-6, 1.0 - coefficient * min(kv_usage, 1.0))


def prefix_factor(hit_ratio: float, *, coefficient: float) -> float:
    """``(1 + c * hit_ratio**2) / (1 + c)``: an affinity bonus for servers whose prefix cache
    is working, scaled so the best case is 1 and weights never exceed 100."""
    hit = min(hit_ratio, 1.0)
    return (1.0 + coefficient * hit * hit) / (1.0 + coefficient)


def gpu_memory_factor(used_ratio: float, *, coefficient: float) -> float:
    """``1 - c * used/(used+free)``: GPU memory headroom from DCGM (or Triton's own gauges)."""
    return max(1e-6, 1.0 - coefficient * min(used_ratio, 1.0))


def slo_factor(compliance: float, *, coefficient: float) -> float:
    """``1 - c * (1 - compliance)``: fraction of requests meeting the pool's TTFT target."""
    return max(1e-6, 1.0 - coefficient * (1.0 - min(compliance, 1.0)))
