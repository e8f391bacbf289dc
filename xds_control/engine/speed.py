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
work. The shape is the one of a log-spaced grid that fits the group best (at each, every
endpoint's best scale has a closed form in its sums); the scales follow.

An endpoint's *slowness* is ``log(A_i / A)`` with ``A`` the group's median scale (0: the median
server; ``log 4``: four times as slow). Each cycle's reading of it is ``log(step / (A (1 + r
x)))``, a ratio of two things measured on the same traffic, so the load it carries cancels.
Readings are also averaged quickly (``capacity_recent_alpha``); when the quick one passes the
slowness by more than ``capacity_drop`` and three standard deviations of the group's measured
noise, the endpoint's sums are rescaled to it (its past readings are put on the new level: the
server changed, the shape did not), so a server that slowed down loses its capacity within a
rate window and wins it back at the slow pace. The noise is each endpoint's mean square
distance of a reading from its slowness (one cycle counted as at most three of the group's
standard deviations), and the group's is the median: a trend on one server does not widen the
band it has to pass.

A capacity reads the line at the group's mean work (``reference_step``), not at none: the shape
and the scales trade off against each other (a steeper line with lower scales fits the points
nearly as well), so the line's value at no work is an extrapolation that moves with every
change of the fitted shape, while where the points are the line is known. It is also what the
pool's servers do with the work this workload brings, which the decode step alone is not.
Inside one group that inflation is common to every server and relative capacities are as they
were; it counts between groups (servers timed by the engine and by the data path in one pool)
and between the pools of a route, where a pool that carries more work reads less capacity.

Last, slownesses closer than the readings' own noise are pooled (``pooled``): each endpoint
takes a kernel-weighted mean of its group's, with a Gaussian kernel as wide as the group's
measured noise. A difference smaller than one reading's noise is no evidence that two servers
differ, and averaged apart it would give identical servers different weights; a real
difference (another GPU, a server slowed down) is many noise widths wide and is left as it is.

docs/weights.md ("Stability") tells what this was measured against and what it replaced.

Pure: columns in, columns out.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from xds_control.engine.averages import average, kernel_mean
from xds_control.engine.columns import Column, Mask

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
    path's), each with a line of its own (``_read_group``); ``last``: the state the previous
    cycle kept (its ``reference_step`` and ``group_noise`` are not read)."""
    n = step.shape[0]
    speed = Speed(
        slowness=last.slowness.copy(),
        recent=last.recent.copy(),
        noise=last.noise.copy(),
        fit=last.fit.copy(),
        reference_step=np.full(n, np.nan),
        group_noise=np.full(n, np.nan),
        slowed=np.zeros(n, dtype=np.bool_),
    )
    for kind in (False, True):
        speed = _read_group(
            speed,
            members=group == kind,
            step=step,
            work=work,
            alpha=alpha,
            recent_alpha=recent_alpha,
            drop=drop,
        )
    return speed


def _read_group(
    speed: Speed,
    *,
    members: Mask,
    step: Column,
    work: Column,
    alpha: float,
    recent_alpha: float,
    drop: float,
) -> Speed:
    """One group's cycle: each fresh reading's slowness against the group's line as it was,
    averaged with its noise; a server that slowed past the band followed at once (``_jump``);
    the readings added to the sums (``_add_readings``); the line and the scales refitted
    (``_refit``). Rows outside ``members`` come back as they were."""
    fit = speed.fit
    fresh = members & (step == step) & (step > 0.0)
    known = members & (fit[0] == fit[0]) & (fit[0] > 0.0)
    line = _line(fit, known=known, step=step, fresh=fresh)
    if line is None:
        return speed
    shape, median = line
    with np.errstate(invalid="ignore", divide="ignore"):
        reading = np.log(step / (median * (1.0 + shape * work)))
    before = np.where(known, speed.slowness, np.nan)
    averaged = average(
        np.where(fresh, reading, np.nan),
        mean=before,
        noise=speed.noise,
        members=members,
        alpha=alpha,
    )
    jump = _jump(
        reading,
        before=before,
        recent=speed.recent,
        fresh=fresh,
        noise=averaged.pool_noise,
        recent_alpha=recent_alpha,
        drop=drop,
    )
    fit = _add_readings(fit, jump=jump, fresh=fresh, known=known, step=step, work=work, alpha=alpha)
    return _refit(
        speed, fit=fit, members=members, jump=jump, noise=averaged.noise, band2=averaged.pool_noise
    )


def _line(fit: Column, *, known: Mask, step: Column, fresh: Mask) -> tuple[float, float] | None:
    """The group's line before this cycle's readings, as its shape and median scale: fitted
    from the kept sums, or at the group's first readings no shape and their median step;
    ``None`` when the group has neither."""
    if known.any():
        shape = _shape(fit[:, known])
        return shape, float(np.median(_scales(fit[:, known], shape=shape)))
    if fresh.any():
        return 0.0, float(np.median(step[fresh]))
    return None


@dataclass(frozen=True, slots=True)
class _Jump:
    """The quick average of each fresh reading's slowness, and where the slowness follows it."""

    quick: Column
    had: Mask
    """Fresh rows that had a slowness to compare with."""
    passed: Mask
    """Rows whose quick average passed their slowness by the band this cycle."""
    followed: Mask
    """Rows whose slowness is put on the quick average's level."""
    rise: Column
    """How far (in log) the followed rows' slowness rises; 0 elsewhere."""


