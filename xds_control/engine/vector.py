"""The steady-state endpoints of a reconcile, computed as columns instead of one at a time.

Most endpoints in most cycles are steady: decided last cycle, fresh signals, healthy, not
warming up, not restarted. For them ``compute_weights`` is the same arithmetic on every row,
and at 10,000 endpoints the interpreter running that arithmetic row by row was most of the
cycle. Here it runs once per column with NumPy; Python is left to pull values out of the
samples and to build the decisions. Every operation is the scalar path's, in its order, so
results are bit for bit the same; ``tests/unit/engine/test_vector.py`` holds them equal.

Missing signals are NaN in the columns. Readings are validated (``Sample.build``/
``make_reading`` reject NaN), so NaN can only mean "no reading". Powers go through Python's
own ``pow``: NumPy's SIMD ``power`` may round the last bit differently, and a quantum
boundary would turn that bit into a different weight.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import repeat
from operator import itemgetter

import numpy as np
import numpy.typing as npt

from xds_control.config import WeightPolicy
from xds_control.discovery import Endpoint, Health
from xds_control.engine.decision import Factors, WeightDecision
from xds_control.engine.factors import MIN_STEP_S
from xds_control.engine.stability import publish
from xds_control.signals import Sample, Signal

__all__ = ["SteadyBatch", "decide_steady", "gather_steady"]

Column = npt.NDArray[np.float64]

CAPACITY_CEILING = 1e12
"""Slots per second beyond any real engine; larger comes from garbage and would overflow."""

# Column order of the signal matrix. The first eight are the weight signals (WEIGHT_SIGNALS):
# an endpoint with none of them fresh is stale, which is the scalar path's business.
_SIGNALS = (
    Signal.DECODE_STEP_S,
    Signal.BATCH_SLOTS,
    Signal.WAITING,
    Signal.KV_USAGE,
    Signal.PREFIX_HIT_RATIO,
    Signal.GPU_MEMORY_USED,
    Signal.SLO_TTFT,
    Signal.RUNNING,
    Signal.UP,
    Signal.ERROR_RATIO,
    Signal.STARTED_AT,
)
_WEIGHT_COLUMNS = 8
_NANS = tuple(repeat(float("nan"), len(_SIGNALS)))

# The previous decision's state the arithmetic needs, by position: one C call per endpoint.
_STATE = ("smoothed", "weight", "capacity_estimate", "started_at", "capacity_recent")
_prev_state = itemgetter(*(WeightDecision._fields.index(name) for name in _STATE))
_new = tuple.__new__  # skips NamedTuple.__new__'s Python frame; the field order is the contract


@dataclass(frozen=True, slots=True)
class SteadyBatch:
    """Endpoints that may be steady, with their signals and previous state as columns.

    Row ``i`` of every column belongs to ``addresses[i]``. ``estimate`` and ``recent`` are the
    smoothed and the quick capacity (NaN: no reading this cycle), the same values the scalar
    path's first loop finds.
    """

    addresses: list[str]
    samples: list[Sample]
    previous: list[WeightDecision]
    signals: Column
    """Shape (len(_SIGNALS), n): one row per signal, NaN when there is no reading."""
    state: Column
    """Shape (len(_STATE) + 7, n): the previous decision's ``_STATE``, then its factors."""
    slots: Column
    estimate: Column
    recent: Column
    idle: Column
    """Last estimates of the rows with no reading this cycle (they still count for the best)."""


