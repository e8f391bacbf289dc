"""The picker's own requests in flight: which server it sent each to, and how many prompt
tokens it asked that server to prefill.

The engine's ``waiting`` reading is up to a scrape period old; what the picker sent since is
the part of each server's queue that reading cannot know. An assignment counts until the
first of: its server answered (the response's headers: the prefill is over, the first token
out), its request ended (Envoy closed the ``ext_proc`` stream), a reading of the server taken
after it (the server's own count includes it from then on), or ``max_age_s`` (a lost end:
nothing stays counted forever).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Iterator, Mapping, Sequence
from typing import NamedTuple

__all__ = ["Assignment", "Ledger"]


class Assignment(NamedTuple):
    """Where one request was sent, when, with how many tokens to prefill and which blocks."""

    address: str
    tokens: float
    at: float
    blocks: Sequence[Hashable] = ()


class Ledger:
    """Assignments of one pool, oldest first."""

    def __init__(self, *, max_age_s: float) -> None:
        self.max_age_s = max_age_s
        self._open: OrderedDict[Hashable, Assignment] = OrderedDict()

    def __len__(self) -> int:
        return len(self._open)

    def add(
        self,
        request: Hashable,
        *,
        address: str,
        tokens: float,
        now: float,
        blocks: Sequence[Hashable] = (),
    ) -> None:
        """``request`` went to ``address`` at ``now`` with ``tokens`` to prefill, its prompt's
        ``blocks`` with it."""
        self._open.pop(request, None)
        self._open[request] = Assignment(address, tokens, now, blocks)
        self._expire(now)

    def answered(self, request: Hashable) -> Assignment | None:
        """``request``'s server answered: its prefill no longer queues. Its assignment (where
        it was sent), or ``None`` for an unknown or ended request."""
        return self._open.pop(request, None)

    def end(self, request: Hashable) -> None:
        """``request`` is over (unknown requests are ignored: an end may come twice)."""
        self._open.pop(request, None)

    def _expire(self, now: float) -> None:
        while self._open:
            first = next(iter(self._open.values()))
            if now - first.at <= self.max_age_s:
                return
            self._open.popitem(last=False)

    def _open_since(self, *, since: Mapping[str, float | None], now: float) -> Iterator[Assignment]:
        self._expire(now)
        for a in self._open.values():
            after = since.get(a.address)
            if after is None or a.at > after:
                yield a

    def pending(self, *, since: Mapping[str, float | None], now: float) -> dict[str, float]:
        """Address -> tokens assigned to it after ``since[address]`` (all, for ``None`` or an
        address not listed) and still open at ``now``."""
        out: dict[str, float] = {}
        for a in self._open_since(since=since, now=now):
            out[a.address] = out.get(a.address, 0.0) + a.tokens
        return out

    def queue(
        self, *, since: Mapping[str, float | None], now: float
    ) -> dict[str, tuple[float, int]]:
        """Address -> the prompt tokens of every assignment still open there, and how many of
        those were sent before ``since[address]`` (its server's last reading, whose waiting
        count already has them)."""
        self._expire(now)
        out: dict[str, tuple[float, int]] = {}
        for a in self._open.values():
            tokens, before = out.get(a.address, (0.0, 0))
            after = since.get(a.address)
            out[a.address] = (tokens + a.tokens, before + (after is not None and a.at <= after))
        return out

    def claims(self, blocks: Sequence[Hashable], *, now: float) -> dict[str, int]:
        """Address -> the most leading ``blocks`` (chained keys, so a shared prefix) of a
        prompt sent there and not answered yet: what the server is about to hold, before its
        KV events can say so (they follow the prefill)."""
        self._expire(now)
        out: dict[str, int] = {}
        if not blocks:
            return out
        for a in self._open.values():
            if not a.blocks or a.blocks[0] != blocks[0]:
                continue
            shared = 0
            for mine, theirs in zip(blocks, a.blocks, strict=False):
                if mine != theirs:
                    break
                shared += 1
            out[a.address] = max(out.get(a.address, 0), shared)
        return out

    def unanswered(self, *, since: Mapping[str, float | None], now: float) -> dict[str, int]:
        """Address -> requests, as ``pending`` counts their tokens."""
        out: dict[str, int] = {}
        for a in self._open_since(since=since, now=now):
            out[a.address] = out.get(a.address, 0) + 1
        return out
