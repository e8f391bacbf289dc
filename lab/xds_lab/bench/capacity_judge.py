"""Judging the capacity ramp's steps, and checking the capacity afterwards (pure).

A step is judged on the second half of its arrivals only: a queue needs time to build, and a
rate the server cannot sustain still looks fine while its queue is short. The step holds when
at least ``KEEP_UP_SHARE`` of those arrivals met the SLO (TTFT and TPOT): goodput at ~95% of
the offered rate. TPOT counts because prefills of arriving prompts stall every running
sequence's next token: a rate can keep first tokens fast and still break TPOT (multi-turn
sessions with long histories did: the H100 "held" 3.7 req/s with half of it goodput). A kind
that misses the SLO even at low rates ramps down a few steps and then counts as zero.

Afterwards the scenario's 100% point confirms the figure: the best policy there must keep up
(``CONFIRM_SHARE``), or the report says the capacity is wrong.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from xds_lab.loadgen.client import Result
from xds_lab.loadgen.stats import Slo, meets_slo

__all__ = ["CONFIRM_SHARE", "KEEP_UP_SHARE", "capacity_verdict", "keep_up_share"]

KEEP_UP_SHARE = 0.95
CONFIRM_SHARE = 0.9
"""Below the ramp's 95%: the ramp measures each kind alone, the 100% point a whole fleet behind
one balancer, which cannot be perfect; 90% still catches a capacity overestimated by a step."""


def keep_up_share(results: Sequence[Result], *, window_s: float, slo: Slo) -> float:
    """Of the requests scheduled in the second half of ``window_s``, the share that met ``slo``
    (wall-clock seconds); 0 with none scheduled there."""
    late = [r for r in results if r.scheduled >= window_s / 2]
    if not late:
        return 0.0
    return sum(1 for r in late if meets_slo(r, slo)) / len(late)


def capacity_verdict(rows: Sequence[Mapping[str, Any]], *, load: float = 1.0) -> dict[str, Any]:
    """Whether the best policy at ``load`` kept up: ``confirmed`` is True, False, or None when
    no such point was measured (or every one was flagged); ``text`` says it for the report."""
    at = [r for r in rows if abs(r["load"] - load) < 1e-9 and r.get("seeds", 1) > 0]
    if not at:
        return {"confirmed": None, "text": f"not confirmed: no {load:.0%} point measured"}
    best = max(at, key=lambda r: r.get("keep_up_share", 0.0))
    share = float(best.get("keep_up_share", 0.0))
    if share >= CONFIRM_SHARE:
        text = (
            f"confirmed: at {load:.0%} `{best['policy']}` met the SLO for {share:.0%} of the "
            f"second half's requests (>= {CONFIRM_SHARE:.0%})"
        )
        return {"confirmed": True, "share": share, "policy": best["policy"], "text": text}
    text = (
        f"**capacity is wrong (too high)**: at {load:.0%} the best policy, `{best['policy']}`, "
        f"answered only {share:.0%} of the second half's requests within the SLO "
        f"(needs >= {CONFIRM_SHARE:.0%}); every load level is a fraction of a rate this fleet "
        "cannot serve"
    )
    return {"confirmed": False, "share": share, "policy": best["policy"], "text": text}