def gather_steady(
    *,
    endpoints: Sequence[Endpoint],
    samples: Mapping[str, Sample],
    previous: Mapping[str, WeightDecision],
    since: float,
    default_slots: float,
    capacity_alpha: float,
    recent_alpha: float,
    keep: float,
) -> tuple[SteadyBatch, list[Endpoint]]:
    """Split ``endpoints`` into a batch that may be steady and the rest (the scalar path's).

    The batch is every endpoint with a previous decision not warming up and a sample with no
    failed scrape whose readings are all fresh (so the fresh values are the sample's values).
    """
    addresses: list[str] = []
    batch_samples: list[Sample] = []
    prevs: list[WeightDecision] = []
    rest: list[Endpoint] = []
    values: list[float] = []
    state: list[float | None] = []
    fallback_slots: list[float] = []
    samples_get, previous_get = samples.get, previous.get
    put_values, put_state = values.extend, state.extend
    for endpoint in endpoints:
        address = endpoint.address
        sample = samples_get(address)
        prev = previous_get(address)
        if (
            sample is None
            or prev is None
            or prev.warmup_from is not None
            or sample.scrape_failures
            or not sample.oldest_at >= since
        ):
            rest.append(endpoint)
            continue
        addresses.append(address)
        batch_samples.append(sample)
        prevs.append(prev)
        put_values(map(sample.values.get, _SIGNALS, _NANS))
        put_state(_prev_state(prev))
        put_state(prev.factors)
        fallback_slots.append(endpoint.batch_slots or default_slots)
    n = len(addresses)
    # None (no capacity estimate or start time yet) becomes NaN.
    signals = np.array(values, dtype=np.float64).reshape(n, len(_SIGNALS)).T.copy()
    prev_state = np.array(state, dtype=np.float64).reshape(n, len(_STATE) + 7).T.copy()

    # The scalar path's capacity loop: `fresh.get(BATCH_SLOTS) or endpoint's or default`, then
    # slots over the floored decode step, kept in (0, ceiling), smoothed from the last estimate
    # (slowly, and quickly into ``recent``; a drop of ``recent`` below ``keep`` of it wins).
    # Garbage slots overflow to inf as Python floats do, silently; the ceiling drops them.
    with np.errstate(over="ignore", invalid="ignore"):
        slots = signals[1]
        fallback = np.array(fallback_slots, dtype=np.float64)
        slots = np.where((slots == slots) & (slots != 0.0), slots, fallback)
        step = signals[0]
        raw = slots / np.where(step > MIN_STEP_S, step, MIN_STEP_S)
        valid = (step == step) & (raw > 0.0) & (raw < CAPACITY_CEILING)
        last = prev_state[2]
        smoothed = np.where(last == last, last + capacity_alpha * (raw - last), raw)
        last_recent = np.where(prev_state[4] == prev_state[4], prev_state[4], last)
        recent = np.where(last == last, last_recent + recent_alpha * (raw - last_recent), raw)
        smoothed = np.where(recent < keep * smoothed, recent, smoothed)
    estimate = np.where(valid, smoothed, np.nan)
    recent = np.where(valid, recent, np.nan)
    idle = last[~valid & (last == last)]
    batch = SteadyBatch(
        addresses, batch_samples, prevs, signals, prev_state, slots, estimate, recent, idle
    )
    return batch, rest


def _pow(base: Column, exponent: float) -> Column:
    """``base ** exponent`` with Python's float pow, element by element (see the module doc)."""
    return np.array(list(map(pow, base.tolist(), repeat(exponent))), dtype=np.float64)


def _keep(value: Column, fresh: Column, last: Column) -> Column:
    """``value`` where its signal is fresh, else the factor's last value."""
    return np.where(fresh == fresh, value, last)


