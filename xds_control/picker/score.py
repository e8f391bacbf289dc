"""Rank a pool's servers for one request. Pure: the same inputs give the same order.

Two ideas, in this order:

1. **Where the prefix already is.** The server the prefix index says holds the request's prefix
   comes first, as long as it is worth at least ``1 / affinity`` of the best other server
   (engine weights: they already carry queue, KV use, capacity, health and warm-up, so a server
   the engine finds overloaded loses its claim to the prefix).
2. **Otherwise, weighted rendezvous hashing** on the prefix key: every server gets
   ``-weight / ln(u)`` with ``u`` a uniform hash of (key, address), highest first. A new prefix
   lands on a server with probability proportional to its weight (the engine's split, like
   MAGLEV's), the same prefix lands on the same server while weights hold, and a server that
   leaves moves only its own prefixes. The order past the first is the fallback list.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from typing import NamedTuple

__all__ = ["Candidate", "rank"]


class Candidate(NamedTuple):
    """A server the picker may name."""

    address: str
    """``IP:PORT``, as EDS publishes it (``override_host`` matches on it)."""
    weight: int
    """The engine's weight (1..100), or the static one with the engine off."""
    healthy: bool
    """Only healthy servers are named; the fallback policy copes with the rest."""


def _draw(key: bytes, address: str) -> float:
    """A uniform number in (0, 1) from (key, address)."""
    digest = hashlib.blake2b(key + address.encode(), digest_size=8).digest()
    return (int.from_bytes(digest, "big") + 1) / (2**64 + 2)


def _rendezvous(key: bytes, candidate: Candidate) -> float:
    return -candidate.weight / math.log(_draw(key, candidate.address))


def rank(
    candidates: Sequence[Candidate],
    *,
    key: bytes,
    holder: str | None,
    affinity: float,
    count: int,
) -> list[str]:
    """Up to ``count`` addresses of healthy ``candidates``, best first, for a request whose
    prefix is ``key`` and last went to ``holder`` (``None``: unknown). Empty when no server
    is healthy: the caller then names none and Envoy's fallback policy decides."""
    healthy = [c for c in candidates if c.healthy and c.weight > 0]
    ordered = sorted(healthy, key=lambda c: _rendezvous(key, c), reverse=True)
    held = next((c for c in ordered if c.address == holder), None)
    if held is not None:
        best_other = max((c.weight for c in ordered if c is not held), default=0)
        if held.weight * affinity >= best_other:
            ordered.remove(held)
            ordered.insert(0, held)
    return [c.address for c in ordered[:count]]
