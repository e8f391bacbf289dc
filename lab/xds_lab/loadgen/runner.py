"""Open-loop sending: every request leaves at its scheduled time, whatever came back before."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass, field

import aiohttp
import structlog

from xds_lab.loadgen.client import Result, Route, send
from xds_lab.loadgen.loop_lag import LagTicker
from xds_lab.loadgen.workloads import RequestSpec

__all__ = ["LoadRun", "run_load", "schedule"]

_log = structlog.get_logger(__name__)


@dataclass(slots=True)
class LoadRun:
    """Results in request order, the wall-clock span of the run, how late the latest request
    left, and the generator's event-loop lag during the run (``loop_lag.lag_summary``)."""

    results: list[Result]
    duration_s: float
    max_lag_s: float
    loop_lag: dict[str, float] = field(default_factory=dict)


async def schedule(requests: Iterable[RequestSpec]) -> AsyncIterator[tuple[RequestSpec, float]]:
    """Yield each request at its time (``at`` seconds after iteration began) with its lag: how
    late the caller, not the server, let it leave (0 when on time).

    The caller launches each request without awaiting its answer, so the load stays open
    loop: arrivals never wait for the server.
    """
    start = time.monotonic()
    for spec in requests:
        delay = start + spec.at - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        yield spec, max(0.0, -delay)


async def run_load(
    base_url: str,
    requests: Sequence[RequestSpec],
    *,
    server_header: str = "x-sim-server",
    timeout_s: float = 120.0,
    session: aiohttp.ClientSession | None = None,
    route: Route | None = None,
) -> LoadRun:
    """Send ``requests`` to ``base_url`` on their schedule and wait for every answer.

    ``max_lag_s`` reports how late the generator itself launched its latest request: a large
    value means the client, not the server, limited the offered rate; ``loop_lag`` says how far
    its event loop fell behind while it timed answers. ``route`` picks a base URL per request.
    """
    own = session is None
    if session is None:
        session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))
    log = _log.bind(target=base_url, requests=len(requests))
    tasks: list[asyncio.Task[Result]] = []
    start = time.monotonic()
    max_lag = 0.0
    ticker = LagTicker()
    ticker.start()
    try:
        async for spec, lag in schedule(requests):
            max_lag = max(max_lag, lag)
            coro = send(
                session,
                base_url,
                spec,
                scheduled=spec.at,
                server_header=server_header,
                timeout_s=timeout_s,
                route=route,
            )
            # ``send`` turns every request failure into a Result, so gather cannot lose one.
            tasks.append(asyncio.create_task(coro, name=f"loadgen-request-{spec.index}"))
        results = await asyncio.gather(*tasks)
    finally:
        await ticker.stop()
        for task in tasks:
            task.cancel()
        if own:
            await session.close()
    duration = time.monotonic() - start
    log.info("load run finished", duration_s=round(duration, 3), max_lag_s=round(max_lag, 4))
    return LoadRun(
        results=list(results), duration_s=duration, max_lag_s=max_lag, loop_lag=ticker.take()
    )
