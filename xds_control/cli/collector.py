"""The garbage collector, set for a serving control plane: start-up frozen, young passes rarer.

Start-up tuning of the ``serve`` process, so it sits beside ``serve``: called once, when the
first snapshot is served.

Why: a push to a thousand streams allocates a few tracked objects per stream, nearly all freed
at once by reference counting; yet with CPython's default threshold (a young collection every
700 net allocations) the collector ran some twenty times per push, each walking whatever was
young, and the older generations' passes followed. In the fleet benchmark that was a third of
a push's CPU, with passes of 0.1 s and more in the middle of pushes (``docs/benchmarks.md``).
With a higher threshold, short-lived objects die by reference count before the collector
looks: almost no collection runs during a push. Cyclic garbage still gets collected, later.
What start-up made (modules, schemas, the first snapshot) lives as long as the process, so it
is frozen once serving: out of the full passes, which took 15-60 ms with it, in the middle of
an endpoints edit's way to Envoy (``docs/benchmarks.md``, file_edit).
"""

from __future__ import annotations

import gc

__all__ = ["YOUNG_THRESHOLD", "settle_for_serving"]

YOUNG_THRESHOLD = 20_000
"""Net allocations of tracked objects between young collections (CPython: 700)."""


def settle_for_serving() -> None:
    """Collect once, freeze what survives, and raise the young generation's threshold (the
    older ones' stay). Called once, when the first snapshot is served."""
    gc.collect()
    gc.freeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, older, oldest)
