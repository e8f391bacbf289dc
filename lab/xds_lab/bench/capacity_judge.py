"""Judging the capacity ramp's steps, and checking the capacity afterwards (pure).

A step is judged on the second half of its arrivals only: a queue needs time to build, and a
rate the server cannot sustain still looks fine while its queue is short. The step holds when
at least ``KEEP_UP_SHARE`` of those arrivals were answered with a first token within the SLO's
TTFT (goodput at ~95% of the offered rate; TPOT is left out, as a slow GPU can miss it at any
rate and the ramp would never stop going down).

Afterwards the scenario's 100% point confirms the figure: the best policy there must keep up
(``CONFIRM_SHARE``), or the report says the capacity is wrong.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from xds_lab.loadgen.client import Result

__all__ = ["CONFIRM_SHARE", "KEEP_UP_SHARE", "capacity_verdict", "keep_up_share"]

KEEP_UP_SHARE = 0.95
CONFIRM_SHARE = 0.9
"""Below the ramp's 95%: the ramp measures each kind alone, the 100% point a whole fleet behind
one balancer, which cannot be perfect; 90% still catches a capacity overestimated by a step."""


def keep_up_share(results: Sequence[Result], *, window_s: float, ttft_s: float) -> float:
    """Of the requests scheduled in the second half of ``window_s``, the share answered whole
    with a first token within ``ttft_s`` (wall-clock seconds); 0 with none scheduled there."""
    late = [r for r in results if r.scheduled >= window_s / 2]
    if not late:
        return 0.0
    good = sum(1 for r in late if r.ok and r.ttft_s is not None and r.ttft_s <= ttft_s)
    return good / len(late)


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
            f"confirmed: at {load:.0%} `{best['policy']}` answered {share:.0%} of the second "
            f"half's requests within the TTFT objective (>= {CONFIRM_SHARE:.0%})"
        )
        return {"confirmed": True, "share": share, "policy": best["policy"], "text": text}
    text = (
        f"**capacity is wrong (too high)**: at {load:.0%} the best policy, `{best['policy']}`, "
        f"answered only {share:.0%} of the second half's requests within the TTFT objective "
        f"(needs >= {CONFIRM_SHARE:.0%}); every load level is a fraction of a rate this fleet "
        "cannot serve"
    )
    return {"confirmed": False, "share": share, "policy": best["policy"], "text": text}
