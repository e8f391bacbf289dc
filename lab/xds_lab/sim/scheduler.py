"""Continuous batching: the engine loop of one simulated server.

Each step admits waiting requests while batch slots, KV blocks and the per-step prefill token
budget allow, then sleeps for the step's time: a prefill pass (fixed overhead plus per uncached
prompt token) for the newly admitted, plus a decode step that grows with the running batch. At
the end of a step every admitted request has its first token and every decoding one a new token.

A request's output length is known up front, so the loop keeps a heap of finishing steps and does
O(admitted + finished) work per step, not O(running): a fleet of busy servers stays cheap on CPU.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import math
import random
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from xds_lab.sim.faults import FaultState
from xds_lab.sim.kv_cache import Allocation, KvCache
from xds_lab.sim.lora import LoraSlots
from xds_lab.sim.profiles import Profile
from xds_lab.sim.stats import EngineStats
from xds_lab.sim.tokens import BLOCK_SIZE

__all__ = ["QueueFullError", "RequestTooLongError", "Scheduler", "SeqState", "ServerRestartedError"]

_ids = itertools.count()


class QueueFullError(Exception):
    """The waiting queue is full; the request is shed."""


class RequestTooLongError(Exception):
    """The prompt plus output can never fit the model length or the KV cache."""


class ServerRestartedError(Exception):
    """The server restarted while the request was in flight."""


@dataclass(eq=False, slots=True)
class SeqState:
    """One request inside the engine."""

    prompt_tokens: int
    max_tokens: int
    block_hashes: list[int]
    arrival: float
    first_token: asyncio.Future[float]
    done: asyncio.Future[float]
    seq_id: int = field(default_factory=lambda: next(_ids))
    cached_tokens: int = 0
    first_step: int = -1
    allocation: Allocation | None = None
    finished: bool = False
    admitted_at: float | None = None
    """When the scheduler took it off the queue (its queue time ends there)."""
    token_ids: list[int] = field(default_factory=list)
    """The prompt's token ids, when the server publishes KV events (they carry them)."""
    adapter: str | None = None
    """The LoRA adapter it asks for; ``None``: the base model."""


