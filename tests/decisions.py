"""One engine decision to start from in unit tests: a steady, healthy endpoint at weight 50.

Tests that care about a field pass it (``capacity_estimate``, ``health``, ``warmup``, ...);
the other fields keep values no check reads, so each test shows only what it is about."""

from __future__ import annotations

from typing import Any

from xds_control.discovery import Health
from xds_control.engine import Factors, WeightDecision

__all__ = ["steady_decision"]


def steady_decision(**fields: Any) -> WeightDecision:
    """A ``WeightDecision`` at weight 50, healthy and settled; ``fields`` replace any field."""
    base = WeightDecision(
        address="127.0.0.1:1",
        weight=50,
        health=Health.HEALTHY,
        factors=Factors(),
        score=1.0,
        target=50.0,
        smoothed=50.0,
        warmup=1.0,
        reason="",
        health_reason="",
        computed_at=0.0,
        sample=None,
        first_seen_at=None,
        last_fresh_at=None,
        held=50.0,
        started_at=None,
        warmup_from=None,
        candidate=50,
        candidate_since=0.0,
        capacity_estimate=None,
    )
    return base._replace(**fields)