def decide_steady(
    *,
    batch: SteadyBatch,
    best: float,
    engine_base: float,
    policy: WeightPolicy,
    now: float,
    decisions: dict[str, WeightDecision],
) -> list[int]:
    """Decide every steady endpoint of ``batch`` into ``decisions``; return the rows that are
    not steady after all (unhealthy, restarted, or stale), for the scalar path.

    ``best`` is the pool's best capacity estimate, over every endpoint.
    """
    signals, prev_state, slots = batch.signals, batch.state, batch.slots
    _, _, waiting, kv, hits, gpu, slo, _, up, errors, started = signals
    last_smoothed, last_weight, _, last_started = prev_state[:4]
    pf_cap, pf_queue, pf_kv, pf_prefix, pf_gpu, pf_slo = prev_state[5:11]
    drain = policy.health.drain_error_rate
    steady = (
        np.any(signals[:_WEIGHT_COLUMNS] == signals[:_WEIGHT_COLUMNS], axis=0)
        & ((up != up) | (up >= 0.5))
        & ((errors != errors) | (errors < drain))
        & ((started != started) | (started == last_started))
    )

    # The formulas of compute.py's per-endpoint loop, operation for operation.
    estimate = batch.estimate
    if best > 0.0:
        f_cap = _keep(_pow(estimate / best, policy.capacity_exponent), estimate, pf_cap)
    else:
        f_cap = pf_cap
    queue_base = 1.0 + waiting / np.where(slots > 1.0, slots, 1.0)
    f_queue = _keep(_pow(queue_base, -policy.queue_exponent), waiting, pf_queue)
    f_kv = 1.0 - policy.kv_coefficient * kv
    f_kv = _keep(np.where(f_kv > 1e-6, f_kv, 1e-6), kv, pf_kv)
    prefix_c = policy.prefix_coefficient
    f_prefix = _keep((1.0 + prefix_c * hits * hits) / (1.0 + prefix_c), hits, pf_prefix)
    f_gpu = 1.0 - policy.gpu_memory_coefficient * gpu
    f_gpu = _keep(np.where(f_gpu > 1e-6, f_gpu, 1e-6), gpu, pf_gpu)
    f_slo = 1.0 - policy.slo_coefficient * (1.0 - slo)
    f_slo = _keep(np.where(f_slo > 1e-6, f_slo, 1e-6), slo, pf_slo)
    score = f_cap * f_queue * f_kv * f_prefix * f_gpu * f_slo * engine_base
    target = 100.0 * score  # times a warm-up multiplier of 1.0
    smoothed = last_smoothed + policy.ewma_alpha * (target - last_smoothed)
    quantum = policy.quantum
    # quantise(): int() truncates, and smoothed >= 0 here.
    candidate = np.clip(np.trunc(smoothed / quantum + 0.5) * quantum, 1, 100)
    unchanged = candidate == last_weight

    not_steady: list[int] = []
    healthy, fresh_reason = Health.HEALTHY, "fresh signals"
    rows = zip(
        batch.addresses,
        batch.samples,
        batch.previous,
        steady.tolist(),
        unchanged.tolist(),
        f_cap.tolist(),
        f_queue.tolist(),
        f_kv.tolist(),
        f_prefix.tolist(),
        f_gpu.tolist(),
        f_slo.tolist(),
        score.tolist(),
        target.tolist(),
        smoothed.tolist(),
        estimate.tolist(),
        batch.recent.tolist(),
        strict=True,
    )
    for row, (
        address,
        sample,
        prev,
        ok,
        same,
        fc,
        fq,
        fk,
        fp,
        fg,
        fs,
        sc,
        tg,
        sm,
        est,
        rc,
    ) in enumerate(rows):
        if not ok:
            not_steady.append(row)
            continue
        reason = fresh_reason
        if same:
            weight = candidate_now = prev.weight
            since = prev.candidate_since if prev.candidate == weight else now
        else:
            out = publish(
                smoothed=sm,
                published=prev.weight,
                candidate_before=prev.candidate,
                candidate_since=prev.candidate_since,
                now=now,
                policy=policy,
            )
            weight, candidate_now, since = out.weight, out.candidate, out.candidate_since
            if out.suppressed:
                reason += f"; kept {weight}, candidate {candidate_now} within hysteresis"
        decisions[address] = _new(
            WeightDecision,
            (
                address,
                weight,
                healthy,
                _new(Factors, (fc, fq, fk, fp, fg, fs, engine_base)),
                sc,
                tg,
                sm,
                1.0,
                reason,
                "ok",
                now,
                sample,
                prev.first_seen_at,
                now,
                sm,
                prev.started_at,
                None,
                candidate_now,
                since,
                est if est == est else prev.capacity_estimate,
                rc if rc == rc else prev.capacity_recent,
            ),
        )
    return not_steady
