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
path's is that constant (``step_scale``, smoothed in log, each reading bounded to a factor of
two from the kept one); the pool's median of it puts every data-path reading on the engines'
scale. So, per endpoint, the step is the engine's where it exports one, else the data path's
(scaled), and the capacities of vLLM, SGLang, Triton, ONNX Runtime and servers with no metrics
at all compare in one pool.

Without the data path, a pool with any vLLM or SGLang endpoint is measured in decode steps: an
endpoint with only compute per execution has no capacity reading there and is assumed at the
pool's ``typical``, as an endpoint with no reading yet. A pool with none (Triton or ONNX
Runtime only) compares compute per execution among its endpoints.

Either reading counts every prefill that stalled a step: each is read against its group's
common line of step over prefill work (``engine/speed.py``), and the capacity is the endpoint's
slots over that line's step at the group's mean work, scaled by the endpoint's slowness, pooled
with its peers'.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from xds_control.config import WeightPolicy
from xds_control.engine.columns import Column, Mask
from xds_control.engine.decision import EndpointState
from xds_control.engine.factors import MIN_STEP_S, capacity_estimate
from xds_control.engine.inputs import Inputs
from xds_control.engine.speed import FIT, SPEED, Speed, pooled, read_speed
from xds_control.engine.stability import ewma
from xds_control.signals import Sample, Signal

