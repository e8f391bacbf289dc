"""Keep weights steady: smoothing, step limit, quantisation and hysteresis, over columns.

Every published weight change rebuilds Envoy's MAGLEV table and remaps some keys (cold KV
caches), so a weight moves only when the move is worth it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar

import numpy as np
import numpy.typing as npt

from xds_control.config import WeightPolicy
from xds_control.engine.averages import kernel_mean
from xds_control.engine.columns import Column, Mask

__all__ = ["Published", "ewma", "noise_alpha", "publish", "quantise"]

Value = TypeVar("Value", float, Column)


def ewma(previous: Value, target: Value, *, alpha: float) -> Value:
    """Exponentially weighted moving average: ``previous`` moved ``alpha`` of the way."""
    return previous + alpha * (target - previous)


def quantise(value: Column, *, quantum: int) -> Column:
    """Nearest multiple of ``quantum`` within 1..100; never 0 (Envoy rejects weight 0).

    Half a quantum rounds up (``value`` is never negative)."""
    quantised: Column = np.clip(np.trunc(value / quantum + 0.5) * quantum, 1, 100)
    return quantised


_NOISE_BAND = 3.0
"""Standard deviations of measured noise a move must exceed: noise alone passes about one
cycle in 400, and then by little."""

_NOISE_CAP = 20.0
"""The most a measured noise band holds back (a fifth of the weight scale): a trend (a server
slowing down over a few windows) widens the noise it is measured against as it goes, and must
still get through."""

_NOISE_CLIP = 3.0
"""One cycle's deviation counts as at most this many standard deviations in the noise it
measures: a real change is published before it can widen the band it has to pass."""


@dataclass(frozen=True, slots=True)
class _Peers:
    """The pool's slow averages and noises pooled within the noise, and which rows are peers."""

    mean: Column
    spread: Column
    group: npt.NDArray[np.int64]
    """Rows whose pooled averages lie within one kernel width of the next share a number;
    -1: a row not pooled."""


def _peers(mean: Column, *, spread: Column, measured: Mask) -> _Peers:
    """``mean`` and ``spread``, where ``measured``, pooled with the other measured rows'
    within the weights' noise: a Gaussian kernel of the means' distance as wide as the median
    measured noise, twice (``averages.py``)."""
    group = np.full(mean.shape[0], -1, dtype=np.int64)
    rows = np.flatnonzero(measured & (mean == mean) & (spread > 0.0))
    if rows.size < 2:
        return _Peers(mean=mean, spread=spread, group=group)
    width2 = 2.0 * float(np.median(spread[rows]))
    pooled_mean, pooled_spread = mean.copy(), spread.copy()
    pooled_mean[rows] = kernel_mean(mean[rows], width2=width2)
    pooled_spread[rows] = kernel_mean(mean[rows], width2=width2, of=spread[rows])
    order = rows[np.argsort(pooled_mean[rows], kind="stable")]
    gaps = np.diff(pooled_mean[order]) > np.sqrt(width2)
    group[order] = np.concatenate(([0], np.cumsum(gaps)))
    return _Peers(mean=pooled_mean, spread=pooled_spread, group=group)


def _group_level(peers: _Peers) -> Column:
    """One level per group: the mean of its rows' pooled averages (each row's kernel mean
    differs a little from its peers', and quantised apart at a boundary they would split);
    a row not pooled keeps its own."""
    level = peers.mean.copy()
    for number in np.unique(peers.group[peers.group >= 0]):
        rows = peers.group == number
        level[rows] = float(np.mean(peers.mean[rows]))
    return level


def _split(weight: Column, *, group: npt.NDArray[np.int64], moved: Mask) -> Mask:
    """Rows of a group whose weights differ, in a group none of whose rows moved this cycle:
    peers left on two levels (one crossed its band alone, or quantised apart) settle on one,
    while a real change on one of them is published as it is (its average starts afresh at the
    new level, which takes it out of the group)."""
    split = np.zeros(weight.shape[0], dtype=np.bool_)
    for number in np.unique(group[group >= 0]):
        rows = group == number
        if not moved[rows].any() and np.ptp(weight[rows]) > 0.0:
            split |= rows
    return split


def _together(settled: Mask, *, group: npt.NDArray[np.int64]) -> Mask:
    """``settled``, and every row of a group in which some row settled: peers pooled to
    nearly one average cross a threshold on nearly the same cycle, and one push for all of
    them is better than one each (a row whose average is its weight does not move)."""
    grouped = group >= 0
    if not (settled & grouped).any():
        return settled
    moving = np.unique(group[settled & grouped])
    return settled | (grouped & np.isin(group, moving))


def noise_alpha(*, elapsed_s: Column, settle_s: float) -> Column:
    """Per endpoint, how far this cycle moves the slow mean and the measured noise: the
    weight of ``elapsed_s`` (since the last cycle) in an average over ``settle_s``."""
    alpha: Column = 1.0 - np.exp(-np.clip(elapsed_s, 0.0, settle_s) / settle_s)
    return np.where(alpha == alpha, alpha, 1.0)


@dataclass(frozen=True, slots=True)
class Published:
    """The outcome of one cycle: the weights to publish and the candidate state to carry."""

    weight: Column
    candidate: Column
    candidate_since: Column
    suppressed: Mask
    """Where the candidate differs from the published weight, and the dead band kept it."""
    mean: Column
    """Slow average of the smoothed weight (over ``settle_s``)."""
    spread: Column
    """Mean square of the smoothed weight's distance from ``mean``: its noise, squared."""
    band: Column
    """How far the smoothed weight had to move from the published one to be published."""


