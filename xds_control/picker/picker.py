"""One request -> the servers to name, best first: read the prompt, look up what each server
holds of it, estimate each server's queue, rank. No gRPC here."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Hashable, Mapping, Sequence
from dataclasses import dataclass, field

import structlog

from xds_control.flow.saturation import saturated
from xds_control.picker.cached_blocks import CachedBlocks, CachedPrefix
from xds_control.picker.fleet import Fleet
from xds_control.picker.index import PrefixIndex
from xds_control.picker.ledger import Ledger
from xds_control.picker.metrics import PICKS, SERVED
from xds_control.picker.prefix import BLOCK_BYTES, Prompt, Tokenize, read_prompt
from xds_control.picker.score import Candidate, Ranking, rank, uncached_tokens

__all__ = ["ASSIGNMENT_MAX_AGE_S", "Picker", "queued_tokens"]

log = structlog.get_logger(__name__)

ASSIGNMENT_MAX_AGE_S = 30.0
"""An assignment whose end the picker never heard of stops counting after this long (longer
than most requests, so it only matters when Envoy's stream end is lost)."""

_MEAN_WEIGHT = 0.05
"""Weight of each new prompt in the pool's running mean prompt size (about the last 20)."""


def queued_tokens(
    candidates: Sequence[Candidate],
    *,
    queue: Mapping[str, tuple[float, int]],
    mean_tokens: float,
) -> dict[str, float]:
    """Address -> prompt tokens ahead of a new request there: every prompt the picker sent it
    that it has not answered yet, each at its own size (``queue``: their tokens, and how many
    were sent before the server's last reading), and the rest of the ``waiting`` count of that
    reading (requests the picker did not send) at the pool's mean prompt size. One long
    prompt in a queue counts as long as it is, not as the mean."""
    out: dict[str, float] = {}
    for c in candidates:
        tokens, counted = queue.get(c.address, (0.0, 0))
        out[c.address] = tokens + max(0.0, c.waiting - counted) * mean_tokens
    return out


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

    def __init__(
        self,
        *,
        fleet: Fleet,
        clock: Callable[[], float] = time.time,
        cached_blocks: CachedBlocks | None = None,
        tokenizers: Callable[[str], Tokenize | None] | None = None,
        stale: Callable[[str, str], bool] | None = None,
        delivered: Callable[[str], frozenset[str] | None] | None = None,
    ) -> None:
        """``cached_blocks`` is the index from the servers' KV events; it decides for the
        servers that publish them once ``tokenizers(pool)`` gives the pool's ``Tokenize`` (a
        request body -> its prompt's token ids, as the engine's tokenizer gives them), which
        also counts prompt tokens exactly. Without both, routing history decides, and so it
        does for a server whose events ``stale(pool, address)`` says have stopped.
        ``delivered(pool)`` gives the servers every Envoy has taken (its ACKed EDS; ``None``:
        none asks): flow control dispatches only to those."""
        self.fleet = fleet
        self._delivered = delivered
        self.clock = clock
        self.cached_blocks = cached_blocks
        self._tokenizers = tokenizers
        self._stale = stale
        self._pools: dict[str, _Pool] = {}

    def _pool(self, pool: str, capacity: int) -> _Pool:
        state = self._pools.get(pool)
        if state is None or state.index.capacity != capacity:
            state = self._pools[pool] = _Pool(index=PrefixIndex(capacity=capacity))
        return state

    def _rank(
        self,
        state: _Pool,
        *,
        pool: str,
        prompt: Prompt,
        cached: Mapping[str, float],
        count: int,
        subset: Collection[str] | None,
    ) -> tuple[Ranking, Sequence[Candidate], Mapping[str, float]]:
        settings = self.fleet.picker(pool)
        assert settings is not None
        candidates: Sequence[Candidate] = self.fleet.candidates(pool)
        if subset is not None:
            candidates = [c for c in candidates if c.address in subset]
        now = self.clock()
        queue = state.ledger.queue(since={c.address: c.observed_at for c in candidates}, now=now)
        queued = queued_tokens(candidates, queue=queue, mean_tokens=state.mean_tokens)
        ranking = rank(
            candidates,
            key=prompt.key,
            affinity=settings.affinity,
            move_cost=settings.move_cost,
            count=count,
            cached=cached,
            tokens=prompt.tokens,
            queued=queued,
        )
        return ranking, candidates, queued

    def pick(
        self,
        *,
        pool: str,
        body: bytes,
        request: Hashable | None = None,
        subset: Collection[str] | None = None,
    ) -> list[str]:
        """Addresses for a request to ``pool`` with ``body``, best first; empty when there is
        nothing to pick on (no picker for the pool, a body too large or not a completion
        request, no healthy server): Envoy's fallback policy then decides. ``request`` names
        the request for ``served`` and ``end`` (``None``: neither will be reported). With a
        ``subset`` (the gateway's hint), only those addresses may be named."""
        settings = self.fleet.picker(pool)
        prompt = None
        match = None
        if settings is not None and len(body) <= settings.max_body_bytes:
            tokenize = self._tokenizers(pool) if self._tokenizers is not None else None
            size = self.cached_blocks.block_size if self.cached_blocks is not None else None
            if tokenize is not None and self.cached_blocks is not None and size is not None:
                match = self.cached_blocks.prefix(block_size=size)
            prompt = read_prompt(
                body,
                prefix_bytes=settings.prefix_bytes,
                tokenize=tokenize,
                # The prompt's ids matter as far as some server holds them: past the first
                # block none holds, nothing can match (keys chain), so encoding stops there.
                wanted=match.read if match is not None else None,
            )
        if settings is None or prompt is None:
            PICKS.labels(pool=pool, outcome="none").inc()
            return []
        state = self._pool(pool, settings.index_size)
        cached = self._cached(state, pool=pool, prompt=prompt, match=match)
        ranking, candidates, queued = self._rank(
            state,
            pool=pool,
            prompt=prompt,
            cached=cached,
            count=1 + settings.fallbacks,
            subset=subset,
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

    def _cached(
        self, state: _Pool, *, pool: str, prompt: Prompt, match: CachedPrefix | None = None
    ) -> dict[str, float]:
        """Address -> prompt tokens the server holds: from its KV events when it publishes
        them and the prompt's tokens are known, else from where the picker sent prompts; none
        on a server that keeps no prefix cache."""
        uncached = self.fleet.without_prefix_cache(pool)
        cached = {
            address: min(prompt.tokens, blocks * BLOCK_BYTES / prompt.bytes_per_token)
            for address, blocks in state.index.matched(prompt.blocks).items()
            if address not in uncached
        }
        kv = self.cached_blocks
        ids = prompt.token_ids
        if kv is None or kv.block_size is None or ids is None:
            return cached
        if match is None:
            match = kv.prefix(block_size=kv.block_size)
        size = match.block_size
        stale = self._stale

        def by_events(address: str) -> bool:
            return kv.publishes(address) and not (stale is not None and stale(pool, address))

        match.read(ids)  # the ids after the tokenizer's last question
        from_events = match.matched()
        for address in [a for a in cached if by_events(a)]:
            del cached[address]
        for address, blocks in from_events.items():
            if address not in uncached and by_events(address):
                cached[address] = min(prompt.tokens, blocks * size)
        # A prompt sent to a server that is still prefilling it is not in its events yet:
        # the next request with that prefix would find no holder and go elsewhere.
        claimed = state.ledger.claims(prompt.blocks, now=self.clock())
        for address, blocks in claimed.items():
            if address not in uncached and by_events(address):
                tokens = min(prompt.tokens, blocks * BLOCK_BYTES / prompt.bytes_per_token)
                cached[address] = max(cached.get(address, 0.0), tokens)
        return cached

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
        if chosen not in self.fleet.without_prefix_cache(pool):
            state.index.put(prompt.blocks, chosen)
        state.ledger.add(
            object() if request is None else request,
            address=chosen,
            tokens=uncached_tokens(tokens=prompt.tokens, cached=cached.get(chosen, 0.0)),
            now=self.clock(),
            # Only a request whose answer will be reported claims its blocks until then.
            blocks=prompt.blocks if request is not None else (),
        )
        mean = state.mean_tokens
        state.mean_tokens = (
            prompt.tokens if mean == 0.0 else mean + _MEAN_WEIGHT * (prompt.tokens - mean)
        )
        outcome = "held" if chosen in cached else "moved" if cached else "placed"
        PICKS.labels(pool=pool, outcome=outcome).inc()

    def open_tokens(self, pool: str) -> dict[str, float]:
        """Address -> prompt tokens of the requests the picker sent there that have not ended
        (before a reading of the server discounts them): what it believes each one queues."""
        state = self._pools.get(pool)
        return {} if state is None else state.ledger.pending(since={}, now=self.clock())

    def saturated(self, pool: str) -> bool:
        """No healthy server of ``pool`` has room for one more request, by its flow control's
        thresholds (``xds_control.flow.saturated``); ``False`` without flow control."""
        settings = self.fleet.picker(pool)
        if settings is None or settings.flow is None:
            return False
        flow = settings.flow
        candidates = self.fleet.candidates(pool)
        delivered = self._delivered(pool) if self._delivered is not None else None
        if delivered is not None:
            # A server the control plane knows but an Envoy has not ACKed yet (scale from
            # zero: the EDS update is on its way) would be named to an Envoy that has no such
            # host, and the request would find the pool empty: 503.
            candidates = tuple(c for c in candidates if c.address in delivered)
        now = self.clock()
        fresh_after = now - flow.max_signal_age_s
        state = self._pools.get(pool)
        unanswered = {}
        if state is not None:
            since = {
                c.address: c.observed_at
                if c.observed_at is not None and c.observed_at >= fresh_after
                else None
                for c in candidates
            }
            unanswered = state.ledger.unanswered(since=since, now=now)
        return saturated(candidates, unanswered=unanswered, now=now, settings=flow)

    def ready(self, pool: str) -> bool:
        """Some server of ``pool`` is healthy."""
        return any(c.healthy for c in self.fleet.candidates(pool))

    def served(self, *, pool: str, request: Hashable, address: str) -> None:
        """``request`` (as passed to ``pick``) was answered by ``address``, as the response's
        headers report: its prefill is over. What was picked is not always what served (Envoy
        went down the fallback list, or retried): then the prompt's blocks are where it
        served, and the index learns so."""
        state = self._pools.get(pool)
        if state is None:
            return
        sent = state.ledger.answered(request)
        if sent is None:
            return
        elsewhere = sent.address != address
        SERVED.labels(pool=pool, where="elsewhere" if elsewhere else "picked").inc()
        if elsewhere and sent.blocks and address not in self.fleet.without_prefix_cache(pool):
            state.index.put(sent.blocks, address)

    def end(self, *, pool: str, request: Hashable) -> None:
        """``request`` (as passed to ``pick``) is over: its prefill no longer queues."""
        state = self._pools.get(pool)
        if state is not None:
            state.ledger.end(request)
