"""Columns: one value per endpoint of a pool, so the engine's arithmetic runs once per column.

At 10,000 endpoints, running the same arithmetic row by row in the interpreter was most of a
reconcile; with NumPy it runs once per column, and Python is left with the rows that need a
decision of their own (warm-up, stale, unhealthy) and with building the decisions.
"""

from __future__ import annotations

from itertools import repeat

import numpy as np
import numpy.typing as npt

__all__ = ["Column", "Mask", "optional", "or_none", "power", "rows"]

Column = npt.NDArray[np.float64]
"""One float per endpoint, in the order of ``compute_weights``'s ``endpoints``; NaN: missing."""
Mask = npt.NDArray[np.bool_]
"""One flag per endpoint, in the same order."""


def power(base: Column, exponent: float) -> Column:
    """``base ** exponent`` with Python's float ``pow``, element by element.

    Not ``np.power``: NumPy's SIMD ``power`` may round the last bit differently, and on a
    quantum boundary that bit becomes a different weight.
    """
    return np.array(list(map(pow, base.tolist(), repeat(exponent))), dtype=np.float64)


def optional(column: Column) -> list[float | None]:
    """The column as Python floats, NaN as ``None``."""
    return [None if value != value else value for value in column.tolist()]


def rows(mask: Mask) -> list[int]:
    """The row numbers where ``mask`` is set, for the per-endpoint cases."""
    rows: list[int] = np.flatnonzero(mask).tolist()
    return rows


def or_none(value: float) -> float | None:
    """One value of a column as a Python float, NaN as ``None``."""
    return None if value != value else float(value)
