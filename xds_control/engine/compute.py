"""One reconcile step of the weight engine: samples in, a ``WeightDecision`` per endpoint out.

Pure: no clock (``now`` is a parameter, Unix seconds, the same clock as the samples'
``observed_at``), no IO, no globals. The caller keeps the returned decisions and passes them
back as ``previous`` next cycle; that is all the state there is.

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
from xds_control.engine.decision import Factors, WeightDecision
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
    previous: Mapping[str, WeightDecision],
    now: float,
    data_path: bool = False,
    fleet_scale: float | None = None,
) -> dict[str, WeightDecision]:
    """Decide the weight and health of every endpoint of ``pool``.

    ``data_path``: the samples carry the data path's readings (``signals.data_path``), which
    time the endpoints whose engine exports no decode step (``engine/capacity.py``), on the
    pool's scale or else ``fleet_scale``'s (``fleet_step_scale`` of the last decisions).

    ``samples`` and ``previous`` are keyed by address; either may lack any endpoint (no data:
    base weight; not seen before: new, so it warms up unless ``previous`` is empty, i.e. the
    engine's first cycle). Endpoints in ``previous`` but not in ``endpoints`` are dropped.
    """
    policy = pool.weights
    engines = engine_columns(pool, endpoints)
    engine_base = engines.base
    inputs = gather(
        endpoints=endpoints,
        samples=samples,
        previous=previous,
        since=now - policy.stale_after_s,
        default_slots=float(policy.max_num_seqs),
    )
    stale = inputs.stale
    capacity = assess_capacity(
        inputs,
        policy,
        decode_step=engines.decode_step,
        data_path=data_path,
        fleet_scale=fleet_scale,
    )
    health, health_reasons = assess_pool_health(inputs, policy.health)
    warmup = ramp(inputs, starting=not previous, now=now, policy=policy)
    scored = score_factors(inputs, capacity, stale=stale, engine_base=engine_base, policy=policy)
    factors = scored.factors
    score = product(factors)
    smoothed = _smooth(
        inputs,
        score=score,
        warmup=warmup,
        stale=stale,
        slowed=capacity.speed.slowed,
        base=base_weight(engine_base=engine_base, policy=policy),
        now=now,
        policy=policy,
    )
    published = publish(
        smoothed=smoothed.smoothed,
        published=inputs.last("weight"),
        candidate_before=inputs.last("candidate"),
        candidate_since=inputs.last("candidate_since"),
        mean_before=inputs.last("weight_mean"),
        spread_before=inputs.last("weight_spread"),
        measured=~stale & (warmup.warm >= 1.0),
        alpha=noise_alpha(elapsed_s=now - inputs.last("computed_at"), settle_s=policy.settle_s),
        now=now,
        policy=policy,
    )
    return _decisions(
        inputs,
        capacity=capacity,
        health=health,
        health_reasons=health_reasons,
        warmup=warmup,
        factors=factors,
        score=score,
        smoothed=smoothed,
        published=published,
        scored=scored,
        now=now,
    )


@dataclass(frozen=True, slots=True)
class Smoothed:
    """Each endpoint's target and smoothed weight, and the state a stale one holds on to."""

    target: Column
    smoothed: Column
    held: Column
    last_fresh_at: list[float | None]
    reasons: list[str]


def _smooth(
    inputs: Inputs,
    *,
    score: Column,
    warmup: Ramp,
    stale: Mask,
    slowed: Mask,
    base: Column,
    now: float,
    policy: WeightPolicy,
) -> Smoothed:
    """Target weights from the scores, smoothed; a stale endpoint holds, then decays. Where
    the speed reading found a server slower past its noise band (``slowed``), a lower target
    is taken as it is: the capacity is smoothed already, and that change is not noise."""
    target = 100.0 * score * warmup.warm
    last = inputs.last("smoothed")
    smoothed = np.where(inputs.known, ewma(last, target, alpha=policy.ewma_alpha), target)
    smoothed = np.where(slowed, np.minimum(smoothed, target), smoothed)
    held = smoothed.copy()
    last_fresh_at: list[float | None] = [now] * len(inputs.addresses)
    reasons = ["fresh signals"] * len(inputs.addresses)
    for row in rows(stale):
        prev = inputs.previous[row]
        held[row] = prev.held if prev is not None else base[row]
        last_fresh_at[row] = prev.last_fresh_at if prev is not None else None
        hold, reasons[row] = stale_target(
            held=float(held[row]),
            last_fresh_at=last_fresh_at[row],
            base=float(base[row]),
            now=now,
            policy=policy,
        )
        # Hold and decay are already smooth; smoothing them again would only lag.
        target[row] = smoothed[row] = hold * float(warmup.warm[row])
    return Smoothed(
        target=target,
        smoothed=smoothed,
        held=held,
        last_fresh_at=last_fresh_at,
        reasons=reasons,
    )


def _explain(
    reasons: list[str],
    *,
    suppressed: Mask,
    weights: list[int],
    candidates: list[int],
    band: Column,
    warm: Column,
    capacity: Capacity,
    stale: Mask,
) -> list[str]:
    """The reasons, with where each fresh endpoint's capacity came from, the weights
    the dead band kept and the endpoints warming up."""
    reasons = [
        reason if is_stale else f"{reason}; capacity: {capacity.source(row)}"
        for row, (reason, is_stale) in enumerate(zip(reasons, stale.tolist(), strict=True))
    ]
    for row in rows(suppressed):
        reasons[row] += (
            f"; kept {weights[row]}, candidate {candidates[row]} within the dead band"
            f" (+-{float(band[row]):.1f})"
        )
    for row in rows(warm < 1.0):
        reasons[row] += f"; warming up ({float(warm[row]):.0%})"
    return reasons


def _decisions(
    inputs: Inputs,
    *,
    capacity: Capacity,
    health: list[Health],
    health_reasons: list[str],
    warmup: Ramp,
    factors: Column,
    score: Column,
    smoothed: Smoothed,
    published: Published,
    scored: Scored,
    now: float,
) -> dict[str, WeightDecision]:
    """One ``WeightDecision`` per endpoint, from the columns, field by field in order.

    ``_make`` takes each row's 33 fields as one tuple; calling the constructor with 33
    positional arguments costs half as much again, a few ms at 10,000 endpoints."""
    weights = published.weight.astype(np.int64).tolist()
    candidates = published.candidate.astype(np.int64).tolist()
    reasons = _explain(
        smoothed.reasons,
        suppressed=published.suppressed,
        weights=weights,
        candidates=candidates,
        band=published.band,
        warm=warmup.warm,
        capacity=capacity,
        stale=inputs.stale,
    )
    fields = zip(
        inputs.addresses,
        weights,
        health,
        map(Factors._make, zip(*factors.tolist(), strict=True)),
        score.tolist(),
        smoothed.target.tolist(),
        smoothed.smoothed.tolist(),
        warmup.warm.tolist(),
        reasons,
        health_reasons,
        repeat(now, len(inputs.addresses)),
        inputs.samples,
        optional(warmup.first_seen_at),
        smoothed.last_fresh_at,
        smoothed.held.tolist(),
        optional(warmup.started_at),
        optional(warmup.warmup_from),
        candidates,
        published.candidate_since.tolist(),
        optional(capacity.kept_estimate),
        optional(capacity.speed.slowness),
        optional(capacity.speed.recent),
        optional(capacity.speed.noise),
        *map(optional, capacity.speed.fit),
        published.mean.tolist(),
        published.spread.tolist(),
        optional(capacity.step_scale),
        optional(scored.compliance),
        optional(scored.compliance_noise),
        strict=True,
    )
    return dict(zip(inputs.addresses, map(WeightDecision._make, fields), strict=True))


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
