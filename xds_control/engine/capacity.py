"""Each endpoint's capacity estimate, smoothed on its own, and the pool's best and typical.

Capacity (batch slots per second of decode step) is smoothed before anything else: one rate
window's inter-token latency swings +-25% on a lightly loaded server, and the maximum of noisy
raw readings is biased high, which would pull every other endpoint down. It falls fast (a quick
estimate that drops ``capacity_drop`` below the slow one wins at once) and rises slowly.

What times a step depends on the engine. vLLM and SGLang export a decode step (the time between
tokens); Triton and ONNX Runtime only compute time per execution (``EXEC_COMPUTE_S``), a whole
request for a generative model: tens of times a decode step, and no measure of one. Envoy's data
path (``signals.data_path``) times every server alike: seconds per response byte while a stream
runs, which for servers of one API and model is the decode step over a constant (the bytes an
output token takes). On an endpoint that has both, the ratio of the engine's step to the data
path's is that constant (``step_scale``, smoothed); the pool's median of it puts every
data-path reading on the engines' scale. So, per endpoint, the step is the engine's where it
exports one, else the data path's (scaled), and the capacities of vLLM, SGLang, Triton, ONNX
Runtime and servers with no metrics at all compare in one pool.

Without the data path, a pool with any vLLM or SGLang endpoint is measured in decode steps: an
endpoint with only compute per execution has no capacity reading there and is assumed at the
pool's ``typical``, as an endpoint with no reading yet. A pool with none (Triton or ONNX
Runtime only) compares compute per execution among its endpoints.

Either reading counts every prefill that stalled a step; ``_without_stalls`` takes it out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from xds_control.config import WeightPolicy
from xds_control.engine.columns import Column, Mask
from xds_control.engine.decision import WeightDecision
from xds_control.engine.factors import capacity_estimate
from xds_control.engine.inputs import Inputs
from xds_control.engine.stability import ewma
from xds_control.signals import Sample, Signal

__all__ = [
    "ASSUMED",
    "BY_DATA_PATH",
    "BY_DATA_PATH_SCALED",
    "BY_EXECUTION",
    "BY_STEP",
    "CAPACITY_CEILING",
    "STALL_FIT",
    "Capacity",
    "assess_capacity",
    "fleet_step_scale",
]

CAPACITY_CEILING = 1e12
"""Slots per second beyond any real engine; larger comes from garbage and would overflow."""

BY_STEP = "decode step (engine)"
BY_EXECUTION = "compute per execution (engine)"
BY_DATA_PATH = "time per response byte (data path)"
BY_DATA_PATH_SCALED = "time per response byte (data path) on the engines' decode-step scale"
ASSUMED = "none: assumed typical"
"""Where an endpoint's capacity came from, as its decision's reason says."""


@dataclass(frozen=True, slots=True)
class Capacity:
    """This cycle's capacity estimates (NaN: no reading) and the pool's reference points."""

    slots: Column
    """Batch slots: exported, else the endpoint's configured, else the pool's default."""
    estimate: Column
    """Smoothed absolute capacity; the capacity factor is this over ``best``."""
    recent: Column
    """Quick EWMA of the same readings."""
    kept_estimate: Column
    """``estimate``, else the last one: what the next cycle smooths from."""
    kept_recent: Column
    """``recent``, else the last one."""
    fit: Column
    """Shape (4, n): the running means of x, y, x*x and x*y (``STALL_FIT``) of the fit of
    each endpoint's decode step (y) to the prefill work in it (x), kept for the next cycle."""
    best: float
    """The pool's best estimate, counting idle endpoints at their last one; 0 if none."""
    typical: float
    """Median estimate over ``best``: what an endpoint with no reading yet is assumed to be."""
    measure: str
    """What the pool's capacities come from: ``BY_STEP`` or ``BY_EXECUTION``."""
    assumed: Mask
    """Endpoints with no comparable timing (only compute per execution in a pool measured in
    decode steps, without the data path): assumed at ``typical`` every cycle."""
    by_data_path: Mask
    """Endpoints whose step this cycle is the data path's (no engine step to read)."""
    scaled: bool
    """Whether the data path's readings are on the engines' scale (some endpoint of the pool
    has had both); else they compare only among themselves."""
    step_scale: Column
    """Each endpoint's smoothed engine step over data-path step, kept for the next cycle."""

    def source(self, row: int) -> str:
        """Where ``row``'s capacity comes from, as its decision's reason says."""
        if self.assumed[row]:
            return ASSUMED
        if self.by_data_path[row]:
            return BY_DATA_PATH_SCALED if self.scaled else BY_DATA_PATH
        return self.measure