__all__ = [
    "ASSUMED",
    "BY_DATA_PATH",
    "BY_DATA_PATH_SCALED",
    "BY_EXECUTION",
    "BY_STEP",
    "CAPACITY_CEILING",
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
    """Absolute capacity this cycle (NaN: no reading); the capacity factor is this over
    ``best``."""
    kept_estimate: Column
    """``estimate``, else the one the endpoint's kept slowness gives: what the route over
    pools counts and an idle endpoint keeps."""
    speed: Speed
    """Each endpoint's slowness against its group's line, and the state the next cycle reads."""
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


_WORK_CEILING = 1e9
"""Prefill tokens per decode step beyond any real batch."""
_STEP_CEILING_S = 1e6
_SCALE_CEILING = 1e9
"""Engine step over data-path step (bytes per token) beyond any real output format."""
_SCALE_MOVE = float(np.log(2.0))
"""The farthest (in log) one cycle's reading of an endpoint's step scale is counted from its
kept one: a window whose engine step caught a long prefill stall that the data path's window
missed would otherwise move the scale, and through the pool's median every data-path reading,
many times over (docs/weights.md, "Pools that mix engines")."""


@dataclass(frozen=True, slots=True)
class _Timing:
    """Each endpoint's step reading this cycle (NaN: none), the prefill work in it, and where
    it came from."""

    step: Column
    work: Column
    by_data_path: Mask
    scaled: bool
    step_scale: Column


def _timing(
    inputs: Inputs,
    *,
    decode_step: Mask,
    data_path: bool,
    fleet_scale: float | None,
    alpha: float,
) -> _Timing:
    """The engine's decode step where it exports one, else the data path's time per byte on
    the engines' scale (with ``data_path``; see the module docstring): the pool's median
    ``step_scale``, else the fleet's (``fleet_scale``: a pool of Triton servers only is put on
    the scale of the fleet's vLLM servers, so a route can weigh the two). An endpoint that is
    timed by the data path, because its engine exports no decode step (``decode_step`` false)
    or it never gave one beside a data-path reading, stays the data path's in a cycle with no
    reading: it keeps its place in the data path's group, whose line its kept readings are
    on."""
    engine_step = inputs.signal(Signal.DECODE_STEP_S)
    path_step = inputs.signal(Signal.DATAPATH_STEP_S)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        ratio = engine_step / path_step
        reading = np.log(np.where((ratio > 0.0) & (ratio < _SCALE_CEILING), ratio, np.nan))
        last = np.log(inputs.last("step_scale"))
    # Smoothed in log, each reading counted at most _SCALE_MOVE from the kept scale: the ratio
    # is a constant of the output format, and one window's stalled step is not a new one.
    bounded = np.clip(reading, last - _SCALE_MOVE, last + _SCALE_MOVE)
    log_scale = np.where(
        reading == reading, np.where(last == last, ewma(last, bounded, alpha=alpha), reading), last
    )
    scale = np.exp(log_scale)
    known = scale[scale == scale]
    if known.size:
        scaled, pool_scale = True, _median_in_log(known)
    elif fleet_scale is not None:
        scaled, pool_scale = True, fleet_scale
    else:
        scaled, pool_scale = False, 1.0
    # Engine-timed: its engine exports a decode step and it has been read in both (a server
    # whose metrics never answer is the data path's, whatever its engine).
    engine_timed = decode_step & (scale == scale)
    by_path = (engine_step != engine_step) & ((path_step == path_step) | ~engine_timed)
    if not data_path:
        by_path = np.zeros_like(by_path)
    # The batch the window's steps ran with: its mean over the window where the source has it.
    running = inputs.signal(Signal.RUNNING_MEAN)
    running = np.where(running == running, running, inputs.signal(Signal.RUNNING))
    with np.errstate(over="ignore"):  # garbage counts overflow: read as no reading below
        engine_work = running * inputs.signal(Signal.PREFILL_RATIO)
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
class _Measure:
    """What the pool's capacities are read from this cycle, per endpoint."""

    name: str
    """``BY_STEP``, ``BY_EXECUTION`` or ``BY_DATA_PATH``."""
    timing: Column
    work: Column
    assumed: Mask
    """Endpoints with no comparable timing (``Capacity.assumed``)."""


def _measure(inputs: Inputs, timed: _Timing, *, decode_step: Mask, data_path: bool) -> _Measure:
    """With the data path every endpoint is timed alike, and one with no reading yet is new or
    idle, as anywhere; without it a pool with any engine step is measured in decode steps (an
    endpoint with none assumed typical), and a pool with none compares compute per execution:
    a whole request, with no prefill work to take out."""
    nobody = np.zeros(len(inputs.addresses), dtype=np.bool_)
    if data_path:
        name = BY_STEP if decode_step.any() else BY_DATA_PATH
        return _Measure(name=name, timing=timed.step, work=timed.work, assumed=nobody)
    if decode_step.any():
        assumed = ~decode_step & (timed.step != timed.step)
        return _Measure(name=BY_STEP, timing=timed.step, work=timed.work, assumed=assumed)
    return _Measure(
        name=BY_EXECUTION,
        timing=np.where(timed.step == timed.step, timed.step, inputs.signal(Signal.EXEC_COMPUTE_S)),
        work=np.where(timed.step == timed.step, timed.work, 0.0),
        assumed=nobody,
    )


def assess_capacity(
    inputs: Inputs,
    policy: WeightPolicy,
    *,
    decode_step: Mask,
    data_path: bool = False,
    fleet_scale: float | None = None,
) -> Capacity:
    """Read this cycle's step readings into each endpoint's capacity. ``decode_step``: the
    endpoints whose engine exports a decode step (vLLM, SGLang); with any, or with the data
    path on (``data_path``), the pool is measured in decode steps, else in compute per
    execution. ``fleet_scale``: the fleet's median ``step_scale`` (``fleet_step_scale``)."""
    exported = inputs.signal(Signal.BATCH_SLOTS)
    # An exported 0 is no better than none.
    slots = np.where((exported == exported) & (exported != 0.0), exported, inputs.fallback_slots)
    timed = _timing(
        inputs,
        decode_step=decode_step,
        data_path=data_path,
        fleet_scale=fleet_scale,
        alpha=policy.capacity_alpha,
    )
    measure = _measure(inputs, timed, decode_step=decode_step, data_path=data_path)
    timing, work, assumed = measure.timing, measure.work, measure.assumed
    with np.errstate(invalid="ignore"):
        # Garbage (absurd counts or steps) would overflow the fit's squares: no reading.
        readable = (timing > 0.0) & (timing < _STEP_CEILING_S) & ~(work >= _WORK_CEILING)
    speed = read_speed(
        # A step under MIN_STEP_S is a broken metric, as in ``capacity_estimate``.
        step=np.where(readable & ~assumed, np.maximum(timing, MIN_STEP_S), np.nan),
        work=np.where(work == work, np.maximum(work, 0.0), 0.0),
        group=timed.by_data_path,
        # An assumed endpoint's state, if any, was in another measure: dropped.
        last=_last_speed(inputs, drop=assumed),
        alpha=policy.capacity_alpha,
        recent_alpha=max(policy.capacity_recent_alpha, policy.capacity_alpha),
        drop=policy.capacity_drop,
    )
    kept = _kept_estimate(slots, speed=speed, group=timed.by_data_path)
    best = _best(kept)
    return Capacity(
        slots=slots,
        estimate=np.where(readable & ~assumed, kept, np.nan),
        kept_estimate=kept,
        speed=speed,
        best=best,
        typical=float(np.median(kept[kept == kept] / best)) if best > 0.0 else 1.0,
        measure=measure.name,
        assumed=assumed,
        by_data_path=timed.by_data_path,
        scaled=timed.scaled,
        step_scale=timed.step_scale,
    )


def _kept_estimate(slots: Column, *, speed: Speed, group: Mask) -> Column:
    """Each endpoint's capacity from its slowness pooled with its group's, whether or not it
    was read this cycle; NaN where it never was, or where slots or step are absurd."""
    slowness = pooled(speed, group=group)
    with np.errstate(invalid="ignore", over="ignore"):
        kept = capacity_estimate(
            batch_slots=slots, decode_step_s=speed.reference_step * np.exp(slowness)
        )
    known = (kept > 0.0) & (kept < CAPACITY_CEILING)
    estimate: Column = np.where(known, kept, np.nan)
    return estimate


def _best(kept: Column) -> float:
    """The pool's best estimate, counting endpoints with no reading this cycle at their kept
    one: an idle fast server (no tokens, so no decode step) has not lost its speed, and
    without it the best would be a slow busy one, whose weight would jump to the top; 0 if
    none."""
    known = kept == kept
    return float(np.nanmax(kept)) if known.any() else 0.0


def _last_speed(inputs: Inputs, *, drop: Mask) -> Speed:
    """The speed state the previous cycle kept (none where ``drop``)."""

    def kept(name: str) -> Column:
        return np.where(drop, np.nan, inputs.last(name))

    slowness, recent, noise = (kept(name) for name in SPEED)
    nothing = np.full(len(inputs.addresses), np.nan)
    return Speed(
        slowness=slowness,
        recent=recent,
        noise=noise,
        fit=np.vstack([kept(name) for name in FIT]),
        reference_step=nothing,
        group_noise=nothing,
        slowed=np.zeros(len(inputs.addresses), dtype=np.bool_),
    )


def fleet_step_scale(
    *, states: Mapping[str, EndpointState], samples: Mapping[str, Sample]
) -> float | None:
    """The median step scale over the fleet (in log): each endpoint's smoothed ``step_scale`` from
    ``states`` (every pool's last, by address), else its sample's engine step over data-path
    step (the first cycle). It puts the data path's readings of a pool with no engine step of
    its own on the fleet's scale; ``None`` if no endpoint has both readings."""
    scales = []
    for address in states.keys() | samples.keys():
        state = states.get(address)
        if state is not None and state.step_scale is not None:
            scales.append(state.step_scale)
            continue
        sample = samples.get(address)
        if sample is None:
            continue
        engine_step = sample.values.get(Signal.DECODE_STEP_S)
        path_step = sample.values.get(Signal.DATAPATH_STEP_S)
        if engine_step and path_step and 0.0 < engine_step / path_step < _SCALE_CEILING:
            scales.append(engine_step / path_step)
    return _median_in_log(np.asarray(scales)) if scales else None


def _median_in_log(scales: Column) -> float:
    """The median of step scales taken in log: of two endpoints their geometric mean, which
    one of them cannot drag as far as their plain mean."""
    return float(np.exp(np.median(np.log(scales))))
