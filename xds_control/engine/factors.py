"""The factors of an endpoint's score, each in (0, 1], one function per factor over columns.

Every function takes NumPy columns (one row per endpoint) of validated readings and returns the
factor for every row; a row whose signal is missing is NaN here, and the caller keeps that
factor's last value instead. ``docs/weights.md`` gives each formula's reasoning and defaults.
"""

from __future__ import annotations

import numpy as np

from xds_control.engine.columns import Column, power

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

# Keeps a factor, and so the score, above 0: a weight never reaches 0 through one factor.
_FLOOR = 1e-6


def capacity_estimate(*, batch_slots: Column, decode_step_s: Column) -> Column:
    """Sequences served per second at full batch: slots over the decode-step time.

    It is used relative to the pool's best, so any quantity proportional to the step time
    (e.g. Triton's compute time per execution) works. Garbage slots overflow to ``inf``.
    """
    with np.errstate(over="ignore"):
        return batch_slots / np.maximum(decode_step_s, MIN_STEP_S)


def capacity_factor(relative: Column, *, exponent: float) -> Column:
    """``relative ** exponent``, with ``relative`` = capacity / pool's best, in [0, 1]."""
    return power(relative, exponent)


def queue_factor(waiting: Column, *, slots: Column, exponent: float) -> Column:
    """``1 / (1 + waiting/slots) ** exponent``: a queue as long as the batch quarters it
    (exponent 2); the seed's "sharp decay above 200 pending" is the limit of large queues."""
    return power(1.0 + waiting / np.maximum(slots, 1.0), -exponent)


def kv_factor(kv_usage: Column, *, coefficient: float) -> Column:
    """``1 - c * kv_usage``: softened KV headroom (a full cache preempts, it does not fail)."""
    return np.maximum(1.0 - coefficient * kv_usage, _FLOOR)


def prefix_factor(hit_ratio: Column, *, coefficient: float) -> Column:
    """``(1 + c * hit_ratio**2) / (1 + c)``: an affinity bonus for servers whose prefix cache
    is working, scaled so the best case is 1 and weights never exceed 100."""
    return (1.0 + coefficient * hit_ratio * hit_ratio) / (1.0 + coefficient)


def gpu_memory_factor(used_ratio: Column, *, coefficient: float) -> Column:
    """``1 - c * used/(used+free)``: GPU memory headroom from DCGM (or Triton's own gauges)."""
    return np.maximum(1.0 - coefficient * used_ratio, _FLOOR)


def slo_factor(compliance: Column, *, coefficient: float) -> Column:
    """``1 - c * (1 - compliance)``: fraction of requests meeting the pool's TTFT target."""
    return np.maximum(1.0 - coefficient * (1.0 - compliance), _FLOOR)
