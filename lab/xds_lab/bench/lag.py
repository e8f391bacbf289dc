"""Flag a point whose processes fell behind real time (pure).

The simulated servers and the load generator each run one event loop; when the shared cores
are busy, a loop wakes late, simulated steps stretch and answers are timed late. Each process
measures its own lag (``loadgen.loop_lag``); a point where either's p99 passes the limit is a
measurement of the machine, not of the policy, and is left out of the results.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

__all__ = ["LAG_P99_LIMIT_S", "lag_flag"]

LAG_P99_LIMIT_S = 0.05
"""50 ms: a few of the simulator's engine steps (10-50 ms each); a loop this late has
stretched the steps it ran, and TTFTs of a few hundred ms are off by tens of percent."""


def lag_flag(lags: Mapping[str, Mapping[str, float]], *, limit_s: float = LAG_P99_LIMIT_S) -> str:
    """Why the point is not a result ("" if it is): each process whose p99 lag passed
    ``limit_s``, or that recorded no ticks at all (nothing says it kept up)."""
    reasons = []
    for process, lag in sorted(lags.items()):
        p99 = float(lag.get("p99_s", math.nan))
        if not lag.get("ticks"):
            reasons.append(f"{process}: no lag measured")
        elif not p99 <= limit_s:
            reasons.append(f"{process} p99 loop lag {p99 * 1000:.0f} ms > {limit_s * 1000:.0f} ms")
    return "; ".join(reasons)
