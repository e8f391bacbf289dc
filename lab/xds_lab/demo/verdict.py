"""Did the faulted server lose weight and traffic during the fault and win it back? (pure)"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["PhaseOutcome", "Verdict", "judge"]

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


@dataclass(frozen=True, slots=True)
class Verdict:
    """``ok`` and the one line that says why."""

    ok: bool
    message: str


def judge(
    *, server: str, before: PhaseOutcome, during: PhaseOutcome, after: PhaseOutcome
) -> Verdict:
    """Judge the tour: ``server``'s weight and share fell during the fault; its weight came back."""
    fell = during.weight_min <= FALL * before.weight_end
    moved = during.requests > 0 and during.share <= FALL * before.share
    lost = before.weight_end - during.weight_min
    recovered = lost > 0 and after.weight_end - during.weight_min >= RECOVER * lost
    story = (
        f"{server}: Envoy weight {before.weight_end} -> {during.weight_min} during the fault "
        f"-> {after.weight_end} after it; traffic share {before.share:.0%} -> {during.share:.0%}"
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
        return Verdict(ok=False, message=f"FAIL: {'; '.join(problems)} ({story})")
    return Verdict(ok=True, message=f"OK: {story}")
