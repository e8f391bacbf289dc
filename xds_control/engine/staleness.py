"""What an endpoint without fresh signals gets: its last weight for a while, then the base.

A missing or stale signal never zeroes a weight. With no fresh reading an endpoint keeps the
weight it had when it last had one for ``hold_s``, then moves linearly to the base weight over
``decay_s``; an endpoint that never had data gets the base weight.
"""

from __future__ import annotations

from xds_control.config import WeightPolicy
from xds_control.engine.columns import Column

__all__ = ["base_weight", "stale_target"]


def base_weight(*, engine_base: Column, policy: WeightPolicy) -> Column:
    """Weight of an endpoint nothing is known about: ``100 * engine base * base_fraction``, per
    endpoint (each by its own engine's base)."""
    return 100.0 * engine_base * policy.base_fraction


def stale_target(
    *, kept: float, last_fresh_at: float | None, base: float, now: float, policy: WeightPolicy
) -> tuple[float, str]:
    """The weight a stale endpoint should have now, and why; ``kept``: its smoothed weight
    when it last had a fresh reading."""
    if last_fresh_at is None:
        return base, "no data: base weight"
    age = now - last_fresh_at
    if age <= policy.hold_s:
        return kept, f"holding last weight: no fresh signal for {age:.0f}s"
    progress = (age - policy.hold_s) / policy.decay_s
    if progress >= 1.0:
        return base, f"base weight: no fresh signal for {age:.0f}s"
    return (
        kept + (base - kept) * progress,
        f"decaying to base: no fresh signal for {age:.0f}s",
    )
