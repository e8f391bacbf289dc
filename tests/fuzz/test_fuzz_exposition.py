"""An engine's /metrics text on hostile input: the parser yields a snapshot or a
``ValueError``; the scrape source turns any body (any bytes, any charset) into a sample
without raising, and no NaN or infinity ever becomes a reading."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Iterator

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from xds_control.config import Engine, SignalsConfig
from xds_control.signals import RATIO_SIGNALS, Sample, ScrapeSource, Target
from xds_control.signals.exposition import Snapshot, derive, parse_exposition

pytestmark = pytest.mark.fuzz

FUZZ = settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)

# The names the parser reads, for each engine, so random values reach the arithmetic.
NAMES = [
    "vllm:num_requests_running",
    "vllm:num_requests_waiting",
    "vllm:kv_cache_usage_perc",
    "vllm:gpu_cache_usage_perc",
    "vllm:prefix_cache_hits_total",
    "vllm:prefix_cache_queries_total",
    "vllm:inter_token_latency_seconds_sum",
    "vllm:inter_token_latency_seconds_count",
    "vllm:time_to_first_token_seconds_bucket",
    "vllm:generation_tokens_total",
    "sglang:num_running_reqs",
    "sglang:token_usage",
    "sglang:cache_hit_rate",
    "nv_trt_llm_request_metrics",
    "nv_trt_llm_kv_cache_block_metrics",
    "nv_gpu_memory_used_bytes",
    "nv_gpu_memory_total_bytes",
    "nv_inference_compute_infer_duration_us",
    "nv_inference_exec_count",
    "nv_inference_request_failure",
    "nv_inference_request_success",
    "nv_inference_first_response_histogram_ms_bucket",
    "DCGM_FI_DEV_FB_USED",
    "DCGM_FI_DEV_FB_FREE",
    "process_start_time_seconds",
]
VALUES = ["NaN", "+Inf", "-Inf", "1e308", "-1e308", "4.9e-324", "-1", "0", "0.5", "1", "1e999"]
LABELS = [
    "",
    '{le="+Inf"}',
    '{le="0.5"}',
    '{le="abc"}',
    '{le="NaN"}',
    '{request_type="scheduled"}',
    '{request_type="waiting"}',
    '{request_type="max"}',
    '{kv_cache_block_type="fraction"}',
    '{gpu="0"}',
    '{gpu="1"}',
    '{a="\\"\\\\\\n"}',
    "{",
    '{le="1",le="2"}',
]
TYPES = ["# TYPE {} counter", "# TYPE {} gauge", "# TYPE {} histogram", "# HELP {} x"]

sample_lines = st.builds(
    lambda name, labels, value: f"{name}{labels} {value}",
    st.sampled_from(NAMES),
    st.sampled_from(LABELS),
    st.one_of(st.sampled_from(VALUES), st.floats().map(repr)),
)
type_lines = st.builds(
    lambda template, name: template.format(name.removesuffix("_bucket")),
    st.sampled_from(TYPES),
    st.sampled_from(NAMES),
)
expositions = st.lists(st.one_of(sample_lines, sample_lines, type_lines), max_size=25).map(
    lambda lines: "\n".join(lines) + "\n"
)
junk = st.lists(st.one_of(sample_lines, st.text(max_size=20)), max_size=10).map("\n".join)
# Found by this test: two finite values whose sum overflows, and +Inf with -Inf, made the
# sum raise (OverflowError escaped the scrape source).
OVERFLOW = 'vllm:num_requests_running{gpu="0"} 1e308\nvllm:num_requests_running{gpu="1"} 1e308\n'
INF_MINUS_INF = 'vllm:num_requests_waiting{gpu="0"} +Inf\nvllm:num_requests_waiting{gpu="1"} -Inf\n'
engines = st.sampled_from(list(Engine))


def parse_or_error(text: str, engine: Engine) -> Snapshot | None:
    try:
        return parse_exposition(text, engine=engine)
    except ValueError as exc:
        error = exc
    assert str(error).startswith("not Prometheus exposition text: ")
    return None


def assert_admissible(sample: Sample) -> None:
    for signal, reading in sample.readings.items():
        assert math.isfinite(reading.value), (signal, reading)
        assert reading.value >= 0, (signal, reading)
        if signal in RATIO_SIGNALS:
            assert reading.value <= 1, (signal, reading)


@FUZZ
@given(text=st.one_of(expositions, junk, st.text(max_size=300)), engine=engines)
@example(text=OVERFLOW, engine=Engine.VLLM)
@example(text=INF_MINUS_INF, engine=Engine.VLLM)
def test_parser_yields_a_snapshot_or_a_value_error(text: str, engine: Engine) -> None:
    parse_or_error(text, engine)


@FUZZ
@given(old=expositions, new=expositions, engine=engines, slo=st.floats(0.001, 100))
@example(old="", new=OVERFLOW, engine=Engine.VLLM, slo=1.0)
def test_two_snapshots_never_make_a_non_finite_reading(
    old: str, new: str, engine: Engine, slo: float
) -> None:
    before, after = parse_or_error(old, engine), parse_or_error(new, engine)
    if before is None or after is None:
        return
    values = dict(after.gauges)
    derived = derive(old=before, new=after, ttft_slo_s=slo)
    if derived is not None:
        values.update(derived)
    sample = Sample.build(address="a", values=values.items(), observed_at=1.0, source="scrape")
    assert_admissible(sample)
    assert set(sample.readings) | set(sample.rejected) == set(values)


class Metrics:
    """An inference server whose /metrics answers ``body`` with ``content_type``."""

    def __init__(self) -> None:
        self.body = b""
        self.content_type = "text/plain; version=0.0.4"

    async def handle(self, request: web.Request) -> web.Response:
        return web.Response(body=self.body, headers={"Content-Type": self.content_type})


@pytest.fixture(scope="module")
def scraped(fuzz_loop: asyncio.AbstractEventLoop) -> Iterator[tuple[Metrics, ScrapeSource, str]]:
    metrics = Metrics()
    app = web.Application()
    app.router.add_get("/metrics", metrics.handle)
    server = TestServer(app, host="127.0.0.1")

    async def start() -> tuple[aiohttp.ClientSession, ScrapeSource]:
        await server.start_server()
        client = aiohttp.ClientSession()
        config = SignalsConfig.model_validate({"scrape": {"enabled": True, "timeout_s": 2.0}})
        return client, ScrapeSource(client=client, config=config)

    client, source = fuzz_loop.run_until_complete(start())
    yield metrics, source, f"127.0.0.1:{server.port}"
    fuzz_loop.run_until_complete(client.close())
    fuzz_loop.run_until_complete(server.close())


@FUZZ
@given(
    bodies=st.lists(
        st.one_of(
            expositions.map(str.encode),
            junk.map(str.encode),
            st.binary(max_size=300),
            expositions.map(lambda t: t.encode("utf-16")),
        ),
        min_size=1,
        max_size=3,
    ),
    charset=st.sampled_from(["", "; charset=utf-8", "; charset=latin-1", "; charset=bogus"]),
    engine=engines,
)
def test_scrape_source_never_raises_and_admits_only_finite_readings(
    fuzz_loop: asyncio.AbstractEventLoop,
    scraped: tuple[Metrics, ScrapeSource, str],
    bodies: list[bytes],
    charset: str,
    engine: Engine,
) -> None:
    metrics, source, address = scraped
    metrics.content_type = "text/plain" + charset
    target = Target(address=address, engine=engine, ttft_slo_s=1.0)
    for body in bodies:  # several scrapes, so rates are derived between them
        metrics.body = body
        samples = fuzz_loop.run_until_complete(source.fetch([target]))
        assert list(samples) == [address]
        assert_admissible(samples[address])
