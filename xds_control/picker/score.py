"""Rank a pool's servers for one request. Pure: the same inputs give the same order.

Each healthy server gets the **expected time to first token** of the request there, in the
unit "prompt tokens prefilled at the pool's fastest speed":

    (tokens queued ahead of it + this request's uncached tokens) / speed

- *queued*: what the server has yet to prefill before this request (the caller's estimate:
  the engine's waiting count plus the picker's own assignments since that reading);
- *uncached*: the prompt, minus the prefix on the server the index says holds it;
- *speed*: the engine's capacity factor (its capacity over the pool's best) times its
  warm-up ramp, so a slow GPU class or a server still warming up takes longer per token.

The lowest cost goes first. So the server holding the prefix wins exactly when the prefill it
saves is worth more than the queue it has over the others, and a long prompt goes to a fast
server even past a short queue. A holder whose engine weight times ``affinity`` is below the
best other server's loses its claim to the prefix: the weight also carries KV use, SLO and
health, and a server the engine finds overloaded should not keep prefixes.

Equal costs (an idle pool, or a caller that knows no sizes) fall back to the holder, then
**weighted rendezvous hashing** on the prefix key: every server gets ``-weight / ln(u)`` with
``u`` a uniform hash of (key, address), highest first. A new prefix then lands on a server
with probability proportional to its weight (the engine's split, like MAGLEV's), the same
prefix lands on the same server while weights hold, and a server that leaves moves only its
own prefixes. The order past the first is the fallback list.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from typing import NamedTuple

__all__ = ["Candidate", "costs", "rank", "uncached_tokens"]

_MIN_SPEED = 1e-3
"""A server the engine rates at nearly nothing is 1000x slower, not infinitely slow."""


class Candidate(NamedTuple):
    """A server the picker may name."""

    address: str
    """``IP:PORT``, as EDS publishes it (``override_host`` matches on it)."""
    weight: int
    """The engine's weight (1..100), or the static one with the engine off."""
    healthy: bool
    """Only healthy servers are named; the fallback policy copes with the rest."""
    speed: float = 1.0
    """Prefill speed relative to the pool's fastest, (0, 1]: capacity factor x warm-up."""
    waiting: float = 0.0
    """Requests the server reported waiting for a batch slot (engine's ``waiting``)."""
    observed_at: float | None = None
    """When ``waiting`` was read (Unix seconds); ``None``: never."""


def _draw(key: bytes, address: str) -> float:
    """A uniform number in (0, 1) from (key, address)."""
    digest = hashlib.blake2b(key + address.encode(), digest_size=8).digest()
    return (int.from_bytes(digest, "big") + 1) / (2**64 + 2)


def _rendezvous(key: bytes, candidate: Candidate) -> float:
    return -candidate.weight / math.log(_draw(key, candidate.address))


def _holds(healthy: Sequence[Candidate], holder: str | None, affinity: float) -> str | None:
    """``holder`` if it keeps its claim to the prefix: healthy, and its weight times
    ``affinity`` at least the best other server's."""
    held = next((c for c in healthy if c.address == holder), None)
    if held is None:
        return None
    best_other = max((c.weight for c in healthy if c is not held), default=0)
    return held.address if held.weight * affinity >= best_other else None


def uncached_tokens(*, tokens: float, prefix_tokens: float, holds: bool) -> float:
    """What a server prefills for a request of ``tokens``: all of it, or, when it ``holds``
    the request's prefix, the part past the ``prefix_tokens`` it has cached."""
    return max(0.0, tokens - prefix_tokens) if holds else tokens


def costs(
    candidates: Sequence[Candidate],
    *,
    holder: str | None,
    tokens: float,
    prefix_tokens: float,
    queued: Mapping[str, float],
) -> dict[str, float]:
    """Address -> expected time to first token (in tokens at the fastest speed) of a request
    of ``tokens`` whose first ``prefix_tokens`` are cached on ``holder`` only."""
    out = {}
    for c in candidates:
        uncached = uncached_tokens(
            tokens=tokens, prefix_tokens=prefix_tokens, holds=c.address == holder
        )
        out[c.address] = (queued.get(c.address, 0.0) + uncached) / max(c.speed, _MIN_SPEED)
    return out


def rank(
    candidates: Sequence[Candidate],
    *,
    key: bytes,
    holder: str | None,
    affinity: float,
    count: int,
    tokens: float = 0.0,
    prefix_tokens: float = 0.0,
    queued: Mapping[str, float] | None = None,
) -> list[str]:
    """Up to ``count`` addresses of healthy ``candidates``, best first, for a request of
    ``tokens`` whose prefix is ``key`` (``prefix_tokens`` long) and last went to ``holder``
    (``None``: unknown), with ``queued`` tokens ahead on each server. Without sizes (the
    defaults) every cost is 0: holder, then rendezvous. Empty when no server is healthy: the
    caller then names none and Envoy's fallback policy decides."""
    healthy = [c for c in candidates if c.healthy and c.weight > 0]
    held = _holds(healthy, holder, affinity)
    cost = costs(
        healthy, holder=held, tokens=tokens, prefix_tokens=prefix_tokens, queued=queued or {}
    )
    ordered = sorted(
        healthy,
        key=lambda c: (cost[c.address], c.address != held, -_rendezvous(key, c)),
    )
    return [c.address for c in ordered[:count]]
