"""Steady load through Envoy for the fault suite: open-loop requests at a fixed mean rate for
as long as a fault case runs, with every outcome kept so a case can count what was lost and
when."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Self

import aiohttp

from xds_lab.loadgen.client import Result, send
from xds_lab.loadgen.runner import schedule
from xds_lab.loadgen.workloads import LoadSpec, RequestSpec, build_requests

RATE = 20.0
"""Requests per second every case holds: enough that a lost second shows as ~20 failures,
little enough for two cores that also run Envoy, the control plane and the simulated fleet."""
MAX_SECONDS = 120
"""Longest a load runs: past it the sender stops early (the counts still add up)."""


@dataclass(slots=True)
class Outcome:
    """One request: when it left (monotonic seconds) and what came back."""

    sent_at: float
    result: Result


@dataclass(slots=True)
class Counts:
    """What a user of the gateway saw."""

    sent: int
    answered: int
    failed: int
    rate: float
    max_lag_s: float = 0.0
    errors: dict[str, int] = field(default_factory=dict)


class SteadyLoad:
    """Chat requests (short answers, not streamed unless ``streamed``) at ``rate`` per second
    to ``url`` from ``async with`` until ``stop``; nothing is cancelled, every request sent gets
    an answer or an error."""

    def __init__(
        self,
        url: str,
        *,
        rate: float = RATE,
        seed: int = 7,
        timeout_s: float = 30.0,
        streamed: bool = False,
    ) -> None:
        self._url = url
        self.rate = rate
        self._seed = seed
        self._timeout_s = timeout_s
        self._streamed = streamed
        self.outcomes: list[Outcome] = []
        self._tasks: list[asyncio.Task[None]] = []
        self._stop = asyncio.Event()
        self._sender: asyncio.Task[None] | None = None
        self._session: aiohttp.ClientSession | None = None
        self.started_at = 0.0
        self.stopped_at = 0.0
        self.max_lag_s = 0.0
        """How late the generator itself sent its latest request: large means a busy machine."""

    async def __aenter__(self) -> Self:
        spec = LoadSpec(
            rate=self.rate,
            requests=int(self.rate * MAX_SECONDS),
            seed=self._seed,
            input_mean=100,
            output_mean=20,
            output_cap=60,
            stream_fraction=1.0 if self._streamed else 0.0,
        )
        requests = build_requests(spec)
        self._session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))
        self.started_at = time.monotonic()
        self._sender = asyncio.create_task(self._send_all(requests), name="fault-load")
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def _send_all(self, requests: list[RequestSpec]) -> None:
        async for request, lag in schedule(requests):
            self.max_lag_s = max(self.max_lag_s, lag)
            if self._stop.is_set():
                return
            self._tasks.append(asyncio.create_task(self._one(request), name="fault-request"))

    async def _one(self, request: RequestSpec) -> None:
        assert self._session is not None
        sent_at = time.monotonic()
        result = await send(
            self._session,
            self._url,
            request,
            scheduled=sent_at - self.started_at,
            timeout_s=self._timeout_s,
        )
        self.outcomes.append(Outcome(sent_at=sent_at, result=result))

    async def stop(self) -> None:
        """Send nothing more and wait for every request in flight."""
        if self._stop.is_set():
            return
        self._stop.set()
        self.stopped_at = time.monotonic()
        if self._sender is not None:
            self._sender.cancel()
            await asyncio.gather(self._sender, return_exceptions=True)
        await asyncio.gather(*self._tasks)
        if self._session is not None:
            await self._session.close()

    def counts(self) -> Counts:
        """Sent, answered (200 and whole) and failed, over the whole run so far."""
        sent = len(self._tasks)
        answered = sum(1 for o in self.outcomes if o.result.ok)
        errors: dict[str, int] = {}
        for outcome in self.outcomes:
            if not outcome.result.ok:
                key = outcome.result.error.split(":")[0] or f"status {outcome.result.status}"
                errors[key] = errors.get(key, 0) + 1
        span = (self.stopped_at or time.monotonic()) - self.started_at
        return Counts(
            sent=sent,
            answered=answered,
            failed=sent - answered,
            rate=round(sent / span, 1) if span > 0 else 0.0,
            max_lag_s=round(self.max_lag_s, 3),
            errors=errors,
        )

    def failures(self) -> list[Outcome]:
        """The requests that did not get a whole 200, in the order they were sent."""
        return sorted((o for o in self.outcomes if not o.result.ok), key=lambda o: o.sent_at)

    def answered_by(self, server: str, *, since: float) -> int:
        """Requests sent at or after ``since`` that ``server`` answered."""
        return sum(1 for o in self.outcomes if o.sent_at >= since and o.result.server == server)
