"""The budgets' P99 reader against an HTTP server that answers like /api/v1/query: every
endpoint's P99s per address through ``query_vector``, one failed query leaving the other, and
``SignalError`` only when both failed."""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import pytest
from aiohttp import web

from component.signals.fake_prometheus import Answer, serving, vector
from xds_control.config import SignalsConfig
from xds_control.errors import SignalError
from xds_control.signals.latency import LatencySource


@pytest.fixture
async def prometheus() -> AsyncIterator[tuple[list[Answer], str]]:
    async with serving(lambda _q: vector({})) as (answers, url):
        yield answers, url


async def test_p99s_come_per_address_and_one_failed_query_leaves_the_other(
    prometheus: tuple[list[Answer], str],
) -> None:
    answers, url = prometheus
    signals = SignalsConfig(prometheus_url=url, query_timeout_s=5.0)

    def ttft_only(query: str) -> web.StreamResponse:
        if "time_to_first_token" in query:
            return vector({"10.0.0.1:8000": "1.5", "10.0.0.2:8000": "NaN"})
        return web.Response(status=422, text="no")

    answers[0] = ttft_only
    async with aiohttp.ClientSession() as client:
        source = LatencySource(client=client, signals=signals)
        readings = await source.fetch(window="1m")
        assert readings.ttft_s == {"10.0.0.1:8000": 1.5}  # NaN: no requests, not measured
        assert readings.tpot_s == {}
        answers[0] = lambda _q: web.Response(status=503, text="down")
        with pytest.raises(SignalError, match="every P99 query failed"):
            await source.fetch(window="1m")
