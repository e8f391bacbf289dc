"""Pool weights for routes over several pools: each pool's measured capacity, kept steady.

A route over pools splits its requests by these weights (Envoy weighted clusters), computed
per route so the route's largest pool sets the scale (100) and quantising loses no share to
pools the route does not use. A pool's
capacity is the sum of its in-service endpoints' capacity estimates (batch slots per second of
decode step, the engine's absolute measure, the same one that sets endpoint weights): a pool
of four fast servers takes four times what one does. A warming endpoint counts by its ramp, a
DRAINING or UNHEALTHY one not at all; an endpoint with no estimate yet counts as its pool's
mean. Weights are 100 x capacity / the route's largest pool's, then smoothed, step-limited,
quantised and kept by hysteresis exactly as endpoint weights are (``stability``): each change
moves requests between pools, whose KV caches share nothing.

Capacities compare across pools only when their step times are the same kind of measure:
vLLM and SGLang export the time between tokens (a decode step), Triton (and ONNX Runtime
behind it) only compute time per execution, which for a generative model spans a whole
request, so a Triton pool would read some output-length times slower than it is. A route
that mixes the two kinds keeps its static weights (``measures_comparable``), unless the data
path is on: then every capacity without an engine step of its own is the data path's, on the
fleet's decode-step scale (``engine/capacity.py``), and every route is weighed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from xds_control.config import Config, WeightPolicy, measures_comparable
from xds_control.discovery import Health
from xds_control.engine.columns import Column
from xds_control.engine.decision import WeightDecision
from xds_control.engine.stability import Published, ewma, noise_alpha, publish

__all__ = [
    "PoolWeight",
    "RouteWeights",
    "compute_pool_weights",
    "compute_route_weights",
    "pool_capacity",
    "route_key",
]


@dataclass(frozen=True, slots=True)
class PoolWeight:
    """One pool's share weight (1..100) and why; the state the next cycle smooths from."""

    pool: str
    weight: int
    capacity: float
    """Sum of the in-service endpoints' capacity estimates (slots per second)."""
    in_service: float
    """Endpoints counted (a warming one by its ramp)."""
    target: float
    """100 x capacity / the route's largest pool's, before smoothing."""
    smoothed: float
    candidate: int
    candidate_since: float
    computed_at: float | None = None
    mean: float | None = None
    """Slow average of ``smoothed``; with ``spread``, the noise the dead band follows."""
    spread: float | None = None

    def to_json(self) -> dict[str, Any]:
        """A JSON-serialisable explanation (``/v1/weights?explain=1``)."""
        return {
            "weight": self.weight,
            "capacity": round(self.capacity, 3),
            "in_service": round(self.in_service, 3),
            "target": round(self.target, 2),
            "smoothed": round(self.smoothed, 2),
            "candidate": self.candidate,
        }


def pool_capacity(decisions: Sequence[WeightDecision]) -> tuple[float, float] | None:
    """``(capacity, endpoints counted)`` of a pool, or ``None`` when no endpoint has a capacity
    estimate yet (the pool has no measure, and its routes keep their static weights)."""
    estimates = [d.explanation.capacity_estimate for d in decisions]
    known = [c for c in estimates if c is not None]
    finite = [c for c in known if math.isfinite(c) and c > 0]
    if not finite:
        return None
    mean = sum(finite) / len(finite)
    capacity = counted = 0.0
    for decision in decisions:
        if decision.health is not Health.HEALTHY:
            continue
        estimate = decision.explanation.capacity_estimate
        share = decision.explanation.warmup
        usable = estimate is not None and math.isfinite(estimate) and estimate > 0
        capacity += share * (estimate if usable and estimate is not None else mean)
        counted += share
    return capacity, counted


def _or_nan(weight: PoolWeight | None, name: str) -> float:
    """``weight``'s optional field ``name``, NaN when there is none (or no ``weight``)."""
    value: float | None = None if weight is None else getattr(weight, name)
    return float("nan") if value is None else value


