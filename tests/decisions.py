"""One engine decision to start from in unit tests: a steady, healthy endpoint at weight 50.

Tests that care about a field pass it (``capacity_estimate``, ``health``, ``warmup``, ...),
whichever part of the decision holds it; the other fields keep values no check reads, so each
test shows only what it is about."""

from __future__ import annotations

from typing import Any

from xds_control.discovery import Health
from xds_control.engine import EndpointState, Explanation, Factors, WeightDecision

__all__ = ["steady_decision"]

_EXPLANATION = Explanation(
    score=1.0,
    target=50.0,
    warmup=1.0,
    reason="",
    health_reason="",
    sample=None,
    capacity_estimate=None,
)
_STATE = EndpointState(
    weight=50,
    health=Health.HEALTHY,
    computed_at=0.0,
    factors=Factors(),
    smoothed=50.0,
    candidate=50,
    candidate_since=0.0,
    first_seen_at=None,
    last_fresh_at=None,
    last_fresh_weight=50.0,
    started_at=None,
    warmup_from=None,
)


def steady_decision(*, address: str = "127.0.0.1:1", **fields: Any) -> WeightDecision:
    """A ``WeightDecision`` at weight 50, healthy and settled; ``fields`` replace any field of
    its explanation or state (``weight`` and ``health`` are both published and kept)."""
    unknown = fields.keys() - {*_EXPLANATION._fields, *_STATE._fields}
    if unknown:
        raise TypeError(f"no such decision field: {sorted(unknown)}")
    state = _STATE._replace(**{k: v for k, v in fields.items() if k in _STATE._fields})
    return WeightDecision(
        address=address,
        weight=state.weight,
        health=state.health,
        explanation=_EXPLANATION._replace(
            **{k: v for k, v in fields.items() if k in _EXPLANATION._fields}
        ),
        state=state,
    )
