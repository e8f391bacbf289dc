"""One request -> the servers to name, best first: read the prompt, look up what each server
holds of it, estimate each server's queue, rank. No gRPC here."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field

import structlog

from xds_control.picker.fleet import Fleet
from xds_control.picker.index import PrefixIndex
from xds_control.picker.ledger import Ledger
from xds_control.picker.metrics import PICKS
from xds_control.picker.prefix import BLOCK_BYTES, BYTES_PER_TOKEN, Prompt, read_prompt
from xds_control.picker.score import Candidate, Ranking, rank, uncached_tokens

__all__ = ["ASSIGNMENT_MAX_AGE_S", "Picker", "queued_tokens"]

log = structlog.get_logger(__name__)

ASSIGNMENT_MAX_AGE_S = 30.0
"""An assignment whose end the picker never heard of stops counting after this long (longer
than most requests, so it only matters when Envoy's stream end is lost)."""

_MEAN_WEIGHT = 0.05
"""Weight of each new prompt in the pool's running mean prompt size (about the last 20)."""


def queued_tokens(
    candidates: Sequence[Candidate], *, pending: Mapping[str, float], mean_tokens: float
) -> dict[str, float]:
    """Address -> prompt tokens ahead of a new request there: the server's ``waiting`` count
    at its last reading (at the pool's mean prompt size: the picker does not know which
    requests those are) plus what the picker sent it since."""
    return {c.address: c.waiting * mean_tokens + pending.get(c.address, 0.0) for c in candidates}


@dataclass
class _Pool:
    """What the picker remembers of one pool (a prefix on one pool's server says nothing
    about another pool's, nor does its queue)."""

    index: PrefixIndex
    ledger: Ledger = field(default_factory=lambda: Ledger(max_age_s=ASSIGNMENT_MAX_AGE_S))
    mean_tokens: float = 0.0


class Picker:
    """Picks for every pool of ``fleet``; ``clock`` is Unix time (the engine's readings'
    clock), injected for tests."""

    def __init__(self, *, fleet: Fleet, clock: Callable[[], float] = time.time) -> None:
        self.fleet = fleet
        self.clock = clock
        self._pools: dict[str, _Pool] = {}

    def _pool(self, pool: str, capacity: int) -> _Pool:
        state = self._pools.get(pool)
        if state is None or state.index.capacity != capacity:
            state = self._pools[pool] = _Pool(index=PrefixIndex(capacity=capacity))
        return state

    def _rank(
        self, state: _Pool, *, pool: str, prompt: Prompt, cached: Mapping[str, float], count: int
    ) -> tuple[Ranking, Sequence[Candidate], Mapping[str, float]]:
        settings = self.fleet.picker(pool)
        assert settings is not None
        candidates = self.fleet.candidates(pool)
        now = self.clock()
        pending = state.ledger.pending(
            since={c.address: c.observed_at for c in candidates}, now=now
        )
        queued = queued_tokens(candidates, pending=pending, mean_tokens=state.mean_tokens)
        ranking = rank(
            candidates,
            key=prompt.key,
            affinity=settings.affinity,
            count=count,
            cached=cached,
            tokens=prompt.tokens,
            queued=queued,
        )
        return ranking, candidates, queued

    def pick(self, *, pool: str, body: bytes, request: Hashable | None = None) -> list[str]:
        """Addresses for a request to ``pool`` with ``body``, best first; empty when there is
        nothing to pick on (no picker for the pool, a body too large or not a completion
        request, no healthy server): Envoy's fallback policy then decides. ``request`` names
        the request for ``end`` (``None``: its end will not be reported)."""
        settings = self.fleet.picker(pool)
        prompt = None
        if settings is not None and len(body) <= settings.max_body_bytes:
            prompt = read_prompt(body, prefix_bytes=settings.prefix_bytes)
        if settings is None or prompt is None:
            PICKS.labels(pool=pool, outcome="none").inc()
            return []
        state = self._pool(pool, settings.index_size)
        cached = {
            address: min(prompt.tokens, blocks * BLOCK_BYTES / BYTES_PER_TOKEN)
            for address, blocks in state.index.matched(prompt.blocks).items()
        }
        ranking, candidates, queued = self._rank(
            state, pool=pool, prompt=prompt, cached=cached, count=1 + settings.fallbacks
        )
        chosen = ranking.order
        if not chosen:
            PICKS.labels(pool=pool, outcome="none").inc()
            return []
        self._record(
            state, pool=pool, prompt=prompt, cached=cached, chosen=chosen[0], request=request
        )
        if log.is_enabled_for(logging.DEBUG):  # the costs behind one pick, to explain it
            log.debug(
                "pick",
                pool=pool,
                tokens=round(prompt.tokens),
                cached={a: round(t) for a, t in ranking.cached.items()},
                chosen=list(chosen),
                speed={c.address: round(c.speed, 3) for c in candidates},
                queued={a: round(q) for a, q in queued.items()},
                cost={a: round(v) for a, v in ranking.cost.items()},
            )
        return chosen

    def _record(
        self,
        state: _Pool,
        *,
        pool: str,
        prompt: Prompt,
        cached: Mapping[str, float],
        chosen: str,
        request: Hashable | None,
    ) -> None:
        state.index.put(prompt.blocks, chosen)
        state.ledger.add(
            object() if request is None else request,
            address=chosen,
            tokens=uncached_tokens(tokens=prompt.tokens, cached=cached.get(chosen, 0.0)),
            now=self.clock(),
        )
        mean = state.mean_tokens
        state.mean_tokens = (
            prompt.tokens if mean == 0.0 else mean + _MEAN_WEIGHT * (prompt.tokens - mean)
        )
        outcome = "held" if chosen in cached else "moved" if cached else "placed"
        PICKS.labels(pool=pool, outcome=outcome).inc()

    def end(self, *, pool: str, request: Hashable) -> None:
        """``request`` (as passed to ``pick``) is over: its prefill no longer queues."""
        state = self._pools.get(pool)
        if state is not None:
            state.ledger.end(request)
