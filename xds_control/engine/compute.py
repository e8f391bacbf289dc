"""One reconcile step of the weight engine: samples in, a ``WeightDecision`` per endpoint out.

Pure: no clock (``now`` is a parameter, Unix seconds, the same clock as the samples'
``observed_at``), no IO, no globals. The caller keeps the returned decisions and passes them
back as ``previous`` next cycle; that is all the state there is.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence

import numpy as np

from xds_control.config import Pool
from xds_control.discovery import Endpoint, Health
from xds_control.engine.decision import Factors, WeightDecision
from xds_control.engine.factors import MIN_STEP_S, capacity_factor
from xds_control.engine.health import assess_health
from xds_control.engine.stability import publish, quantise
from xds_control.engine.staleness import base_weight, stale_target
from xds_control.engine.vector import CAPACITY_CEILING, decide_steady, gather_steady
from xds_control.engine.warmup import warmup_multiplier, warmup_start
from xds_control.signals import Sample, Signal

__all__ = ["WEIGHT_SIGNALS", "changed_meaningfully", "compute_weights"]

WEIGHT_SIGNALS = frozenset(
    {
        Signal.RUNNING,
        Signal.WAITING,
        Signal.BATCH_SLOTS,
        Signal.KV_USAGE,
        Signal.PREFIX_HIT_RATIO,
        Signal.DECODE_STEP_S,
        Signal.GPU_MEMORY_USED,
        Signal.SLO_TTFT,
    }
)
"""Signals that make an endpoint's data fresh; ``up`` or a start time alone do not."""

_NONE: dict[Signal, float] = {}


def _fresh(sample: Sample | None, *, since: float) -> Mapping[Signal, float]:
    if sample is None:
        return _NONE
    if sample.oldest_at >= since:
        return sample.values
    return {s: r.value for s, r in sample.readings.items() if r.observed_at >= since}