@dataclass(frozen=True, slots=True)
class _Noise:
    """Each weight's slow average and measured noise after this cycle, and the noise before."""

    mean: Column
    spread: Column
    before: Column
    """The noise (a variance) measured up to the last cycle; 0 where none was."""


def _measure_noise(
    smoothed: Column,
    *,
    mean_before: Column,
    spread_before: Column,
    measured: Mask,
    alpha: Column,
    quantum: int,
) -> _Noise:
    """Each weight's noise where ``measured``: the mean square distance of its smoothed value
    from a slow average of it (one outlying cycle counted as at most ``_NOISE_CLIP`` standard
    deviations). A row not measured (stale, decaying or ramping up) moves by rule, not by
    noise: its average follows its smoothed value exactly."""
    first = mean_before != mean_before
    deviation = np.where(first, 0.0, smoothed - mean_before)
    before = np.where(spread_before == spread_before, spread_before, 0.0)
    limit = _NOISE_CLIP**2 * np.maximum(before, (quantum / 2.0) ** 2)
    # Averages over time, so each row's ``alpha`` depends on its time since the last cycle.
    spread = before + alpha * (np.minimum(deviation * deviation, limit) - before)
    mean = np.where(first | ~measured, smoothed, mean_before + alpha * (smoothed - mean_before))
    return _Noise(mean=mean, spread=spread, before=before)


def _step_limited(value: Column, *, published: Column, policy: WeightPolicy) -> Column:
    """``value`` quantised, at most ``max_step`` from ``published`` and at least 1."""
    low, high = np.maximum(published - policy.max_step, 1.0), published + policy.max_step
    limited: Column = np.maximum(low, np.minimum(quantise(value, quantum=policy.quantum), high))
    return limited


def _dead_band(published: Column, *, noise: Column, policy: WeightPolicy) -> Column:
    """How far a smoothed weight must move from ``published`` to be published at once: the
    largest of ``hysteresis x weight``, one quantum and ``_NOISE_BAND`` standard deviations of
    its measured ``noise`` (at most ``_NOISE_CAP``). A real change (a spike, a fault) is far
    outside it; the noise of a steady server stays inside."""
    band: Column = np.maximum(
        np.maximum(policy.hysteresis * published, policy.quantum),
        np.minimum(_NOISE_BAND * noise, _NOISE_CAP),
    )
    return band


def _settled(
    published: Column, *, peers: _Peers, measured: Mask, alpha: Column, quantum: int
) -> Mask:
    """Where a move the band holds back is published all the same: the slow average, pooled
    with its peers', has moved by at least three quarters of a quantum and by ``_NOISE_BAND``
    standard errors of that average (the noise over the square root of the cycles it
    averages). What is published then is the average, not one noisy cycle, so the weight
    converges to a steady target; when one peer settles, its whole group does (``_together``)."""
    peers_noise = np.where(measured, np.sqrt(peers.spread), 0.0)
    standard_error = peers_noise * np.sqrt(alpha / (2.0 - alpha))
    return _together(
        np.abs(peers.mean - published) >= np.maximum(0.75 * quantum, _NOISE_BAND * standard_error),
        group=peers.group,
    )


def publish(
    *,
    smoothed: Column,
    published: Column,
    candidate_before: Column,
    candidate_since: Column,
    mean_before: Column,
    spread_before: Column,
    measured: Mask,
    alpha: Column,
    now: float,
    policy: WeightPolicy,
) -> Published:
    """Turn smoothed weights into the weights to publish.

    Each weight's noise is measured where ``measured`` (fresh signals, no ramp;
    ``_measure_noise``). The candidate is ``smoothed`` quantised and limited to ``max_step``
    from ``published``; it replaces ``published`` when it leaves the dead band
    (``_dead_band``), or when the slow average has settled elsewhere (``_settled``). The
    averages are pooled with the pool's that lie within the weights' noise first (``_peers``):
    identical servers settle on one level (``_group_level``), in one push, and a group left on
    two levels with no row moving is put back on one (``_split``). A published move starts the
    average afresh; a row never published before (``published`` NaN) publishes its candidate
    at once.
    """
    quantum = policy.quantum
    noise = _measure_noise(
        smoothed,
        mean_before=mean_before,
        spread_before=spread_before,
        measured=measured,
        alpha=alpha,
        quantum=quantum,
    )
    published = np.where(published == published, published, quantise(smoothed, quantum=quantum))
    candidate = _step_limited(smoothed, published=published, policy=policy)
    peers = _peers(noise.mean, spread=noise.before, measured=measured)
    average = _step_limited(_group_level(peers), published=published, policy=policy)
    band = _dead_band(
        published, noise=np.where(measured, np.sqrt(noise.before), 0.0), policy=policy
    )
    moved = np.abs(smoothed - published) >= band
    settled = _settled(published, peers=peers, measured=measured, alpha=alpha, quantum=quantum)
    weight = np.where(
        (candidate == published) | moved, candidate, np.where(settled, average, published)
    )
    weight = np.where(_split(weight, group=peers.group, moved=moved), average, weight)
    return Published(
        weight=weight,
        candidate=candidate,
        candidate_since=np.where(candidate == candidate_before, candidate_since, now),
        suppressed=(weight == published) & (candidate != published),
        # A published move starts the average afresh at the new level: the change was real,
        # and the distance the old average lags behind it is not noise.
        mean=np.where(moved, smoothed, noise.mean),
        spread=np.where(measured & ~moved, noise.spread, noise.before),
        band=band,
    )
