"""ScrapeSource against real HTTP servers serving exposition text, one per endpoint."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from xds_control.config import Engine, ScrapeConfig, SignalsConfig
from xds_control.signals import ScrapeSource, Signal, Target

TEXT = """\
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{{engine="0",model_name="m"}} {waiting}
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{{engine="0",model_name="m"}} 0.25
# TYPE vllm:inter_token_latency_seconds histogram
vllm:inter_token_latency_seconds_bucket{{engine="0",le="+Inf",model_name="m"}} {n}
vllm:inter_token_latency_seconds_count{{engine="0",model_name="m"}} {n}
vllm:inter_token_latency_seconds_sum{{engine="0",model_name="m"}} {total}
"""


class Server:
    def __init__(self) -> None:
        self.waiting = 0.0
        self.n = 100.0
        self.total = 1.0
        self.mode = "ok"

    async def metrics(self, request: web.Request) -> web.StreamResponse:
        if self.mode == "error":
            return web.Response(status=500, text="oops")
        if self.mode == "hang":
            await asyncio.sleep(5)
        if self.mode == "garbage":
            return web.Response(text="<html>\x00 not metrics {{{")
        return web.Response(
            text=TEXT.format(waiting=self.waiting, n=self.n, total=self.total),
            content_type="text/plain",
        )


@pytest.fixture
async def fleet() -> AsyncIterator[list[tuple[Server, Target]]]:
    out = []
    servers = []
    for _ in range(3):
        backend = Server()
        app = web.Application()
        app.router.add_get("/metrics", backend.metrics)
        server = TestServer(app, host="127.0.0.1")
        await server.start_server()
        servers.append(server)
        address = f"127.0.0.1:{server.port}"
        out.append((backend, Target(address=address, engine=Engine.VLLM, ttft_slo_s=1.0)))
    yield out
    for server in servers:
        await server.close()


CONFIG = SignalsConfig(scrape=ScrapeConfig(enabled=True, timeout_s=1.0, window_s=60))


async def test_scrape_reads_gauges_and_rates_between_scrapes(
    fleet: list[tuple[Server, Target]],
) -> None:
    targets = [t for _, t in fleet]
    clock = iter([100.0, 100.0, 100.0, 101.0, 101.0, 101.0])
    async with aiohttp.ClientSession() as client:
        source = ScrapeSource(client=client, config=CONFIG, clock=lambda: next(clock))
        first = await source.fetch(targets)
        assert Signal.DECODE_STEP_S not in first[targets[0].address].readings
        fleet[0][0].waiting = 40
        fleet[0][0].n, fleet[0][0].total = 300.0, 6.0  # 200 tokens in 5 s: 25 ms a step
        second = await source.fetch(targets)
    s = second[targets[0].address]
    assert s.value(Signal.WAITING) == 40  # a queue spike shows on the next scrape
    assert s.value(Signal.KV_USAGE) == 0.25
    assert s.value(Signal.DECODE_STEP_S) == pytest.approx(0.025)
    assert s.readings[Signal.WAITING].observed_at == 101.0
    assert source.latest() is second


@pytest.mark.parametrize("mode", ["error", "hang", "garbage"])
async def test_one_failing_endpoint_marks_only_itself(
    fleet: list[tuple[Server, Target]], mode: str
) -> None:
    targets = [t for _, t in fleet]
    fleet[1][0].mode = mode
    async with aiohttp.ClientSession() as client:
        source = ScrapeSource(client=client, config=CONFIG)
        for expected in (1, 2, 3):
            samples = await source.fetch(targets)
            assert samples[targets[1].address].scrape_failures == expected
            assert not samples[targets[1].address].readings
            for i in (0, 2):
                assert samples[targets[i].address].scrape_failures == 0
                assert samples[targets[i].address].value(Signal.WAITING) == 0
        fleet[1][0].mode = "ok"
        samples = await source.fetch(targets)
    assert samples[targets[1].address].scrape_failures == 0


async def test_a_refused_connection_counts_as_a_failed_scrape() -> None:
    target = Target(address="127.0.0.1:9", engine=Engine.VLLM, ttft_slo_s=1.0)
    async with aiohttp.ClientSession() as client:
        samples = await ScrapeSource(client=client, config=CONFIG).fetch([target])
    assert samples[target.address].scrape_failures == 1


async def test_a_counter_reset_reports_a_restart(fleet: list[tuple[Server, Target]]) -> None:
    targets = [fleet[0][1]]
    times = iter([100.0, 105.0])
    async with aiohttp.ClientSession() as client:
        source = ScrapeSource(client=client, config=CONFIG, clock=lambda: next(times))
        await source.fetch(targets)
        fleet[0][0].n, fleet[0][0].total = 5.0, 0.1  # the server restarted
        samples = await source.fetch(targets)
    assert samples[targets[0].address].value(Signal.STARTED_AT) == 105.0
