"""One reconcile step of the weight engine: samples in, a ``WeightDecision`` per endpoint out.

Pure: no clock (``now`` is a parameter, Unix seconds, the same clock as the samples'
``observed_at``), no IO, no globals. The caller keeps each decision's ``state`` and passes
them back as ``previous`` next cycle; that is all the state there is.

The phases, in order: gather the inputs as columns, assess capacity, health and warm-up,
score the factors, smooth the targets (a stale endpoint keeps its weight, then decays),
publish what passes the dead band, and lay the rows out as decisions.

The endpoints of the pool are columns (``inputs.py``) and every phase works on all of them at
once; only the rare rows that need a decision of their own (warm-up, stale, unhealthy,
hysteresis explained) go through the small per-endpoint functions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import repeat

import numpy as np

from xds_control.config import Pool, WeightPolicy
from xds_control.discovery import Endpoint, Health
from xds_control.engine.capacity import Capacity, assess_capacity
from xds_control.engine.columns import Column, Mask, optional, rows
from xds_control.engine.decision import EndpointState, Explanation, Factors, WeightDecision
from xds_control.engine.engines import engine_columns
from xds_control.engine.health import assess_pool_health
from xds_control.engine.inputs import Inputs, gather
from xds_control.engine.score import Scored, product, score_factors
from xds_control.engine.stability import Published, ewma, noise_alpha, publish
from xds_control.engine.staleness import base_weight, stale_target
from xds_control.engine.warmup import Ramp, ramp
from xds_control.signals import Sample

__all__ = ["changed_meaningfully", "compute_weights"]


def compute_weights(
    *,
    pool: Pool,
    endpoints: Sequence[Endpoint],
    samples: Mapping[str, Sample],
    previous: Mapping[str, EndpointState],
    now: float,
    data_path: bool = False,
    fleet_scale: float | None = None,
) -> dict[str, WeightDecision]:
    """Decide the weight and health of every endpoint of ``pool``.

    ``samples`` and ``previous`` (the last cycle's ``WeightDecision.state``) are keyed by
    address; either may lack any endpoint (no data: base weight; not seen before: new, so it
    warms up unless ``previous`` is empty, i.e. the engine's first cycle). Endpoints in
    ``previous`` but not in ``endpoints`` are dropped. ``data_path``: the samples carry the data
    path's readings, which time the endpoints whose engine exports no decode step, on the pool's
    scale or else ``fleet_scale``'s (``engine/capacity.py``)."""
    policy = pool.weights
    engines = engine_columns(pool, endpoints)
    inputs = gather(
        endpoints=endpoints,
        samples=samples,
        previous=previous,
        since=now - policy.stale_after_s,
        default_slots=float(policy.max_num_seqs),
    )
    capacity = assess_capacity(
        inputs,
        policy,
        decode_step=engines.decode_step,
        data_path=data_path,
        fleet_scale=fleet_scale,
    )
    warmup = ramp(inputs, starting=not previous, now=now, policy=policy)
    scored = score_factors(
        inputs, capacity, stale=inputs.stale, engine_base=engines.base, policy=policy
    )
    score = product(scored.factors)
    smoothed = _smooth(
        inputs,
        score=score,
        warmup=warmup,
        slowed=capacity.speed.slowed,
        base=base_weight(engine_base=engines.base, policy=policy),
        now=now,
        policy=policy,
    )
    cycle = _Cycle(
        inputs=inputs,
        capacity=capacity,
        health=assess_pool_health(inputs, policy.health),
        warmup=warmup,
        scored=scored,
        score=score,
        smoothed=smoothed,
        published=_publish(inputs, smoothed=smoothed, warm=warmup.warm, now=now, policy=policy),
    )
    return _decisions(cycle, now=now)


@dataclass(frozen=True, slots=True)
class Smoothed:
    """Each endpoint's target and smoothed weight, and the state a stale one keeps."""

    target: Column
    smoothed: Column
    last_fresh_weight: Column
    last_fresh_at: list[float | None]
    reasons: list[str]


def _smooth(
    inputs: Inputs,
    *,
    score: Column,
    warmup: Ramp,
    slowed: Mask,
    base: Column,
    now: float,
    policy: WeightPolicy,
) -> Smoothed:
    """Target weights from the scores, smoothed; a stale endpoint keeps its last fresh
    weight, then decays. Where the speed reading found a server slower past its noise band
    (``slowed``), a lower target is taken as it is: the capacity is smoothed already, and
    that change is not noise."""
    target = 100.0 * score * warmup.warm
    last = inputs.last("smoothed")
    smoothed = np.where(inputs.known, ewma(last, target, alpha=policy.ewma_alpha), target)
    smoothed = np.where(slowed, np.minimum(smoothed, target), smoothed)
    kept = smoothed.copy()
    last_fresh_at: list[float | None] = [now] * len(inputs.addresses)
    reasons = ["fresh signals"] * len(inputs.addresses)
    for row in rows(inputs.stale):
        prev = inputs.previous[row]
        kept[row] = prev.last_fresh_weight if prev is not None else base[row]
        last_fresh_at[row] = prev.last_fresh_at if prev is not None else None
        weight, reasons[row] = stale_target(
            kept=float(kept[row]),
            last_fresh_at=last_fresh_at[row],
            base=float(base[row]),
            now=now,
            policy=policy,
        )
        # Keeping and decaying are already smooth; smoothing them again would only lag.
        target[row] = smoothed[row] = weight * float(warmup.warm[row])
    return Smoothed(
        target=target,
        smoothed=smoothed,
        last_fresh_weight=kept,
        last_fresh_at=last_fresh_at,
        reasons=reasons,
    )


def _publish(
    inputs: Inputs, *, smoothed: Smoothed, warm: Column, now: float, policy: WeightPolicy
) -> Published:
    """The weights to publish from the smoothed ones, against the last cycle's; a weight's
    noise is measured only where its signals are fresh and it is not ramping up."""
    return publish(
        smoothed=smoothed.smoothed,
        published=inputs.last("weight"),
        candidate_before=inputs.last("candidate"),
        candidate_since=inputs.last("candidate_since"),
        mean_before=inputs.last("weight_mean"),
        spread_before=inputs.last("weight_spread"),
        measured=~inputs.stale & (warm >= 1.0),
        alpha=noise_alpha(elapsed_s=now - inputs.last("computed_at"), settle_s=policy.settle_s),
        now=now,
        policy=policy,
    )


@dataclass(frozen=True, slots=True)
class _Cycle:
    """Every phase's outcome for the pool's endpoints, in row order."""

    inputs: Inputs
    capacity: Capacity
    health: tuple[list[Health], list[str]]
    """Each endpoint's health, and why."""
    warmup: Ramp
    scored: Scored
    score: Column
    smoothed: Smoothed
    published: Published


def _reasons(cycle: _Cycle, *, weights: list[int], candidates: list[int]) -> list[str]:
    """The reasons, with where each fresh endpoint's capacity came from, the weights
    the dead band kept and the endpoints warming up."""
    capacity, published, warm = cycle.capacity, cycle.published, cycle.warmup.warm
    reasons = [
        reason if is_stale else f"{reason}; capacity: {capacity.source(row)}"
        for row, (reason, is_stale) in enumerate(
            zip(cycle.smoothed.reasons, cycle.inputs.stale.tolist(), strict=True)
        )
    ]
    for row in rows(published.suppressed):
        reasons[row] += (
            f"; kept {weights[row]}, candidate {candidates[row]} within the dead band"
            f" (+-{float(published.band[row]):.1f})"
        )
    for row in rows(warm < 1.0):
        reasons[row] += f"; warming up ({float(warm[row]):.0%})"
    return reasons


def _explanations(cycle: _Cycle, *, reasons: list[str]) -> list[Explanation]:
    """Each endpoint's ``Explanation``, field by field in order."""
    _, health_reasons = cycle.health
    fields = zip(
        cycle.score.tolist(),
        cycle.smoothed.target.tolist(),
        cycle.warmup.warm.tolist(),
        reasons,
        health_reasons,
        cycle.inputs.samples,
        optional(cycle.capacity.kept_estimate),
        strict=True,
    )
    return list(map(Explanation._make, fields))


def _states(
    cycle: _Cycle, *, weights: list[int], candidates: list[int], now: float
) -> list[EndpointState]:
    """Each endpoint's ``EndpointState``, field by field in order.

    ``_make`` takes each row's fields as one tuple; calling the constructor with them as
    positional arguments costs half as much again, a few ms at 10,000 endpoints."""
    speed, published, warmup = cycle.capacity.speed, cycle.published, cycle.warmup
    health, _ = cycle.health
    fields = zip(
        weights,
        health,
        repeat(now, len(weights)),
        map(Factors._make, zip(*cycle.scored.factors.tolist(), strict=True)),
        cycle.smoothed.smoothed.tolist(),
        candidates,
        published.candidate_since.tolist(),
        optional(warmup.first_seen_at),
        cycle.smoothed.last_fresh_at,
        cycle.smoothed.last_fresh_weight.tolist(),
        optional(warmup.started_at),
        optional(warmup.warmup_from),
        optional(speed.slowness),
        optional(speed.recent),
        optional(speed.noise),
        *map(optional, speed.fit),
        published.mean.tolist(),
        published.spread.tolist(),
        optional(cycle.capacity.step_scale),
        optional(cycle.scored.compliance),
        optional(cycle.scored.compliance_noise),
        strict=True,
    )
    return list(map(EndpointState._make, fields))


def _decisions(cycle: _Cycle, *, now: float) -> dict[str, WeightDecision]:
    """One ``WeightDecision`` per endpoint: what is published, why, and the state kept."""
    weights = cycle.published.weight.astype(np.int64).tolist()
    candidates = cycle.published.candidate.astype(np.int64).tolist()
    addresses = cycle.inputs.addresses
    health, _ = cycle.health
    fields = zip(
        addresses,
        weights,
        health,
        _explanations(cycle, reasons=_reasons(cycle, weights=weights, candidates=candidates)),
        _states(cycle, weights=weights, candidates=candidates, now=now),
        strict=True,
    )
    return dict(zip(addresses, map(WeightDecision._make, fields), strict=True))


def changed_meaningfully(
    old: Mapping[str, WeightDecision], new: Mapping[str, WeightDecision]
) -> bool:
    """Whether ``new`` needs publishing after ``old``: an endpoint came or went, or a weight
    or health changed. ``compute_weights`` already holds a weight until its move passes
    hysteresis (or settles), so any difference here is one worth a push."""
    if old.keys() != new.keys():
        return True
    for address, decision in new.items():
        before = old[address]
        if before.weight != decision.weight or before.health is not decision.health:
            return True
    return False