def _publish(
    smoothed: Column,
    *,
    before: Sequence[PoolWeight | None],
    now: float,
    policy: WeightPolicy,
) -> Published:
    """The pools' smoothed weights published as endpoint weights are (``stability.publish``),
    against each pool's last weight on the route (``None``: the route's first cycle with it)."""
    nan = float("nan")
    return publish(
        smoothed=smoothed,
        published=np.array([nan if p is None else p.weight for p in before], dtype=float),
        candidate_before=np.array([nan if p is None else p.candidate for p in before], dtype=float),
        candidate_since=np.array([now if p is None else p.candidate_since for p in before]),
        mean_before=np.array([_or_nan(p, "mean") for p in before], dtype=float),
        spread_before=np.array([_or_nan(p, "spread") for p in before], dtype=float),
        measured=np.ones(len(before), dtype=bool),
        alpha=noise_alpha(
            elapsed_s=now - np.array([_or_nan(p, "computed_at") for p in before]),
            settle_s=policy.settle_s,
        ),
        now=now,
        policy=policy,
    )


def compute_pool_weights(
    *,
    decisions: Mapping[str, Sequence[WeightDecision]],
    previous: Mapping[str, PoolWeight],
    now: float,
    policy: WeightPolicy,
) -> dict[str, PoolWeight]:
    """The weights of one route's pools from their endpoints' ``decisions`` (pool name ->
    decisions) and the route's last cycle, ``previous``; empty unless every pool has a
    measure (a measured pool next to a static weight would mix units)."""
    measured = {
        pool: found
        for pool, pool_decisions in decisions.items()
        if (found := pool_capacity(pool_decisions)) is not None
    }
    if not measured or len(measured) < len(decisions):
        return {}
    names = list(measured)
    largest = max(capacity for capacity, _ in measured.values())
    target = np.array(
        [100.0 * measured[n][0] / largest if largest > 0 else 1.0 for n in names], dtype=float
    )
    before = [previous.get(n) for n in names]
    smoothed = np.array(
        [
            t if p is None else ewma(p.smoothed, float(t), alpha=policy.ewma_alpha)
            for t, p in zip(target, before, strict=True)
        ],
        dtype=float,
    )
    outcome = _publish(smoothed, before=before, now=now, policy=policy)
    return {
        name: PoolWeight(
            pool=name,
            weight=int(outcome.weight[i]),
            capacity=measured[name][0],
            in_service=measured[name][1],
            target=float(target[i]),
            smoothed=float(smoothed[i]),
            candidate=int(outcome.candidate[i]),
            candidate_since=float(outcome.candidate_since[i]),
            computed_at=now,
            mean=float(outcome.mean[i]),
            spread=float(outcome.spread[i]),
        )
        for i, name in enumerate(names)
    }


RouteWeights = Mapping[str, Mapping[str, PoolWeight]]
"""``listener/route`` -> pool name -> its weight on that route."""


def route_key(listener: str, route: str) -> str:
    """How ``RouteWeights`` names a route: listener and route names are unique together."""
    return f"{listener}/{route}"


def compute_route_weights(
    *,
    config: Config,
    decisions: Mapping[str, Sequence[WeightDecision]],
    previous: RouteWeights,
    now: float,
    data_path: bool = False,
) -> dict[str, dict[str, PoolWeight]]:
    """Pool weights for every route over several pools (``compute_pool_weights``), each with
    the stability settings (``weights``) of the route's first pool; a route whose pools are
    not all measured, or (without the data path, ``data_path``) not measured in the same unit,
    is left out."""
    out: dict[str, dict[str, PoolWeight]] = {}
    for listener in config.listeners:
        for route in listener.routes:
            if not route.pools:
                continue
            engines = (config.pool(name).engine for name in route.pool_names())
            if not data_path and not measures_comparable(engines):
                continue
            key = route_key(listener.name, route.name)
            weights = compute_pool_weights(
                decisions={name: decisions.get(name, ()) for name in route.pool_names()},
                previous=previous.get(key, {}),
                now=now,
                policy=config.pool(route.pools[0].name).weights,
            )
            if weights:
                out[key] = weights
    return out
