"""The picker's own requests in flight: which server it sent each to, and how many prompt
tokens it asked that server to prefill.

The engine's ``waiting`` reading is up to a scrape period old; what the picker sent since is
the part of each server's queue that reading cannot know. An assignment counts until the
first of: its request ended (Envoy closed the ``ext_proc`` stream), a reading of the server
taken after it (the server's own count includes it from then on), or ``max_age_s`` (a lost
end: nothing stays counted forever).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Mapping
from typing import NamedTuple

__all__ = ["Ledger"]


class _Assignment(NamedTuple):
    address: str
    tokens: float
    at: float


class Ledger:
    """Assignments of one pool, oldest first."""

    def __init__(self, *, max_age_s: float) -> None:
        self.max_age_s = max_age_s
        self._open: OrderedDict[Hashable, _Assignment] = OrderedDict()

    def __len__(self) -> int:
        return len(self._open)

    def add(self, request: Hashable, *, address: str, tokens: float, now: float) -> None:
        """``request`` went to ``address`` at ``now`` with ``tokens`` to prefill."""
        self._open.pop(request, None)
        self._open[request] = _Assignment(address, tokens, now)
        self._expire(now)

    def end(self, request: Hashable) -> None:
        """``request`` is over (unknown requests are ignored: an end may come twice)."""
        self._open.pop(request, None)

    def _expire(self, now: float) -> None:
        while self._open:
            first = next(iter(self._open.values()))
            if now - first.at <= self.max_age_s:
                return
            self._open.popitem(last=False)

    def pending(self, *, since: Mapping[str, float | None], now: float) -> dict[str, float]:
        """Address -> tokens assigned to it after ``since[address]`` (all, for ``None`` or an
        address not listed) and still open at ``now``."""
        self._expire(now)
        out: dict[str, float] = {}
        for a in self._open.values():
            after = since.get(a.address)
            if after is None or a.at > after:
                out[a.address] = out.get(a.address, 0.0) + a.tokens
        return out
