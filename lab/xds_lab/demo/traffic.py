"""Steady chat traffic through Envoy for as long as the tour runs, remembered per request."""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any

import aiohttp

from xds_control.tasks import guarded_task
from xds_lab.demo.window import Served
from xds_lab.loadgen import LoadSpec, build_requests, schedule
from xds_lab.loadgen.client import Result, send

__all__ = ["SteadyTraffic"]

_BATCH = 200
"""Requests planned at a time; each batch has its own seed, so the stream never repeats."""
_KEEP_S = 300.0
"""How long finished requests are remembered (longer than any window the tour looks at)."""


class SteadyTraffic:
    """Open-loop streamed chat requests at ``rate`` per second to ``url``, until ``stop``.

    Lengths are chat-shaped but scaled down (prompt ~200, output ~60 tokens) so that the fleet,
    the load and the view fit on two cores next to Envoy and the control plane. Every request is
    streamed, so TTFT is measured as a user sees it.
    """

    def __init__(self, *, url: str, rate: float) -> None:
        self.url = url
        self.rate = rate
        self.served: deque[Served] = deque()
        self._task: asyncio.Task[Any] | None = None
        self._inflight: set[asyncio.Task[Result]] = set()

    def start(self) -> None:
        """Start sending in the background."""
        self._task = guarded_task(self._run(), name="demo-traffic")

    async def stop(self) -> None:
        """Stop sending and abandon the requests in flight."""
        tasks = [t for t in (self._task, *self._inflight) if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def _record(self, task: asyncio.Task[Result]) -> None:
        self._inflight.discard(task)
        if task.cancelled() or task.exception() is not None:
            return
        result = task.result()
        finished = result.started + result.e2e_s
        self.served.append(
            Served(
                server=result.server,
                started=result.started,
                finished=finished,
                ok=result.ok,
                ttft_s=result.ttft_s,
            )
        )
        while self.served and self.served[0].finished < finished - _KEEP_S:
            self.served.popleft()

    async def _run(self) -> None:
        connector = aiohttp.TCPConnector(limit=0)
        async with aiohttp.ClientSession(connector=connector) as session:
            seed = 0
            while True:
                spec = LoadSpec(
                    rate=self.rate,
                    requests=_BATCH,
                    seed=seed,
                    input_mean=200,
                    input_sigma=0.5,
                    input_cap=800,
                    output_mean=60,
                    output_sigma=0.5,
                    output_cap=240,
                    stream_fraction=1.0,
                )
                async for request, _lag in schedule(build_requests(spec)):
                    task = asyncio.create_task(
                        send(session, self.url, request, scheduled=request.at, timeout_s=30.0),
                        name=f"demo-request-{seed}-{request.index}",
                    )
                    self._inflight.add(task)
                    task.add_done_callback(self._record)
                seed += 1