STALL_FIT = ("stall_fit_x", "stall_fit_y", "stall_fit_xx", "stall_fit_xy")
"""The ``WeightDecision`` fields that carry the stall fit, in ``Capacity.fit`` row order."""

# Below this spread of the prefill work (its coefficient of variation squared) the fit cannot
# tell a slope from noise, and nothing is taken off the decode step.
_MIN_SPREAD = 0.01

_MOSTLY_STALL = 0.5

_WORK_CEILING = 1e9
"""Prefill tokens per decode step beyond any real batch."""
_STEP_CEILING_S = 1e6
_SCALE_CEILING = 1e9
"""Engine step over data-path step (bytes per token) beyond any real output format."""


@dataclass(frozen=True, slots=True)
class _Timing:
    """Each endpoint's step reading this cycle (NaN: none), the prefill work in it, and where
    it came from."""

    step: Column
    work: Column
    by_data_path: Mask
    scaled: bool
    step_scale: Column


def _timing(inputs: Inputs, *, data_path: bool, fleet_scale: float | None, alpha: float) -> _Timing:
    """The engine's decode step where it exports one, else the data path's time per byte on
    the engines' scale (with ``data_path``; see the module docstring): the pool's median
    ``step_scale``, else the fleet's (``fleet_scale``: a pool of Triton servers only is put on
    the scale of the fleet's vLLM servers, so a route can weigh the two)."""
    engine_step = inputs.signal(Signal.DECODE_STEP_S)
    path_step = inputs.signal(Signal.DATAPATH_STEP_S)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        ratio = engine_step / path_step
        readable = (ratio > 0.0) & (ratio < _SCALE_CEILING)
    last = inputs.last("step_scale")
    scale = np.where(readable, np.where(last == last, ewma(last, ratio, alpha=alpha), ratio), last)
    known = scale[scale == scale]
    if known.size:
        scaled, pool_scale = True, float(np.median(known))
    elif fleet_scale is not None:
        scaled, pool_scale = True, fleet_scale
    else:
        scaled, pool_scale = False, 1.0
    by_path = (engine_step != engine_step) & (path_step == path_step)
    if not data_path:
        by_path = np.zeros_like(by_path)
    engine_work = inputs.signal(Signal.RUNNING) * inputs.signal(Signal.PREFILL_RATIO)
    path_work = inputs.signal(Signal.DATAPATH_INFLIGHT) * inputs.signal(
        Signal.DATAPATH_PROMPT_RATIO
    )
    return _Timing(
        step=np.where(by_path, path_step * pool_scale, engine_step),
        work=np.where(by_path, path_work, engine_work),
        by_data_path=by_path,
        scaled=scaled,
        step_scale=scale,
    )


@dataclass(frozen=True, slots=True)
class _Line:
    intercept: Column
    slope: Column
    fitted: Mask
    """Where the work varied enough to fit a slope (elsewhere the slope is 0: no stall is
    taken off, so a changed server shows in the raw reading)."""


def _line(fit: Column) -> _Line:
    """The line of a fit's running means (x, y, x*x, x*y): no slope (0) where the work did not
    vary enough to tell one from noise; NaN where there is no fit."""
    mean_x, mean_y, mean_xx, mean_xy = fit
    spread = mean_xx - mean_x * mean_x
    with np.errstate(invalid="ignore"):
        fitted = spread > _MIN_SPREAD * mean_x * mean_x
    with np.errstate(invalid="ignore", divide="ignore"):
        slope = np.where(fitted, (mean_xy - mean_x * mean_y) / spread, 0.0)
    slope = np.where(slope == slope, np.maximum(slope, 0.0), 0.0)
    return _Line(intercept=mean_y - slope * mean_x, slope=slope, fitted=fitted)


