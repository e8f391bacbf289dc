"""The tour's script: warm-up, a fault on one fast server, recovery (pure)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["LOOP_SECONDS", "Phase", "plan"]

LOOP_SECONDS = 90.0
"""One cycle of the endless tour: long enough for weights to settle, short enough to watch."""

# A slowed server's weight falls within ~10 s (the scrape's rate window, then the engine's quick
# capacity estimate) and comes back over ~20 s (``capacity_alpha``): the fault and the recovery
# get the larger slices.
_SLICES = (("warm-up", 0.3, False), ("fault", 0.35, True), ("recovery", 0.35, False))


@dataclass(frozen=True, slots=True)
class Phase:
    """One stretch of the tour; ``fault`` says whether the slowdown is on during it."""

    name: str
    seconds: float
    fault: bool


def plan(duration: float | None) -> tuple[Phase, ...]:
    """The phases of one cycle, ``duration`` seconds in all (``None``: the endless tour's cycle)."""
    total = LOOP_SECONDS if duration is None else duration
    return tuple(Phase(name, total * share, fault) for name, share, fault in _SLICES)
