"""Did the faulted server lose weight and traffic during the fault and win it back? (pure)"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["PhaseOutcome", "Verdict", "first_below", "judge"]

FALL = 0.8
"""During the fault, weight and share must drop below this fraction of their warm-up values."""
RECOVER = 0.3
"""After the fault, the weight must win back at least this fraction of what it lost (the engine
wins capacity back over ~20 s, so a short recovery phase sees the start of the climb)."""


@dataclass(frozen=True, slots=True)
class PhaseOutcome:
    """The faulted server in one phase, as Envoy applied it and as traffic measured it.

    ``weight_end`` is Envoy's weight when the phase ended, ``weight_min`` the lowest seen in it;
    ``share`` is its share of the requests that finished in the phase's settled second half.
    """

    weight_end: int
    weight_min: int
    share: float
    requests: int


def first_below(looks: Sequence[tuple[float, int]], *, level: int, since: float) -> float | None:
    """Seconds from ``since`` to the first look (time, weight) whose weight is below ``level``;
    None when none is."""
    return next((at - since for at, weight in looks if weight < level), None)


@dataclass(frozen=True, slots=True)
class Verdict:
    """``ok`` and the one line that says why."""

    ok: bool
    message: str
    fell_after_s: float | None = None
    """Seconds from the fault to the first lower weight in Envoy (None: it never fell)."""


def judge(
    *,
    server: str,
    before: PhaseOutcome,
    during: PhaseOutcome,
    after: PhaseOutcome,
    fell_after_s: float | None = None,
) -> Verdict:
    """Judge the tour: ``server``'s weight and share fell during the fault; its weight came back.

    ``fell_after_s``: how long after the fault Envoy first held a lower weight than at the end
    of the warm-up (``first_below``), told in the story, not judged: how soon is the
    benchmark's to measure (``bench/demo_tour``)."""
    fell = during.weight_min <= FALL * before.weight_end
    moved = during.requests > 0 and during.share <= FALL * before.share
    lost = before.weight_end - during.weight_min
    recovered = lost > 0 and after.weight_end - during.weight_min >= RECOVER * lost
    first = "" if fell_after_s is None else f" (first lower {fell_after_s:.1f} s in)"
    story = (
        f"{server}: Envoy weight {before.weight_end} -> {during.weight_min} during the fault"
        f"{first} -> {after.weight_end} after it; traffic share {before.share:.0%} -> "
        f"{during.share:.0%}"
    )
    problems = [
        text
        for good, text in (
            (fell, "its weight did not fall"),
            (moved, "traffic did not move away"),
            (recovered, "its weight did not come back"),
        )
        if not good
    ]
    if problems:
        message = f"FAIL: {'; '.join(problems)} ({story})"
        return Verdict(ok=False, message=message, fell_after_s=fell_after_s)
    return Verdict(ok=True, message=f"OK: {story}", fell_after_s=fell_after_s)