def _jump(
    reading: Column,
    *,
    before: Column,
    recent: Column,
    fresh: Mask,
    noise: float,
    recent_alpha: float,
    drop: float,
) -> _Jump:
    """A slower server is followed at once: its quick average passed its slowness by the
    band (``capacity_drop``, and ``_BAND`` standard deviations of the group's ``noise``), or
    the two were equal after such a jump and the readings stay slower."""
    had = fresh & (before == before)
    last_recent = np.where(recent == recent, recent, before)
    quick = last_recent + recent_alpha * (reading - last_recent)
    band = max(-np.log(1.0 - drop), _BAND * np.sqrt(noise))
    passed = had & (quick - before > band)
    followed = passed | (had & (last_recent == before) & (quick > before))
    return _Jump(
        quick=quick,
        had=had,
        passed=passed,
        followed=followed,
        rise=np.where(followed, quick - before, 0.0),
    )


def _add_readings(
    fit: Column, *, jump: _Jump, fresh: Mask, known: Mask, step: Column, work: Column, alpha: float
) -> Column:
    """The sums with this cycle's readings added and the older ones decayed, after a followed
    row's past readings were put on the level it now reads at (the server changed, the shape
    did not), so its scale is the quick average's."""
    shift = np.exp(jump.rise)
    fit = fit / np.vstack((shift**2, shift**2, shift**2, shift, shift))
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        point = _points(step=np.where(fresh, step, 1.0), work=work)
    added: Column = np.where(fresh, np.where(known, (1.0 - alpha) * fit + point, point), fit)
    return added


def _refit(
    speed: Speed, *, fit: Column, members: Mask, jump: _Jump, noise: Column, band2: float
) -> Speed:
    """The group's line refitted from its members' sums, each member's slowness its scale
    over the median, and the state the next cycle reads."""
    rows = np.flatnonzero(members & (fit[0] == fit[0]) & (fit[0] > 0.0))
    shape = _shape(fit[:, rows])
    scales = _scales(fit[:, rows], shape=shape)
    median = float(np.median(scales))
    slowness = speed.slowness.copy()
    slowness[rows] = np.log(scales / median)
    recent = np.where(jump.followed, slowness, np.where(jump.had, jump.quick, speed.recent))
    recent = np.where(members & (recent != recent), slowness, recent)
    inflation = _inflation(fit[:, rows], shape=shape)
    return Speed(
        slowness=slowness,
        recent=recent,
        noise=noise,
        fit=fit,
        reference_step=np.where(members, median * inflation, speed.reference_step),
        group_noise=np.where(members, band2, speed.group_noise),
        slowed=speed.slowed | jump.passed,
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
