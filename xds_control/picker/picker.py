"""One request -> the servers to name, best first: read the prompt, look up what each server
has cached of it, estimate each server's queue, rank. No gRPC here.

``Picker`` is the stateful shell around the pure steps (``pick.py``, ``score.py``): it keeps
each pool's ``PoolMemory``, reads the clock (Unix time, the engine's readings' clock;
injected for tests), counts picks in the metrics and explains each in the debug log. It is
also what flow control reads pools through (``flow.Saturation``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Hashable, Mapping, Sequence

import structlog

from xds_control.config.flow import FlowControl
from xds_control.config.picker import PoolPicker
from xds_control.flow.saturation import saturated
from xds_control.picker.cached_blocks import CachedBlocks, CachedPrefix
from xds_control.picker.fleet import Fleet
from xds_control.picker.index import PrefixIndex
from xds_control.picker.metrics import PICKS, SERVED
from xds_control.picker.pick import (
    EventCredit,
    Pick,
    PoolMemory,
    cached_tokens,
    freshest,
    queued_tokens,
)
from xds_control.picker.prefix import Prompt, Tokenize, read_prompt
from xds_control.picker.score import Candidate, Ranking, Term, adapter_term, rank
from xds_control.signals.load_report import LoadReport
from xds_control.signals.reported_load import ReportedLoad

__all__ = ["Picker"]

log = structlog.get_logger(__name__)


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
        reported: ReportedLoad | None = None,
    ) -> None:
        """``cached_blocks`` is the index from the servers' KV events; it decides for the
        servers that publish them once ``tokenizers(pool)`` gives the pool's ``Tokenize`` (a
        request body -> its prompt's token ids, as the engine's tokenizer gives them), which
        also counts prompt tokens exactly. Without both, routing history decides, and so it
        does for a server whose events ``stale(pool, address)`` says have stopped.
        ``delivered(pool)`` gives the servers every Envoy has taken (its ACKed EDS; ``None``:
        none asks): flow control dispatches only to those. ``reported`` keeps the load each
        server reported with its last response (pools with ``per_response_load``; the
        engine reads it too); ``None``: the picker keeps its own."""
        self.fleet = fleet
        self._delivered = delivered
        self.clock = clock
        self.cached_blocks = cached_blocks
        self._tokenizers = tokenizers
        self._stale = stale
        self._pools: dict[str, PoolMemory] = {}
        self.reported = ReportedLoad() if reported is None else reported

    def _pool(self, pool: str, capacity: int) -> PoolMemory:
        state = self._pools.get(pool)
        if state is None or state.index.capacity != capacity:
            state = self._pools[pool] = PoolMemory(index=PrefixIndex(capacity=capacity))
        return state

    def pick(
        self,
        *,
        pool: str,
        body: bytes,
        request: Hashable | None = None,
        subset: Collection[str] | None = None,
    ) -> Pick:
        """The servers for a request to ``pool`` with ``body``, best first; none when there
        is nothing to pick on (no picker for the pool, a body too large or not a completion
        request, no healthy server): Envoy's fallback policy then decides. ``request`` names
        the request for ``served`` and ``end`` (``None``: neither will be reported). With a
        ``subset`` (the gateway's hint), only those addresses may be named."""
        settings = self.fleet.picker(pool)
        read = self._read(pool, settings, body) if settings is not None else None
        if settings is None or read is None:
            PICKS.labels(pool=pool, outcome="none").inc()
            return Pick()
        prompt, match = read
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
        if not ranking.order:
            PICKS.labels(pool=pool, outcome="none").inc()
            return Pick()
        self._record(
            state, pool=pool, prompt=prompt, cached=cached, ranking=ranking, request=request
        )
        if log.is_enabled_for(logging.DEBUG):
            _explain(
                pool=pool, prompt=prompt, ranking=ranking, candidates=candidates, queued=queued
            )
        return Pick(addresses=tuple(ranking.order))

    def _read(
        self, pool: str, settings: PoolPicker, body: bytes
    ) -> tuple[Prompt, CachedPrefix | None] | None:
        """The request's prompt, and its match in the KV events' index followed as far as
        its ids were encoded; ``None``: a body too large or not a completion request."""
        if len(body) > settings.max_body_bytes:
            return None
        tokenize = self._tokenizers(pool) if self._tokenizers is not None else None
        blocks = self.cached_blocks
        match = None
        if tokenize is not None and blocks is not None and blocks.block_size is not None:
            match = blocks.prefix(block_size=blocks.block_size)
        prompt = read_prompt(
            body,
            prefix_bytes=settings.prefix_bytes,
            tokenize=tokenize,
            # The prompt's ids matter as far as some server holds them: past the first
            # block none holds, nothing can match (keys chain), so encoding stops there.
            wanted=match.read if match is not None else None,
        )
        return None if prompt is None else (prompt, match)

    def _cached(
        self, state: PoolMemory, *, pool: str, prompt: Prompt, match: CachedPrefix | None = None
    ) -> dict[str, float]:
        """Address -> prompt tokens the server has cached (``cached_tokens``): from its KV
        events when it publishes them and the prompt's token ids are known, else from where
        the picker sent prompts."""
        without_cache = self.fleet.without_prefix_cache(pool)
        history = state.index.matched(prompt.blocks)
        blocks, ids = self.cached_blocks, prompt.token_ids
        if blocks is None or blocks.block_size is None or ids is None:
            return cached_tokens(prompt, history=history, events=None, without_cache=without_cache)
        if match is None:
            match = blocks.prefix(block_size=blocks.block_size)
        match.read(ids)  # the ids after the tokenizer's last question
        stale = self._stale

        def decides(address: str) -> bool:
            return blocks.publishes(address) and not (stale is not None and stale(pool, address))

        events = EventCredit(
            matched=match.matched(),
            block_size=match.block_size,
            claims=state.ledger.claims(prompt.blocks, now=self.clock()),
            decides=decides,
        )
        return cached_tokens(prompt, history=history, events=events, without_cache=without_cache)

    def _rank(
        self,
        state: PoolMemory,
        *,
        pool: str,
        prompt: Prompt,
        cached: Mapping[str, float],
        count: int,
        subset: Collection[str] | None,
    ) -> tuple[Ranking, Sequence[Candidate], Mapping[str, float]]:
        settings = self.fleet.picker(pool)
        assert settings is not None
        candidates = self._candidates(pool, settings)
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
            terms=_adapter_terms(settings, prompt),
        )
        return ranking, candidates, queued

    def _record(
        self,
        state: PoolMemory,
        *,
        pool: str,
        prompt: Prompt,
        cached: Mapping[str, float],
        ranking: Ranking,
        request: Hashable | None,
    ) -> None:
        chosen = ranking.order[0]
        state.remember(
            prompt,
            address=chosen,
            cached=cached.get(chosen, 0.0),
            request=request,
            keeps_prefix=chosen not in self.fleet.without_prefix_cache(pool),
            now=self.clock(),
        )
        outcome = "held" if chosen in cached else "moved" if cached else "placed"
        PICKS.labels(pool=pool, outcome=outcome).inc()

    def _candidates(self, pool: str, settings: PoolPicker) -> Sequence[Candidate]:
        """``pool``'s servers, their queues as last known (``freshest``) when the pool asks
        for per-response load."""
        candidates = self.fleet.candidates(pool)
        if not settings.per_response_load:
            return candidates
        return freshest(candidates, reported=self.reported.last)

    def asks_load(self, pool: str) -> bool:
        """``pool``'s servers are asked for their load with every response."""
        settings = self.fleet.picker(pool)
        return settings is not None and settings.per_response_load

    def report(self, *, address: str, report: LoadReport) -> None:
        """``address`` answered with ``report`` (its ``endpoint-load-metrics``), now."""
        self.reported.record(address, report, at=self.clock())

    def open_tokens(self, pool: str) -> dict[str, float]:
        """Address -> prompt tokens of the requests the picker sent there that have not ended
        (before a reading of the server discounts them): what it believes each one queues."""
        state = self._pools.get(pool)
        return {} if state is None else state.ledger.pending(since={}, now=self.clock())

    def flow_control(self, pool: str) -> FlowControl | None:
        """``pool``'s flow control settings (``None``: it has none, or no picker)."""
        settings = self.fleet.picker(pool)
        return None if settings is None else settings.flow

    def saturated(self, pool: str) -> bool:
        """No healthy server of ``pool`` has room for one more request, by its flow control's
        thresholds (``xds_control.flow.saturated``); ``False`` without flow control."""
        settings = self.fleet.picker(pool)
        flow = None if settings is None else settings.flow
        if settings is None or flow is None:
            return False
        candidates = self._candidates(pool, settings)
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


def _adapter_terms(settings: PoolPicker, prompt: Prompt) -> dict[str, Term] | None:
    """The *adapter* term when the request's ``model`` names one of the pool's LoRA adapters;
    ``None`` (the cost as without LoRA) otherwise."""
    lora = settings.lora
    if lora is None or prompt.model is None or prompt.model not in lora.names:
        return None
    return {
        "adapter": adapter_term(adapter=prompt.model, load=lora.load_tokens, full=lora.full_tokens)
    }


def _explain(
    *,
    pool: str,
    prompt: Prompt,
    ranking: Ranking,
    candidates: Sequence[Candidate],
    queued: Mapping[str, float],
) -> None:
    """The costs behind one pick, in the debug log, to explain it."""
    log.debug(
        "pick",
        pool=pool,
        tokens=round(prompt.tokens),
        model=prompt.model,
        cached={a: round(t) for a, t in ranking.cached.items()},
        chosen=list(ranking.order),
        speed={c.address: round(c.speed, 3) for c in candidates},
        queued={a: round(q) for a, q in queued.items()},
        cost={a: round(v) for a, v in ranking.cost.items()},
    )
