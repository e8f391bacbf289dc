"""Each endpoint's speed, read against one line its group of the pool shares.

A step reading (the mean time between output tokens, or time per response byte) counts every
prefill that stalled a step: a server's reading is ``decode step + prefill time per unit of work
x work``, with the work per step ``x`` = requests in the batch x prefill tokens per output token
over the same window. Under prompt-heavy load most of a reading is stall, and it follows the
server's share of the traffic, which its weight sets: read as it comes, identical servers drift
apart.

The servers of one pool serve one model to one workload, so their step is one line in the work,
scaled by how fast each server's hardware is: endpoint ``i`` reads ``A_i (1 + r x)``, with its
own scale ``A_i`` (its decode step) and the group's one *shape* ``r`` (prefill time per unit of
work over a decode step). The engine estimates both from each endpoint's decayed sums of its
readings (``FIT``: least squares in relative error, each cycle's point weighted by 1/step
squared, older cycles fading by ``1 - capacity_alpha``). Because every endpoint has a scale of
its own, the shape is learnt only from how each server's step moves with its own work, never
from how servers differ: a slower server's larger batch (its requests pile up) is not taken for
work. Fitted on the servers' pooled points instead, a line explained a slowed server's slower
step as the work its pile-up brought, and a fleet that mixes speeds took minutes to read true
from a cold start. The shape is the one of a log-spaced grid that fits the group best (at each,
every endpoint's best scale has a closed form in its sums); the scales follow.

An endpoint's *slowness* is ``log(A_i / A)`` with ``A`` the group's median scale (0: the median
server; ``log 4``: four times as slow). Each cycle's reading of it is ``log(step / (A (1 + r
x)))``, a ratio of two things measured on the same traffic, so the load it carries cancels;
measured on four identical simulated A100s under the benchmark's chat load, a reading's
slowness varied by a standard deviation of 0.10-0.16 where the raw step varied by 0.9-1.3 (both
in natural log). Readings are also averaged quickly (``capacity_recent_alpha``); when the quick
one passes the slowness by more than ``capacity_drop`` and three standard deviations of the
group's measured noise, the endpoint's sums are rescaled to it (its past readings are put on the
new level: the server changed, the shape did not), so a server that slowed down loses its
capacity within a rate window and wins it back at the slow pace. The noise is each endpoint's
mean square distance of a reading from its slowness (one cycle counted as at most three of the
group's standard deviations), and the group's is the median: a trend on one server does not
widen the band it has to pass.

A capacity reads the line at the group's mean work (``reference_step``), not at none. The
shape and the scales trade off against each other: a steeper line with lower scales fits the
points nearly as well, so the line's value at no work, an extrapolation, moved with every
change of the fitted shape. Traced on a route over a vLLM and a Triton pool, the two Triton
A100s' step at no work went from 25 to 13 ms and back within 30 s of steady load as the shape
went from 0.3 to 1.1 and back, and their capacity doubled and halved with it. Where the points
are, the line is known: there it rose from 26 to 45 ms in the same kind of run as the pool's
load grew, and did not swing. It is also what the pool's servers do with the work this
workload brings, which the decode step alone is not: an A100 prefills 2.2x slower than an H100
and decodes 1.8x slower, so under prompt-heavy traffic its share is nearer a half than the
0.62 its decode step gives. Inside one group the inflation is common to every server and
relative capacities are as they were; it counts between groups (servers timed by the engine
and by the data path in one pool) and between the pools of a route, where a pool that carries
more work reads less capacity.

Last, slownesses closer than the readings' own noise are pooled (``pooled``): each endpoint
takes a kernel-weighted mean of its group's, with a Gaussian kernel as wide as the group's
measured noise. A difference smaller than one reading's noise is no evidence that two servers
differ, and averaged apart it would give identical servers different weights; a real
difference (an H100 against an A100, ``log 1.9``, or a server slowed 4x) is many noise widths
wide and is left as it is.

Pure: columns in, columns out.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from xds_control.engine.columns import Column, Mask
from xds_control.engine.pooling import average, kernel_mean

__all__ = ["FIT", "SPEED", "Speed", "pooled", "read_speed"]

FIT = ("fit_w", "fit_wx", "fit_wxx", "fit_wy", "fit_wxy")
"""The ``EndpointState`` fields that carry an endpoint's decayed sums of its readings
(weight, weight x work, weight x work squared, weight x step, weight x work x step; the
weight 1/step squared makes the fit's error relative), in ``Speed.fit`` row order."""
SPEED = ("slowness", "slowness_recent", "slowness_noise")
"""The ``EndpointState`` fields that carry the slow and quick slowness and its noise."""

_BAND = 3.0
"""Standard deviations of the group's noise a quick rise in slowness must pass to be followed."""

_SHAPES = np.concatenate(([0.0], np.logspace(-4.0, 1.0, 121)))
"""The shapes tried, as prefill time at the group's mean work over a decode step: from none
to ten decode steps, 10% apart."""


@dataclass(frozen=True, slots=True)
class Speed:
    """This cycle's slowness of every endpoint (NaN: never read) and the state to keep."""

    slowness: Column
    """Each endpoint's scale against its group's median, in natural log."""
    recent: Column
    """Quick average of its readings' slowness."""
    noise: Column
    """Mean square distance of a reading's slowness from the slowness."""
    fit: Column
    """Shape (5, n): each endpoint's decayed sums (``FIT``)."""
    reference_step: Column
    """Each endpoint's group's step (seconds) at the group's mean work, on its median server
    (the group's median scale times ``_inflation``), which the slowness scales."""
    group_noise: Column
    """Each endpoint's group's noise (the median of its members')."""
    slowed: Mask
    """Endpoints whose quick reading passed their slowness by the band this cycle: a server
    that slowed down, beyond what the noise explains."""


def _points(*, step: Column, work: Column) -> Column:
    """One cycle's reading of each endpoint as ``FIT`` terms."""
    w = 1.0 / (step * step)
    return np.vstack((w, w * work, w * work * work, w * step, w * work * step))


def _scales(sums: Column, *, shape: Column | float) -> Column:
    """Each column's best scale ``A`` for ``shape`` (rows: shapes, where ``shape`` is a
    column of them): the weighted least-squares fit of its readings by ``A (1 + shape x)``."""
    w, wx, wxx, wy, wxy = sums
    r = np.asarray(shape)[..., None] if np.ndim(shape) else shape
    # Sums of garbage readings (absurd steps or work) overflow: a scale no fit picks.
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        scales: Column = (wy + r * wxy) / (w + 2.0 * r * wx + r * r * wxx)
    return scales


def _shape(sums: Column) -> float:
    """The group's shape: the grid's best fit of every column's readings by its own scale
    times ``1 + r x`` (0 where the work never varied or is unknown). The fit's error at a
    shape is what every column's best scale leaves, ``sum (1 - A (1 + r x) / step)^2``,
    which is least where ``sum (wy + r wxy)^2 / (w + 2 r wx + r^2 wxx)`` is greatest."""
    w, wx, _, wy, wxy = sums
    mean_work = float(np.sum(wx) / np.sum(w))
    if not mean_work > 0.0:
        return 0.0
    shapes = _SHAPES / mean_work
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        explained = np.nansum((wy + shapes[:, None] * wxy) * _scales(sums, shape=shapes), axis=1)
    return float(shapes[int(np.argmax(explained))])


def _inflation(sums: Column, *, shape: float) -> float:
    """``1 + shape x`` at the group's mean work (its readings' centroid, each weighted as in
    the fit): how much longer than its decode step a step of the group takes at the work its
    servers carry (1 where that is unknown)."""
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        work = float(np.sum(sums[1]) / np.sum(sums[0]))
    return 1.0 + shape * work if np.isfinite(work) and work > 0.0 else 1.0


def read_speed(
    *,
    step: Column,
    work: Column,
    group: Mask,
    last: Speed,
    alpha: float,
    recent_alpha: float,
    drop: float,
) -> Speed:
    """Carry every endpoint's slowness one cycle on. ``step``: this cycle's reading (NaN:
    none); ``work``: the prefill work in it (0 where unknown); ``group``: which of the two
    groups of the pool each endpoint is read in (its step's kind: the engine's or the data
    path's), each with a line of its own; ``last``: the state the previous cycle kept (its
    ``reference_step`` and ``group_noise`` are not read)."""
    n = step.shape[0]
    slowness, recent, noise, fit = (
        last.slowness.copy(),
        last.recent.copy(),
        last.noise.copy(),
        last.fit.copy(),
    )
    reference = np.full(n, np.nan)
    group_noise = np.full(n, np.nan)
    jumped = np.zeros(n, dtype=np.bool_)
    for kind in (False, True):
        members = group == kind
        fresh = members & (step == step) & (step > 0.0)
        known = members & (fit[0] == fit[0]) & (fit[0] > 0.0)
        if known.any():
            shape = _shape(fit[:, known])
            median = float(np.median(_scales(fit[:, known], shape=shape)))
        elif fresh.any():
            # The group's first readings: no shape yet.
            shape, median = 0.0, float(np.median(step[fresh]))
        else:
            continue
        with np.errstate(invalid="ignore", divide="ignore"):
            reading = np.log(step / (median * (1.0 + shape * work)))
        before = np.where(known, slowness, np.nan)
        averaged = average(
            np.where(fresh, reading, np.nan),
            mean=before,
            noise=noise,
            members=members,
            alpha=alpha,
        )
        band2, noise = averaged.pool_noise, averaged.noise
        had = fresh & (before == before)
        last_recent = np.where(recent == recent, recent, before)
        quick = last_recent + recent_alpha * (reading - last_recent)
        band = max(-np.log(1.0 - drop), _BAND * np.sqrt(band2))
        # A slower server is followed at once: quick passed the band, or the two were equal
        # after such a jump and the readings stay slower. Its past readings are put on the
        # level it now reads at, so its scale is the quick one's.
        passed = had & (quick - before > band)
        followed = passed | (had & (last_recent == before) & (quick > before))
        jumped |= passed
        shift = np.exp(np.where(followed, quick - before, 0.0))
        fit = fit / np.vstack((shift**2, shift**2, shift**2, shift, shift))
        with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
            point = _points(step=np.where(fresh, step, 1.0), work=work)
        fit = np.where(fresh, np.where(known, (1.0 - alpha) * fit + point, point), fit)
        rows = np.flatnonzero(members & (fit[0] == fit[0]) & (fit[0] > 0.0))
        shape = _shape(fit[:, rows])
        scales = _scales(fit[:, rows], shape=shape)
        median = float(np.median(scales))
        slowness[rows] = np.log(scales / median)
        recent = np.where(followed, slowness, np.where(had, quick, recent))
        recent = np.where(members & (recent != recent), slowness, recent)
        reference = np.where(members, median * _inflation(fit[:, rows], shape=shape), reference)
        group_noise = np.where(members, band2, group_noise)
    return Speed(
        slowness=slowness,
        recent=recent,
        noise=noise,
        fit=fit,
        reference_step=reference,
        group_noise=group_noise,
        slowed=jumped,
    )


def pooled(speed: Speed, *, group: Mask) -> Column:
    """Each endpoint's slowness pooled with its group's: the mean of the group's slownesses
    weighted by a Gaussian kernel of their distance from its own, as wide (in standard
    deviation) as twice the group's measured noise variance; NaN where it has none."""
    out = np.full(speed.slowness.shape[0], np.nan)
    for kind in (False, True):
        rows = np.flatnonzero((group == kind) & (speed.slowness == speed.slowness))
        if rows.size == 0:
            continue
        values = speed.slowness[rows]
        width2 = 2.0 * float(speed.group_noise[rows[0]])
        out[rows] = kernel_mean(values, width2=width2)
    return out