def _without_stalls(
    inputs: Inputs, *, step: Column, x: Column, alpha: float, drop: float
) -> tuple[Column, Column]:
    """The decode step less the prefill stalls in it, and the fit carried on.

    A step that also prefills takes as long as both, and the decode step the engine reads (the
    mean time between output tokens) counts it for every sequence it held up: under prompt-heavy
    load the reading is mostly prefill, and it rises and falls with the server's share of the
    traffic, which the weight itself sets. Per endpoint, the reading is fitted as a line in the
    prefill work per step ``x`` (the engine's ``running * prefill tokens per output token``, or
    the data path's ``in flight * request bytes per response byte``; running means, at
    ``alpha`` a cycle, of x, y, x*x and x*y): the slope is the server's prefill time per unit
    of work, measured on its own traffic; the step less ``slope * x`` is the decode step alone,
    which is what the hardware can do and does not follow the load. A reading ``drop`` off
    the fitted line (either way, in ratio) restarts the fit at it, the line scaled by the
    change: the server changed, and its prefill with it.
    """
    with np.errstate(invalid="ignore"):
        # Garbage (absurd counts or steps) would overflow the squares: no reading.
        fresh = (step < _STEP_CEILING_S) & (x < _WORK_CEILING)
    last = np.vstack([inputs.last(name) for name in STALL_FIT])
    has_last = last[0] == last[0]
    # The line the fit held before this cycle: a reading far off it at this cycle's work is a
    # server that changed (slowed down, recovered), not a point of the same line. Fitted on
    # together, the two regimes read as one steep slope (the slowed server runs more requests
    # at once, so its work grows with its step) and the slowdown as prefill stall: the
    # capacity would never fall. So the fit starts afresh at the new reading, its line scaled
    # by the change (a slowed GPU prefills slower too): the slope times the reading over
    # what the line expected, over the spread of work the fit had measured.
    before = _line(last)
    work = np.where(x == x, x, 0.0)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        expected = before.intercept + before.slope * work
        change = step / expected
        broke = (np.abs(np.log(change)) > -np.log(1.0 - drop)) & before.fitted & (expected > 0.0)
        spread = last[2] - last[0] * last[0]
        rescaled = np.vstack(
            (
                work,
                step,
                work * work + spread,
                work * step + before.slope * change * spread,
            )
        )
        now = np.vstack((x, step, x * x, x * step))
    fit = np.where(
        fresh,
        np.where(broke, rescaled, np.where(has_last, ewma(last, now, alpha=alpha), now)),
        last,
    )
    slope = _line(fit).slope
    stall = slope * np.where(x == x, x, 0.0)
    # A reading that is mostly stall counts as half its step at least: what the fit takes
    # off is least sure there, and a server whose clients wait on prefill that long is slow
    # for them (a slowed server under a prompt-heavy load reads so before the fit learns it).
    clean = np.maximum(step - stall, (1.0 - _MOSTLY_STALL) * step)
    return clean, fit


