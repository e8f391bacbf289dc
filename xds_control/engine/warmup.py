"""Ramp a new or restarted endpoint up instead of giving it its full share at once.

A server that just started has a cold prefix cache and may still be compiling kernels; its
full share at once is the seed's cold-start avalanche. Warm-up starts when the engine sees an
endpoint appear in a pool it already serves, or sees its process start time move forward.
Endpoints present when the engine starts do not ramp: their relative weights would not
change, only the number of pushes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from xds_control.config import WeightPolicy
from xds_control.engine.columns import Column, or_none, rows
from xds_control.engine.inputs import Inputs
from xds_control.signals import Signal

__all__ = ["Ramp", "ramp", "warmup_multiplier", "warmup_start"]


def warmup_start(
    *,
    warmup_from: float | None,
    first_seen_at: float | None,
    started_before: float | None,
    started_now: float | None,
    now: float,
) -> float | None:
    """When the current warm-up began, or ``None`` when there is none."""
    start = warmup_from
    if first_seen_at is not None and (start is None or first_seen_at > start):
        start = first_seen_at
    if started_now is not None and started_before is not None and started_now > started_before:
        # A restart: ramp from when the process started (capped at now for clock skew).
        restart = min(started_now, now)
        if start is None or restart > start:
            start = restart
    return start


def warmup_multiplier(*, warmup_from: float | None, now: float, policy: WeightPolicy) -> float:
    """Share of its computed weight an endpoint gets: from ``warmup_start_fraction`` up to 1
    linearly over ``warmup_s``."""
    if warmup_from is None or policy.warmup_s <= 0:
        return 1.0
    progress = (now - warmup_from) / policy.warmup_s
    if progress >= 1.0:
        return 1.0
    start = policy.warmup_start_fraction
    return start + (1.0 - start) * max(progress, 0.0)


def _started_before(started_at: float | None) -> float:
    """An endpoint the engine knew without a start time started, as far as it knew, at the
    epoch: a first start time is then a start, and ramps if it is recent. Servers that export
    no ``process_start_time_seconds`` (Triton) get one only when the scrape source sees their
    counters go back, so their first restart would otherwise never ramp."""
    return 0.0 if started_at is None else started_at


@dataclass(frozen=True, slots=True)
class Ramp:
    """Every endpoint's warm-up this cycle, and what the next cycle needs to continue it."""

    warm: Column
    """Multiplier in (0, 1]; 1 when not warming up."""
    warmup_from: Column
    """When the current warm-up began; NaN when not warming up."""
    first_seen_at: Column
    """When the engine first saw the endpoint; NaN if present since the engine started."""
    started_at: Column
    """Last seen process start time; NaN if never seen."""


def ramp(inputs: Inputs, *, starting: bool, now: float, policy: WeightPolicy) -> Ramp:
    """Warm-up of every endpoint. ``starting``: the engine's first cycle (nothing ramps)."""
    started = inputs.signal(Signal.STARTED_AT)
    last_started = inputs.last("started_at")
    known = inputs.known
    first_seen = np.where(known, inputs.last("first_seen_at"), np.nan if starting else now)
    warm = np.ones(len(inputs.addresses))
    warmup_from = np.full(len(inputs.addresses), np.nan)
    # Only an endpoint that is new, restarted or already ramping can be warming up: one whose
    # warm-up ended keeps its full share even if ``warmup_s`` grows later.
    restarted = (started == started) & (started != last_started)
    for row in rows(
        ~known | (inputs.last("warmup_from") == inputs.last("warmup_from")) | restarted
    ):
        prev = inputs.previous[row]
        start = warmup_start(
            warmup_from=prev.warmup_from if prev is not None else None,
            first_seen_at=or_none(first_seen[row]),
            started_before=_started_before(prev.started_at) if prev is not None else None,
            started_now=or_none(started[row]),
            now=now,
        )
        warm[row] = multiplier = warmup_multiplier(warmup_from=start, now=now, policy=policy)
        if start is not None and multiplier < 1.0:
            warmup_from[row] = start
    return Ramp(
        warm=warm,
        warmup_from=warmup_from,
        first_seen_at=first_seen,
        started_at=np.where(started == started, started, last_started),
    )
