"""Ramp a new or restarted endpoint up instead of giving it its full share at once.

A server that just started has a cold prefix cache and may still be compiling kernels; its
full share at once is the seed's cold-start avalanche. Warm-up starts when the engine sees an
endpoint appear in a pool it already serves, or sees its process start time move forward.
Endpoints present when the engine starts do not ramp: their relative weights would not
change, only the number of pushes.
"""

from __future__ import annotations

from xds_control.config import WeightPolicy

__all__ = ["warmup_multiplier", "warmup_start"]


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