def compute_weights(
    *,
    pool: Pool,
    endpoints: Sequence[Endpoint],
    samples: Mapping[str, Sample],
    previous: Mapping[str, WeightDecision],
    now: float,
    vectorised: bool = True,
) -> dict[str, WeightDecision]:
    """Decide the weight and health of every endpoint of ``pool``.

    ``samples`` and ``previous`` are keyed by address; either may lack any endpoint (no data:
    base weight; not seen before: new, so it warms up unless ``previous`` is empty, i.e. the
    engine's first cycle). Endpoints in ``previous`` but not in ``endpoints`` are dropped.
    ``vectorised=False`` decides one endpoint at a time, without the columnar steady-state
    path: the reference that path is tested against (same arguments, same decisions).
    """
    policy = pool.weights
    engine_base = policy.engine_base_weights.of(pool.engine)
    base = base_weight(engine_base=engine_base, policy=policy)
    since = now - policy.stale_after_s
    default_slots = float(policy.max_num_seqs)
    starting = not previous
    cap_alpha = policy.capacity_alpha
    # The recent capacity is never the slower average: on a rise it must not lag the estimate.
    recent_alpha = max(policy.capacity_recent_alpha, cap_alpha)
    keep = 1.0 - policy.capacity_drop
    drain = policy.health.drain_error_rate

    # Steady endpoints (most, most cycles) go through vector.py as columns; the rest, and all
    # of them on the engine's first cycle, one at a time below.
    rest = endpoints
    batch = None
    if vectorised and previous:
        batch, rest = gather_steady(
            endpoints=endpoints,
            samples=samples,
            previous=previous,
            since=since,
            default_slots=default_slots,
            capacity_alpha=cap_alpha,
            recent_alpha=recent_alpha,
            keep=keep,
        )

    fresh_by_address: dict[str, Mapping[Signal, float]] = {}
    slots_by_address: dict[str, float] = {}
    capacities: dict[str, float] = {}
    recents: dict[str, float] = {}
    # The pool's best capacity counts endpoints with no reading this cycle at their last
    # estimate: an idle fast server (no tokens, so no decode step) has not lost its speed, and
    # without it the best would be a slow busy one, whose weight would jump to the top.
    idle: list[float] = []
    for endpoint in rest:
        address = endpoint.address
        fresh = _fresh(samples.get(address), since=since)
        fresh_by_address[address] = fresh
        slots = fresh.get(Signal.BATCH_SLOTS) or endpoint.batch_slots or default_slots
        slots_by_address[address] = slots
        prev = previous.get(address)
        last = prev.capacity_estimate if prev is not None else None
        step = fresh.get(Signal.DECODE_STEP_S)
        # capacity_estimate(), inlined for speed (see the factor formulas below).
        raw = slots / (step if step > MIN_STEP_S else MIN_STEP_S) if step is not None else 0.0
        if not 0.0 < raw < CAPACITY_CEILING:
            # No reading (idle: no tokens, no steps), or absurd slots or step.
            if last is not None:
                idle.append(last)
            continue
        # Smooth the absolute estimate, then normalise by the best smoothed one: the max of
        # noisy raw readings is biased high and would pull every other endpoint down.
        estimate = recent = raw
        if prev is not None and last is not None:
            estimate = last + cap_alpha * (raw - last)
            last = prev.capacity_recent if prev.capacity_recent is not None else last
            recent = last + recent_alpha * (raw - last)
            if recent < keep * estimate:
                estimate = recent  # a real drop, not noise: follow it now
        capacities[address] = estimate
        recents[address] = recent
    known = [*capacities.values(), *idle]
    best = max(known, default=0.0)
    addresses = [endpoint.address for endpoint in rest]
    decisions: dict[str, WeightDecision] = {}
    if batch is None:
        # An endpoint with no capacity reading (and no previous one) is assumed typical.
        typical = statistics.median(c / best for c in known) if best > 0 else 1.0
    else:
        estimates = batch.estimate[batch.estimate == batch.estimate]  # NaN: no reading
        everyone = np.concatenate((np.array(known), estimates, batch.idle))
        best = float(everyone.max()) if everyone.size else 0.0
        # np.median is statistics.median's arithmetic: the middle value, or the two middle
        # values' sum over 2.
        typical = float(np.median(everyone / best)) if best > 0 else 1.0
        not_steady = decide_steady(
            batch=batch,
            best=best,
            engine_base=engine_base,
            policy=policy,
            now=now,
            decisions=decisions,
        )
        for row in not_steady:
            address = batch.addresses[row]
            addresses.append(address)
            fresh_by_address[address] = batch.samples[row].values
            slots_by_address[address] = float(batch.slots[row])
            estimate = batch.estimate[row]
            if estimate == estimate:
                capacities[address] = float(estimate)
                recents[address] = float(batch.recent[row])

    cap_exp, queue_exp = policy.capacity_exponent, policy.queue_exponent
    typical_capacity = capacity_factor(typical, exponent=cap_exp)
    alpha, quantum = policy.ewma_alpha, policy.quantum
    kv_c, prefix_c = policy.kv_coefficient, policy.prefix_coefficient
    gpu_c, slo_c = policy.gpu_memory_coefficient, policy.slo_coefficient
    for address in addresses:
        sample = samples.get(address)
        fresh = fresh_by_address[address]
        prev = previous.get(address)
        failures = sample.scrape_failures if sample is not None else 0
        up = fresh.get(Signal.UP)
        errors = fresh.get(Signal.ERROR_RATIO)
        if failures == 0 and (up is None or up >= 0.5) and (errors is None or errors < drain):
            health, health_reason = Health.HEALTHY, "ok"  # the common case, without a call
        else:
            health, health_reason = assess_health(
                scrape_failures=failures, up=up, error_ratio=errors, policy=policy.health
            )
        first_seen = prev.first_seen_at if prev is not None else (None if starting else now)
        started_now = fresh.get(Signal.STARTED_AT)
        if (
            prev is not None
            and prev.warmup_from is None
            and (started_now is None or started_now == prev.started_at)
        ):
            warmup_from, warm = None, 1.0  # the common case: not warming up, no restart
        else:
            warmup_from = warmup_start(
                warmup_from=prev.warmup_from if prev is not None else None,
                first_seen_at=first_seen,
                started_before=prev.started_at if prev is not None else None,
                started_now=started_now,
                now=now,
            )
            warm = warmup_multiplier(warmup_from=warmup_from, now=now, policy=policy)
            if warm >= 1.0:
                warmup_from = None
        started_at = started_now
        if started_at is None and prev is not None:
            started_at = prev.started_at
        pf = prev.factors if prev is not None else None

        if WEIGHT_SIGNALS.isdisjoint(fresh):
            factors = pf if pf is not None else Factors(engine=engine_base)
            score = factors.product()
            last_fresh_at = prev.last_fresh_at if prev is not None else None
            held = prev.held if prev is not None else base
            target, reason = stale_target(
                held=held, last_fresh_at=last_fresh_at, base=base, now=now, policy=policy
            )
            target *= warm
            # Hold and decay are already smooth; smoothing them again would only lag.
            smoothed = target
        else:
            cap = capacities.get(address)
            slots = slots_by_address[address]
            waiting = fresh.get(Signal.WAITING)
            kv = fresh.get(Signal.KV_USAGE)
            hits = fresh.get(Signal.PREFIX_HIT_RATIO)
            gpu = fresh.get(Signal.GPU_MEMORY_USED)
            slo = fresh.get(Signal.SLO_TTFT)
            # The formulas of factors.py, inlined: a call per factor per endpoint is a third of
            # a 10,000-endpoint reconcile. test_compute_matches_factor_functions keeps them equal.
            # A factor whose signal is missing this cycle keeps its last value (or neutral).
            if cap is not None and best > 0.0:  # capacities can underflow to 0 on garbage
                f_cap = (cap / best) ** cap_exp  # best >= cap >= 0: in [0, 1]
            else:
                f_cap = pf.capacity if pf is not None else typical_capacity
            if waiting is not None:
                f_queue = (1.0 + waiting / (slots if slots > 1.0 else 1.0)) ** -queue_exp
            else:
                f_queue = pf.queue if pf is not None else 1.0
            if kv is not None:
                f_kv = 1.0 - kv_c * kv  # readings are validated: 0 <= kv <= 1
                f_kv = f_kv if f_kv > 1e-6 else 1e-6
            else:
                f_kv = pf.kv if pf is not None else 1.0
            if hits is not None:
                f_prefix = (1.0 + prefix_c * hits * hits) / (1.0 + prefix_c)
            else:
                f_prefix = pf.prefix if pf is not None else 1.0
            if gpu is not None:
                f_gpu = 1.0 - gpu_c * gpu
                f_gpu = f_gpu if f_gpu > 1e-6 else 1e-6
            else:
                f_gpu = pf.gpu_memory if pf is not None else 1.0
            if slo is not None:
                f_slo = 1.0 - slo_c * (1.0 - slo)
                f_slo = f_slo if f_slo > 1e-6 else 1e-6
            else:
                f_slo = pf.slo if pf is not None else 1.0
            factors = Factors(f_cap, f_queue, f_kv, f_prefix, f_gpu, f_slo, engine_base)
            score = f_cap * f_queue * f_kv * f_prefix * f_gpu * f_slo * engine_base
            target = 100.0 * score * warm
            smoothed = target if prev is None else prev.smoothed + alpha * (target - prev.smoothed)
            last_fresh_at = now
            held = smoothed
            reason = "fresh signals"

        if prev is None:
            weight = candidate = quantise(smoothed, quantum=quantum)
            candidate_since = now
        elif quantise(smoothed, quantum=quantum) == prev.weight:
            # Steady state, without publish(): the candidate is the published weight.
            weight = candidate = prev.weight
            candidate_since = prev.candidate_since if prev.candidate == weight else now
        else:
            out = publish(
                smoothed=smoothed,
                published=prev.weight,
                candidate_before=prev.candidate,
                candidate_since=prev.candidate_since,
                now=now,
                policy=policy,
            )
            weight, candidate, candidate_since = out.weight, out.candidate, out.candidate_since
            if out.suppressed:
                reason += f"; kept {weight}, candidate {candidate} within hysteresis"
        if warm < 1.0:
            reason += f"; warming up ({warm:.0%})"
        # Positional, in field order: keyword construction of this 19-field tuple costs twice
        # as much, which is a fifth of a 10,000-endpoint reconcile.
        decisions[address] = WeightDecision(
            address,
            weight,
            health,
            factors,
            score,
            target,
            smoothed,
            warm,
            reason,
            health_reason,
            now,
            sample,
            first_seen,
            last_fresh_at,
            held,
            started_at,
            warmup_from,
            candidate,
            candidate_since,
            capacities.get(address, prev.capacity_estimate if prev is not None else None),
            recents.get(address, prev.capacity_recent if prev is not None else None),
        )
    if batch is not None and addresses and batch.addresses:
        # Both paths decided some: back to the order of ``endpoints``.
        return {endpoint.address: decisions[endpoint.address] for endpoint in endpoints}
    return decisions


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
