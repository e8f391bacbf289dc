"""Prometheus answers on hostile input: any JSON shape, NaN/Inf strings, wrong types. The
parser yields per-address values or a ``ValueError``; the source yields validated samples or
a ``SignalError``; a reading that reaches the engine is always finite and in range."""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Iterator
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from xds_control.config import EndpointMapping, Engine, SignalsConfig
from xds_control.errors import SignalError
from xds_control.signals import RATIO_SIGNALS, PrometheusSource, Sample, Target
from xds_control.signals.mapping import AddressMapper
from xds_control.signals.prometheus import QueryResult, parse_vector

pytestmark = pytest.mark.fuzz

FUZZ = settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
ADDRESSES = ["10.0.0.1:8000", "10.0.0.2:8000"]

json_values = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(10**400), max_value=10**400),
        st.floats(),
        st.text(max_size=12),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=15,
)
value_strings = st.one_of(
    st.sampled_from(["NaN", "+Inf", "-Inf", "inf", "1e999", "-1", "0", "0.5", "1", "1.04", "7"]),
    st.floats().map(repr),
    st.text(max_size=6),
)
series = st.fixed_dictionaries(
    {
        "metric": st.one_of(
            st.fixed_dictionaries({"instance": st.sampled_from(ADDRESSES)}),
            st.dictionaries(st.sampled_from(["instance", "job"]), json_values, max_size=2),
        ),
        "value": st.one_of(
            st.tuples(
                st.one_of(st.floats(), st.integers(min_value=0, max_value=10**400)),
                st.one_of(value_strings, json_values),
            ).map(list),
            json_values,
        ),
    }
)
vector_bodies = st.fixed_dictionaries(
    {
        "status": st.one_of(st.just("success"), json_values),
        "data": st.one_of(
            st.fixed_dictionaries(
                {
                    "resultType": st.one_of(st.just("vector"), st.sampled_from(["matrix", "x"])),
                    "result": st.one_of(st.lists(series, max_size=5), json_values),
                }
            ),
            json_values,
        ),
    }
)
MAPPERS = [
    AddressMapper(EndpointMapping()),
    AddressMapper(EndpointMapping(label="instance", regex="(.*):8000", replacement="$1:8000")),
]


@FUZZ
@given(body=st.one_of(json_values, vector_bodies), which=st.sampled_from([0, 1]))
def test_parse_vector_returns_values_or_says_what_is_wrong(body: Any, which: int) -> None:
    result: QueryResult | ValueError
    try:
        result = parse_vector(body, mapper=MAPPERS[which])
    except ValueError as exc:
        result = exc
    if isinstance(result, ValueError):
        assert str(result)  # says what is wrong
        return
    assert isinstance(result, QueryResult)
    for address, (value, at) in result.values.items():
        assert isinstance(address, str)
        assert isinstance(value, float)
        assert isinstance(at, float)


class Answers:
    """A Prometheus stand-in that answers every query with ``body`` (bytes, any status)."""

    def __init__(self) -> None:
        self.body = b"{}"
        self.status = 200

    async def handle(self, request: web.Request) -> web.Response:
        await request.post()
        return web.Response(body=self.body, status=self.status, content_type="application/json")


@pytest.fixture(scope="module")
def prometheus(
    fuzz_loop: asyncio.AbstractEventLoop,
) -> Iterator[tuple[Answers, PrometheusSource]]:
    answers = Answers()
    app = web.Application()
    app.router.add_post("/api/v1/query", answers.handle)
    server = TestServer(app, host="127.0.0.1")

    async def start() -> tuple[aiohttp.ClientSession, PrometheusSource]:
        await server.start_server()
        client = aiohttp.ClientSession()
        config = SignalsConfig(prometheus_url=str(server.make_url("")), query_timeout_s=2.0)
        return client, PrometheusSource(client=client, config=config)

    client, source = fuzz_loop.run_until_complete(start())
    yield answers, source
    fuzz_loop.run_until_complete(client.close())
    fuzz_loop.run_until_complete(server.close())


def assert_admissible(samples: dict[str, Sample] | Any) -> None:
    for address, sample in samples.items():
        assert address in ADDRESSES
        for signal, reading in sample.readings.items():
            assert math.isfinite(reading.value), (signal, reading)
            assert reading.value >= 0, (signal, reading)
            if signal in RATIO_SIGNALS:
                assert reading.value <= 1, (signal, reading)
            assert math.isfinite(reading.observed_at)
        assert not sample.readings.keys() & sample.rejected.keys()


@FUZZ
@given(
    body=st.one_of(
        vector_bodies.map(lambda b: json.dumps(b).encode()),
        json_values.map(lambda b: json.dumps(b).encode()),
        st.binary(max_size=200),
    ),
    status=st.sampled_from([200, 200, 200, 400, 503]),
)
def test_source_yields_admissible_samples_or_a_signal_error(
    fuzz_loop: asyncio.AbstractEventLoop,
    prometheus: tuple[Answers, PrometheusSource],
    body: bytes,
    status: int,
) -> None:
    answers, source = prometheus
    answers.body, answers.status = body, status
    targets = [Target(address=a, engine=Engine.VLLM, ttft_slo_s=1.0) for a in ADDRESSES]
    try:
        samples = fuzz_loop.run_until_complete(source.fetch(targets))
    except SignalError as exc:
        samples = {}
        error = str(exc)
        assert "Prometheus" in error
    assert_admissible(dict(samples))


@pytest.mark.parametrize(
    "body",
    [
        b"[" * 100_000,
        b'{"a":' * 50_000 + b"1" + b"}" * 50_000,
        b"1" * 5_000,  # more digits than Python converts
        b'{"status": "success", "data": {"resultType": "vector", "result": [{"metric": '
        b'{"instance": "10.0.0.1:8000"}, "value": [' + b"9" * 400 + b', "1"]}]}}',
        b'{"status": "success", "data": {"resultType": "vector", "result": [{"metric": '
        b'{"instance": ["10.0.0.1:8000"]}, "value": [1, "1"]}]}}',
        b"\xff\xfe{\x00}\x00",
    ],
    ids=["deep-list", "deep-object", "long-integer", "huge-timestamp", "list-label", "utf-16"],
)
def test_known_hostile_bodies(
    fuzz_loop: asyncio.AbstractEventLoop,
    prometheus: tuple[Answers, PrometheusSource],
    body: bytes,
) -> None:
    """Bodies that once escaped as RecursionError, OverflowError, TypeError or
    UnicodeDecodeError (found by this fuzzing): now a failed query, logged and counted."""
    answers, source = prometheus
    answers.body, answers.status = body, 200
    targets = [Target(address=a, engine=Engine.VLLM, ttft_slo_s=1.0) for a in ADDRESSES]
    try:
        samples = fuzz_loop.run_until_complete(source.fetch(targets))
    except SignalError:
        return
    assert_admissible(dict(samples))
