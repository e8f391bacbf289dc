"""Averages that know their noise, and pooling the ones that differ by less than it.

Two servers of a pool whose estimates differ by less than one reading's noise have given no
evidence that they differ; averaged apart, identical servers would still get different weights,
and every cycle's wander would be a push. The engine pools them where a per-window reading is
averaged into a property of the server: each endpoint's slowness (``speed.py``), its TTFT
compliance (``score.py``), and the slow average a published weight settles on
(``stability.py``).

``average`` keeps such an average with its noise: each endpoint's mean square distance of a
reading from its average, one cycle counted as at most three of the pool's standard
deviations (the pool's noise is the median of its members', so a trend on one server does not
widen the noise it is judged by). ``kernel_mean`` pools: each value is replaced by the mean of
the pool's values weighted by a Gaussian of their distance from it. Values within the kernel's
width become one; values many widths apart (an H100 against an A100, a server slowed down)
stay as they are. What is pooled is an output only: the state each endpoint carries stays its
own, so pooling never compounds from cycle to cycle.

Pure: columns in, columns out.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from xds_control.engine.columns import Column, Mask

__all__ = ["Averaged", "average", "kernel_mean"]

DEFAULT_NOISE = 0.01
"""The noise (a variance) assumed before a pool has measured its own: readings within 0.1."""
MIN_NOISE = 1e-4
"""The least noise a band or kernel is drawn from: 0.01 per reading."""
NOISE_CLIP = 3.0
"""One cycle's distance counts as at most this many of the pool's standard deviations."""


@dataclass(frozen=True, slots=True)
class Averaged:
    """Each endpoint's average and its noise after one cycle, and the pool's noise."""

    mean: Column
    """Kept where there was no reading; the reading itself where there was no average."""
    noise: Column
    """Mean square distance of a reading from the average before it."""
    pool_noise: float
    """The median of the pool's measured noise before this cycle (floored at ``MIN_NOISE``;
    ``DEFAULT_NOISE`` when none was measured)."""
    distance: Column
    """This cycle's reading less the average before it (NaN: no reading or no average)."""


def average(
    reading: Column, *, mean: Column, noise: Column, members: Mask, alpha: float
) -> Averaged:
    """One cycle of each ``members`` endpoint's exponential average of ``reading`` (NaN: no
    reading) at ``alpha``, and of its noise; other rows are returned as they came."""
    measured = noise[members & (noise == noise)]
    pool = max(float(np.median(measured)), MIN_NOISE) if measured.size else DEFAULT_NOISE
    fresh = members & (reading == reading)
    had = fresh & (mean == mean)
    distance = np.where(had, reading - mean, np.nan)
    clipped = np.minimum(distance * distance, NOISE_CLIP**2 * pool)
    last_noise = np.where(noise == noise, noise, pool)
    noise = np.where(had, last_noise + alpha * (clipped - last_noise), noise)
    noise = np.where(fresh & ~had, pool, noise)
    mean = np.where(had, mean + alpha * distance, np.where(fresh, reading, mean))
    return Averaged(mean=mean, noise=noise, pool_noise=pool, distance=distance)


_EXACT_UP_TO = 256
"""Groups up to this size are pooled pair by pair; larger ones on a fine grid."""


def kernel_mean(values: Column, *, width2: float, of: Column | None = None) -> Column:
    """Gaussian kernel regression on ``values`` (variance ``width2``) of ``of`` (default:
    ``values`` themselves): pair by pair for a small group, on a grid an eighth of the
    kernel's width wide for a large one (linear binning: the same means within a sixteenth of
    a width, at a cost linear in the group)."""
    averaged = values if of is None else of
    if values.size <= _EXACT_UP_TO:
        kernel = np.exp(-((values[:, None] - values[None, :]) ** 2) / (2.0 * width2))
        means: Column = kernel @ averaged / kernel.sum(axis=1)
        return means
    width = np.sqrt(width2)
    low, high = float(values.min()), float(values.max())
    cell = max(width / 8.0, (high - low) / 8192.0)
    position = (values - low) / cell
    left = np.floor(position).astype(np.int64)
    right_share = position - left
    cells = int(left.max()) + 2
    counts = np.bincount(left, weights=1.0 - right_share, minlength=cells) + np.bincount(
        left + 1, weights=right_share, minlength=cells
    )
    sums = np.bincount(left, weights=(1.0 - right_share) * averaged, minlength=cells) + np.bincount(
        left + 1, weights=right_share * averaged, minlength=cells
    )
    reach = int(np.ceil(4.0 * width / cell))
    offsets = np.arange(-reach, reach + 1) * cell
    kernel = np.exp(-(offsets * offsets) / (2.0 * width2))
    # ``full`` and a slice, not ``same``: a kernel longer than the grid would set the length.
    smooth_counts = np.convolve(counts, kernel)[reach : reach + cells]
    smooth_sums = np.convolve(sums, kernel)[reach : reach + cells]
    grid = smooth_sums / np.maximum(smooth_counts, 1e-300)
    at = np.clip(left, 0, cells - 2)
    means = grid[at] + right_share * (grid[at + 1] - grid[at])
    return means