def assess_capacity(
    inputs: Inputs,
    policy: WeightPolicy,
    *,
    decode_step: Mask,
    data_path: bool = False,
    fleet_scale: float | None = None,
) -> Capacity:
    """Smooth this cycle's capacity readings into each endpoint's estimate. ``decode_step``:
    the endpoints whose engine exports a decode step (vLLM, SGLang); with any, or with the
    data path on (``data_path``), the pool is measured in decode steps, else in compute per
    execution. ``fleet_scale``: the fleet's median ``step_scale`` (``fleet_step_scale``)."""
    exported = inputs.signal(Signal.BATCH_SLOTS)
    # An exported 0 is no better than none.
    slots = np.where((exported == exported) & (exported != 0.0), exported, inputs.fallback_slots)
    timed = _timing(
        inputs, data_path=data_path, fleet_scale=fleet_scale, alpha=policy.capacity_alpha
    )
    step, fit = _without_stalls(
        inputs,
        step=timed.step,
        x=timed.work,
        alpha=policy.capacity_alpha,
        drop=policy.capacity_drop,
    )
    if data_path:
        # Every endpoint is timed alike; one with no reading yet is new or idle, as anywhere.
        measure = BY_STEP if decode_step.any() else BY_DATA_PATH
        timing = step
        assumed = np.zeros(len(inputs.addresses), dtype=np.bool_)
    elif decode_step.any():
        measure, timing = BY_STEP, step
        assumed = ~decode_step & (step != step)
    else:
        measure = BY_EXECUTION
        timing = np.where(step == step, step, inputs.signal(Signal.EXEC_COMPUTE_S))
        assumed = np.zeros(len(inputs.addresses), dtype=np.bool_)
    raw = capacity_estimate(batch_slots=slots, decode_step_s=timing)
    # No reading (idle: no tokens, no steps), or absurd slots or step.
    valid = (raw > 0.0) & (raw < CAPACITY_CEILING)
    # An assumed endpoint's last estimate, if any, was in another measure: dropped.
    last = np.where(assumed, np.nan, inputs.last("capacity_estimate"))
    last_recent = inputs.last("capacity_recent")
    last_recent = np.where(last_recent == last_recent, last_recent, last)
    has_last = last == last
    estimate = np.where(has_last, ewma(last, raw, alpha=policy.capacity_alpha), raw)
    # The recent capacity is never the slower average: on a rise it must not lag the estimate.
    recent_alpha = max(policy.capacity_recent_alpha, policy.capacity_alpha)
    recent = np.where(has_last, ewma(last_recent, raw, alpha=recent_alpha), raw)
    # A real drop, not noise: follow it now.
    estimate = np.where(recent < (1.0 - policy.capacity_drop) * estimate, recent, estimate)
    estimate = np.where(valid, estimate, np.nan)
    recent = np.where(valid, recent, np.nan)
    # The best counts endpoints with no reading this cycle at their last estimate: an idle
    # fast server (no tokens, so no decode step) has not lost its speed, and without it the
    # best would be a slow busy one, whose weight would jump to the top.
    known = np.concatenate((estimate[valid], last[~valid & has_last]))
    best = float(known.max()) if known.size else 0.0
    typical = float(np.median(known / best)) if best > 0.0 else 1.0
    return Capacity(
        slots=slots,
        estimate=estimate,
        recent=recent,
        kept_estimate=np.where(valid, estimate, last),
        kept_recent=np.where(
            valid, recent, np.where(assumed, np.nan, inputs.last("capacity_recent"))
        ),
        fit=fit,
        best=best,
        typical=typical,
        measure=measure,
        assumed=assumed,
        by_data_path=timed.by_data_path,
        scaled=timed.scaled,
        step_scale=timed.step_scale,
    )


def fleet_step_scale(
    *, decisions: Mapping[str, WeightDecision], samples: Mapping[str, Sample]
) -> float | None:
    """The median step scale over the fleet: each endpoint's smoothed ``step_scale`` from
    ``decisions`` (every pool's, by address), else its sample's engine step over data-path step
    (the first cycle). It puts the data path's readings of a pool with no engine step of its
    own on the fleet's scale; ``None`` if no endpoint has both readings."""
    scales = []
    for address in decisions.keys() | samples.keys():
        decision = decisions.get(address)
        if decision is not None and decision.step_scale is not None:
            scales.append(decision.step_scale)
            continue
        sample = samples.get(address)
        if sample is None:
            continue
        engine_step = sample.values.get(Signal.DECODE_STEP_S)
        path_step = sample.values.get(Signal.DATAPATH_STEP_S)
        if engine_step and path_step and 0.0 < engine_step / path_step < _SCALE_CEILING:
            scales.append(engine_step / path_step)
    return float(np.median(scales)) if scales else None
