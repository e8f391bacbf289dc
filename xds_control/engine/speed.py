"""Each endpoint's speed, read against one line its group of the pool shares.

A step reading (the mean time between output tokens, or time per response byte) counts every
prefill that stalled a step: a server's reading is ``decode step + prefill time per unit of work
x work``, with the work per step ``x`` = requests in the batch x prefill tokens per output token
over the same window. Under prompt-heavy load most of a reading is stall, and it follows the
server's share of the traffic, which its weight sets: read as it comes, identical servers drift
apart.

The servers of one pool serve one model to one workload, so their step is one line in the work,
scaled by how fast each server's hardware is. The engine fits that line once for the group
(``_pool_line``, least squares in relative error over every endpoint's running moments of its
readings, each divided by the endpoint's own scale) and reads each endpoint's scale against it:
``log(reading / line(work))``, its *slowness* (0: the group's median server; ``log 4``: four
times as slow). One reading's slowness is a ratio of two things measured on the same traffic, so
the load it carries cancels; measured on four identical simulated A100s under the benchmark's chat
load, a reading's slowness varied by a standard deviation of 0.10-0.16 where the raw step varied
by 0.9-1.3 (both in natural log).

Per endpoint the slowness is averaged slowly (``capacity_alpha``) and quickly
(``capacity_recent_alpha``); when the quick one passes the slow one by more than
``capacity_drop`` and three standard deviations of the group's measured noise, the slow one
jumps to it: a server that slowed down loses its capacity within a rate window, and it wins it
back at the slow pace. The noise is each endpoint's mean square distance of a reading from its
slow average (one cycle counted as at most three of the group's standard deviations), and the
group's is the median: a trend on one server does not widen the band it has to pass.

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
from xds_control.engine.pooling import NOISE_CLIP, average, kernel_mean

__all__ = ["FIT", "SPEED", "Speed", "pooled", "read_speed"]

FIT = ("fit_w", "fit_wx", "fit_wxx", "fit_wy", "fit_wxy")
"""The ``WeightDecision`` fields that carry an endpoint's running moments of its readings
(weight, weight x work, weight x work squared, weight x step, weight x work x step; the
weight 1/step squared makes the fit's error relative), in ``Speed.fit`` row order."""
SPEED = ("slowness", "slowness_recent", "slowness_noise")
"""The ``WeightDecision`` fields that carry the slow and quick slowness and its noise."""

_BAND = 3.0
"""Standard deviations of the group's noise a quick rise in slowness must pass to be followed."""


@dataclass(frozen=True, slots=True)
class Line:
    """One group's step in the work: ``intercept + slope * work`` (seconds)."""

    intercept: float
    slope: float


@dataclass(frozen=True, slots=True)
class Speed:
    """This cycle's slowness of every endpoint (NaN: never read) and the state to keep."""

    slowness: Column
    """Slow average of each endpoint's slowness (natural log against its group's line)."""
    recent: Column
    """Quick average of the same."""
    noise: Column
    """Mean square distance of a reading's slowness from the slow average."""
    fit: Column
    """Shape (5, n): each endpoint's running moments (``FIT``)."""
    reference_step: Column
    """Each endpoint's group's line at no work (seconds): the decode step of the group's
    median server, which the slowness scales."""
    group_noise: Column
    """Each endpoint's group's noise (the median of its members')."""


def _pool_line(moments: Column) -> Line | None:
    """The weighted least-squares line of the summed moments of a group (columns of
    ``FIT`` rows), or ``None`` with none. No slope where the work did not vary enough to tell
    one from noise, or where it would be negative or leave no decode step."""
    w, wx, wxx, wy, wxy = np.nansum(moments, axis=1)
    if not w > 0.0:
        return None
    mean_x, mean_y = wx / w, wy / w
    spread = wxx / w - mean_x * mean_x
    if spread > 0.01 * mean_x * mean_x and spread > 0.0:
        slope = (wxy / w - mean_x * mean_y) / spread
        intercept = mean_y - slope * mean_x
        if slope >= 0.0 and intercept > 0.0:
            return Line(intercept=float(intercept), slope=float(slope))
    return Line(intercept=float(mean_y), slope=0.0) if mean_y > 0.0 else None


def _moments(*, step: Column, work: Column) -> Column:
    """One cycle's point of each endpoint as ``FIT`` moments."""
    w = 1.0 / (step * step)
    return np.vstack((w, w * work, w * work * work, w * step, w * work * step))


def _recentred(
    *, members: Mask, slowness: Column, recent: Column, fit: Column, line: Line
) -> tuple[Column, Column, Column, Line]:
    """The group's slownesses re-centred on its median server, and its line and moments
    scaled to match: every step they describe is the same as before, so the line and the
    slownesses cannot drift apart together."""
    had = members & (slowness == slowness)
    if not had.any():
        return slowness, recent, fit, line
    median = float(np.median(slowness[had]))
    scale = np.exp(median)
    rescale = np.array([1.0 / scale**2] * 3 + [1.0 / scale] * 2)[:, None]
    return (
        np.where(members, slowness - median, slowness),
        np.where(members, recent - median, recent),
        np.where(members, fit * rescale, fit),
        Line(intercept=line.intercept * scale, slope=line.slope * scale),
    )


def _followed(
    *, slow: Column, quick: Column, last_quick: Column, last: Column, band: float
) -> Column:
    """The slow average, jumped to the quick one where the quick one is slower by more than
    ``band``: a changed server, followed at once. A jump leaves the two averages equal; while
    they are and the readings stay slower, the slow one keeps moving with the quick one, so a
    server slowed 4x reads so within a rate window, not one jump and then the slow pace."""
    jumped = quick - slow > band
    following = (last_quick == last) & (quick > slow)
    followed: Column = np.where(jumped | following, quick, slow)
    return followed


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
    for kind in (False, True):
        members = group == kind
        if not members.any():
            continue
        fresh = members & (step == step) & (step > 0.0)
        known = members & (fit[0] == fit[0])
        line = _pool_line(fit[:, known]) if known.any() else None
        if line is None:
            # The group's first readings: their own line.
            line = _pool_line(_moments(step=step[fresh], work=work[fresh]))
            if line is None:
                continue
        else:
            slowness, recent, fit, line = _recentred(
                members=members, slowness=slowness, recent=recent, fit=fit, line=line
            )
        with np.errstate(invalid="ignore", divide="ignore"):
            reading = np.log(step / (line.intercept + line.slope * work))
        before = slowness.copy()
        averaged = average(
            np.where(fresh, reading, np.nan),
            mean=slowness,
            noise=noise,
            members=members,
            alpha=alpha,
        )
        band2, distance, noise = averaged.pool_noise, averaged.distance, averaged.noise
        had = fresh & (before == before)
        new = fresh & ~had
        last_recent = np.where(recent == recent, recent, before)
        quick = last_recent + recent_alpha * (reading - last_recent)
        band = max(-np.log(1.0 - drop), _BAND * np.sqrt(band2))
        slow = _followed(
            slow=averaged.mean, quick=quick, last_quick=last_recent, last=before, band=band
        )
        slowness = np.where(had, slow, np.where(new, reading, slowness))
        recent = np.where(had, quick, np.where(new, reading, recent))
        # The line is fitted on every reading but the outliers of the cycle's change, each
        # divided by its server's scale.
        inlier = new | (np.abs(distance) <= NOISE_CLIP * np.sqrt(band2)) | (fit[0] != fit[0])
        update = fresh & inlier
        with np.errstate(invalid="ignore", over="ignore"):
            point = _moments(step=step / np.exp(slowness), work=work)
        has_fit = fit[0] == fit[0]
        fit = np.where(update, np.where(has_fit, fit + alpha * (point - fit), point), fit)
        reference = np.where(members, line.intercept, reference)
        group_noise = np.where(members, band2, group_noise)
    return Speed(
        slowness=slowness,
        recent=recent,
        noise=noise,
        fit=fit,
        reference_step=reference,
        group_noise=group_noise,
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