class Scheduler:
    """Admission, batching and timing for one server; ``run()`` is its engine task."""

    def __init__(
        self, profile: Profile, *, faults: FaultState, stats: EngineStats, rng: random.Random
    ) -> None:
        self.profile = profile
        self.faults = faults
        self.stats = stats
        self.rng = rng
        self.kv_events: Callable[[list[tuple[Any, ...]]], None] | None = None
        """Where each step's KV events go (the server's publisher); ``None``: not recorded."""
        self.kv = self._new_cache()
        self.waiting: deque[SeqState] = deque()
        self.running: set[SeqState] = set()
        self.step = 0
        self._finishing: list[tuple[int, int, SeqState]] = []
        self._wakeup = asyncio.Event()
        self._step_waiters: asyncio.Future[int] | None = None
        self.loras = LoraSlots(profile.max_loras, load_s=profile.lora_load_s)
        self._loading_s = 0.0

    def submit(self, seq: SeqState) -> None:
        """Queue a request; raises ``QueueFullError`` or ``RequestTooLongError``."""
        total = seq.prompt_tokens + seq.max_tokens
        if total > self.profile.max_model_len or _blocks(total) > self.kv.capacity:
            raise RequestTooLongError(f"{total} tokens exceed this server's model length or KV")
        if len(self.waiting) >= self.profile.max_waiting:
            self.stats.requests_rejected += 1
            raise QueueFullError("waiting queue is full")
        self.waiting.append(seq)
        self._wakeup.set()

    def generated(self, seq: SeqState) -> int:
        """Output tokens ``seq`` has produced so far."""
        if seq.first_step < 0:
            return 0
        return min(seq.max_tokens, self.step - seq.first_step + 1)

    async def next_step(self) -> int:
        """Wait for the end of the next engine step (streaming responses write per step)."""
        if self._step_waiters is None:
            self._step_waiters = asyncio.get_running_loop().create_future()
        return await asyncio.shield(self._step_waiters)

    def abort(self, seq: SeqState) -> None:
        """Stop working on ``seq`` (its client went away)."""
        if seq.finished:
            return
        seq.finished = True
        if seq in self.running:
            self._release(seq)
        else:
            with contextlib.suppress(ValueError):
                self.waiting.remove(seq)

    def restart(self) -> None:
        """Fail everything in flight and forget the cache, as a restarted process would."""
        for seq in [*self.running, *self.waiting]:
            seq.finished = True
            for fut in (seq.first_token, seq.done):
                if not fut.done():
                    fut.set_exception(ServerRestartedError("server restarted"))
                    # Nobody may be awaiting (non-streaming waits on done only): mark retrieved.
                    fut.exception()
        self.running.clear()
        self.waiting.clear()
        self._finishing.clear()
        self.kv = self._new_cache()
        self.loras = LoraSlots(self.profile.max_loras, load_s=self.profile.lora_load_s)
        self._loading_s = 0.0

    def publish_kv_events(self, sink: Callable[[list[tuple[Any, ...]]], None]) -> None:
        """Record KV events from now on (a cold cache: a server starts publishing at start)."""
        self.kv_events = sink
        self.kv = self._new_cache()

    def _new_cache(self) -> KvCache:
        profile = self.profile
        return KvCache(
            profile.kv_blocks,
            prefix_caching=profile.prefix_caching,
            events=self.kv_events is not None,
        )

    async def run(self) -> None:
        """The engine loop; runs until cancelled."""
        loop = asyncio.get_running_loop()
        while True:
            await self.faults.running.wait()
            if not self.running and not self.waiting:
                self._wakeup.clear()
                await self._wakeup.wait()
                continue
            admitted, uncached = self._admit(loop.time())
            if self.kv_events is not None and (events := self.kv.take_events()):
                self.kv_events(events)
            decoding = len(self.running) - len(admitted)
            if not admitted and not decoding:
                # Only aborted work is left; yield instead of spinning on zero-length steps.
                await asyncio.sleep(0.001)
                continue
            planned = 0.0
            if admitted:
                planned += self.profile.prefill_time(uncached) + self._loading_s
                self._loading_s = 0.0
            if decoding:
                planned += self.profile.decode_time(decoding)
            jitter = self.profile.jitter
            planned *= self.faults.slowdown * (1.0 + self.rng.uniform(-jitter, jitter))
            started = loop.time()
            await asyncio.sleep(planned)
            now = loop.time()
            self._end_step(admitted=admitted, decoding=decoding, started=started, now=now)

    def _admit(self, now: float) -> tuple[list[SeqState], int]:
        admitted: list[SeqState] = []
        uncached_total = 0
        profile = self.profile
        while self.waiting and len(self.running) < profile.max_num_seqs:
            seq = self.waiting[0]
            max_hit = (seq.prompt_tokens - 1) // BLOCK_SIZE  # the last token is always computed
            allocation = self.kv.allocate(
                seq.block_hashes,
                total_blocks=_blocks(seq.prompt_tokens + seq.max_tokens),
                token_ids=seq.token_ids,
                block_size=BLOCK_SIZE,
                max_hit_blocks=max_hit,
            )
            if allocation is None:
                break  # first come, first served: the head waits for KV space
            hit_tokens = allocation.hit_blocks * BLOCK_SIZE
            uncached = seq.prompt_tokens - hit_tokens
            if admitted and uncached_total + uncached > profile.max_prefill_tokens:
                self.kv.release(allocation)
                break
            if seq.adapter is not None:
                load = self.loras.admit(seq.adapter)
                if load is None:
                    self.kv.release(allocation)
                    break  # every adapter slot is in use: the head waits for one
                self._loading_s += load
            self.waiting.popleft()
            seq.allocation = allocation
            seq.cached_tokens = hit_tokens
            self.running.add(seq)
            admitted.append(seq)
            uncached_total += uncached
            seq.admitted_at = now
            self.stats.queue_time.observe(now - seq.arrival)
            if profile.prefix_caching:
                self.stats.prefix_queries += seq.prompt_tokens
                self.stats.prefix_hits += hit_tokens
        return admitted, uncached_total

    def _end_step(
        self, *, admitted: list[SeqState], decoding: int, started: float, now: float
    ) -> None:
        self.step += 1
        stats = self.stats
        elapsed = now - started
        stats.busy_seconds += elapsed
        produced = decoding
        for seq in admitted:
            if seq.finished:
                continue
            produced += 1
            seq.first_step = self.step
            stats.prompt_tokens += seq.prompt_tokens
            stats.prefill_seconds += elapsed
            stats.ttft.observe(now - seq.arrival)
            seq.first_token.set_result(now)
            heapq.heappush(self._finishing, (self.step + seq.max_tokens - 1, seq.seq_id, seq))
        if decoding:
            stats.itl.observe(elapsed, decoding)
        stats.generation_tokens += produced
        while self._finishing and self._finishing[0][0] <= self.step:
            _, _, seq = heapq.heappop(self._finishing)
            if seq.finished:
                continue
            seq.finished = True
            self._release(seq)
            stats.requests_success += 1
            stats.e2e.observe(now - seq.arrival)
            stats.compute_seconds += now - (
                seq.arrival if seq.admitted_at is None else seq.admitted_at
            )
            seq.done.set_result(now)
        if self._step_waiters is not None:
            self._step_waiters.set_result(self.step)
            self._step_waiters = None

    def _release(self, seq: SeqState) -> None:
        if seq in self.running and seq.adapter is not None:
            self.loras.release(seq.adapter)
        self.running.discard(seq)
        if seq.allocation is not None:
            self.kv.release(seq.allocation)
            seq.allocation = None


def _blocks(tokens: int) -> int:
    return math.ceil(tokens / BLOCK_SIZE)
