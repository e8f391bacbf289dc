"""PrometheusSource against an HTTP server that answers like Prometheus' /api/v1/query."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from xds_control.config import Engine, SignalsConfig
from xds_control.errors import SignalError
from xds_control.signals import PrometheusSource, Signal, Target


class FakePrometheus:
    """Answers every query with one series per address (value by metric name in the query);
    ``behaviour`` can turn a query into an error, a hang or garbage."""

    def __init__(self, addresses: list[str]) -> None:
        self.addresses = addresses
        self.queries: list[str] = []
        self.behaviour: Callable[[str], web.StreamResponse | None] = lambda q: None
        self.slow = ""  # queries containing this hang for 5 s

    def value_for(self, query: str, address: str) -> str:
        if "num_requests_waiting" in query:
            return str(float(address.split(".")[-1].split(":")[0]))
        if "kv_cache_usage_perc" in query:
            return "0.5"
        if "inter_token_latency" in query:
            return "NaN"  # idle server: 0/0 in PromQL
        if "DCGM" in query:
            return "0.9"
        return "1"

    async def handle(self, request: web.Request) -> web.StreamResponse:
        form = await request.post()
        query = str(form["query"])
        self.queries.append(query)
        if self.slow and self.slow in query:
            await asyncio.sleep(5)
        special = self.behaviour(query)
        if special is not None:
            return special
        result = [
            {
                "metric": {"instance": a, "job": "vllm"},
                "value": [1.7e9 + 0.5, self.value_for(query, a)],
            }
            for a in self.addresses
        ]
        result.append({"metric": {"job": "other"}, "value": [1.7e9 + 0.5, "1"]})  # unmapped
        return web.json_response(
            {"status": "success", "data": {"resultType": "vector", "result": result}}
        )


@pytest.fixture
async def prometheus() -> AsyncIterator[tuple[FakePrometheus, str]]:
    fake = FakePrometheus([f"10.0.0.{i}:8000" for i in range(1, 4)])
    app = web.Application()
    app.router.add_post("/api/v1/query", fake.handle)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    yield fake, str(server.make_url(""))
    await server.close()


def targets(addresses: list[str]) -> list[Target]:
    return [Target(address=a, engine=Engine.VLLM, ttft_slo_s=1.0) for a in addresses]


async def test_one_query_per_signal_maps_series_to_endpoints(
    prometheus: tuple[FakePrometheus, str],
) -> None:
    fake, url = prometheus
    async with aiohttp.ClientSession() as client:
        source = PrometheusSource(client=client, config=SignalsConfig(prometheus_url=url))
        samples = await source.fetch(targets(fake.addresses))
    assert set(samples) == set(fake.addresses)
    assert len(fake.queries) == len(set(fake.queries)) == source.queries_sent
    s = samples["10.0.0.2:8000"]
    assert s.value(Signal.WAITING) == 2.0
    assert s.value(Signal.KV_USAGE) == 0.5
    assert s.value(Signal.GPU_MEMORY_USED) == 0.9
    assert s.readings[Signal.WAITING].observed_at == 1.7e9 + 0.5
    assert s.rejected[Signal.DECODE_STEP_S] == "NaN"  # never passed on as a value


async def test_query_count_does_not_depend_on_the_number_of_endpoints(
    prometheus: tuple[FakePrometheus, str],
) -> None:
    fake, url = prometheus
    counts = []
    async with aiohttp.ClientSession() as client:
        for n in (3, 1000):
            fake.addresses = [f"10.0.{i // 250}.{i % 250}:8000" for i in range(n)]
            fake.queries.clear()
            source = PrometheusSource(client=client, config=SignalsConfig(prometheus_url=url))
            samples = await source.fetch(targets(fake.addresses))
            assert len(samples) == n
            counts.append(len(fake.queries))
    assert counts[0] == counts[1] > 0


async def test_a_failing_query_leaves_the_others(
    prometheus: tuple[FakePrometheus, str],
) -> None:
    fake, url = prometheus

    def behaviour(query: str) -> web.StreamResponse | None:
        if "num_requests_waiting" in query:
            return web.json_response(
                {"status": "error", "errorType": "execution", "error": "boom"}, status=422
            )
        if "kv_cache" in query:
            return web.Response(text="<html>proxy error</html>", content_type="text/html")
        if "DCGM" in query:
            return web.json_response({"status": "success", "data": {"resultType": "matrix"}})
        return None

    fake.behaviour = behaviour
    async with aiohttp.ClientSession() as client:
        source = PrometheusSource(client=client, config=SignalsConfig(prometheus_url=url))
        samples = await source.fetch(targets(fake.addresses))
    s = samples["10.0.0.1:8000"]
    assert Signal.WAITING not in s.readings
    assert Signal.KV_USAGE not in s.readings
    assert Signal.GPU_MEMORY_USED not in s.readings
    assert s.value(Signal.RUNNING) == 1.0


async def test_a_hanging_query_times_out_without_holding_up_the_cycle(
    prometheus: tuple[FakePrometheus, str],
) -> None:
    fake, url = prometheus
    fake.slow = "num_requests_waiting"
    config = SignalsConfig(prometheus_url=url, query_timeout_s=1.0)
    loop = asyncio.get_running_loop()
    async with aiohttp.ClientSession() as client:
        source = PrometheusSource(client=client, config=config)
        started = loop.time()
        samples = await source.fetch(targets(fake.addresses))
        elapsed = loop.time() - started
    # The queries ran concurrently, each bounded by the timeout (the hang lasts 5 s).
    assert elapsed < 3.0
    assert Signal.WAITING not in samples["10.0.0.1:8000"].readings
    assert samples["10.0.0.1:8000"].value(Signal.KV_USAGE) == 0.5


async def test_every_query_failing_raises_signal_error(
    prometheus: tuple[FakePrometheus, str],
) -> None:
    fake, url = prometheus
    fake.behaviour = lambda q: web.json_response(
        {"status": "error", "errorType": "unavailable", "error": "shutting down"}, status=503
    )
    async with aiohttp.ClientSession() as client:
        source = PrometheusSource(client=client, config=SignalsConfig(prometheus_url=url))
        with pytest.raises(SignalError, match=r"all .* queries failed"):
            await source.fetch(targets(fake.addresses))


async def test_unreachable_prometheus_raises_signal_error() -> None:
    async with aiohttp.ClientSession() as client:
        config = SignalsConfig(prometheus_url="http://127.0.0.1:9", query_timeout_s=0.5)
        source = PrometheusSource(client=client, config=config)
        with pytest.raises(SignalError):
            await source.fetch(targets(["10.0.0.1:8000"]))
