"""The garbage collector's young threshold for a serving control plane.

Why: a push to a thousand streams allocates a few tracked objects per stream, nearly all freed
at once by reference counting; yet with CPython's default threshold (a young collection every
700 net allocations) the collector ran some twenty times per push, each walking whatever was
young, and the older generations' passes followed. In the fleet benchmark that was a third of
a push's CPU, with passes of 0.1 s and more in the middle of pushes (``docs/benchmarks.md``).
With a higher threshold, short-lived objects die by reference count before the collector
looks: almost no collection runs during a push. Cyclic garbage still gets collected, later.
``serve`` also freezes what start-up made, once serving, so that full passes skip it.
"""

from __future__ import annotations

import gc

__all__ = ["YOUNG_THRESHOLD", "collect_less_often"]

YOUNG_THRESHOLD = 20_000
"""Net allocations of tracked objects between young collections (CPython: 700)."""


def collect_less_often() -> None:
    """Raise the young generation's threshold (the older ones' stay)."""
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, older, oldest)
