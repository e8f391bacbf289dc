"""The one way the product asks Prometheus (``query_vector``) and the budgets' P99 reader on
it, against an HTTP server that answers like /api/v1/query: a parsed vector, or a
``QueryError`` that names what went wrong."""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import pytest
from aiohttp import web

from component.signals.fake_prometheus import Answer, serving, vector
from xds_control.config import EndpointMapping
from xds_control.errors import QueryError, SignalError
from xds_control.signals.mapping import AddressMapper
from xds_control.signals.prometheus import query_vector

MAPPER = AddressMapper(EndpointMapping())


@pytest.fixture
async def prometheus() -> AsyncIterator[tuple[list[Answer], str]]:
    async with serving(lambda _q: vector({"10.0.0.1:8000": "0.5"})) as (answers, url):
        yield answers, url + "/api/v1/query"


async def _outcome(url: str) -> str:
    async with aiohttp.ClientSession() as client:
        with pytest.raises(QueryError) as failed:
            await query_vector(client, url=url, promql="up", timeout_s=0.3, mapper=MAPPER)
    return failed.value.outcome


async def test_a_vector_comes_back_parsed(prometheus: tuple[list[Answer], str]) -> None:
    _answers, url = prometheus
    async with aiohttp.ClientSession() as client:
        result = await query_vector(client, url=url, promql="up", timeout_s=1.0, mapper=MAPPER)
    assert result.values == {"10.0.0.1:8000": (0.5, 1.7e9)}


async def test_each_failure_is_a_query_error_naming_its_outcome(
    prometheus: tuple[list[Answer], str],
) -> None:
    answers, url = prometheus
    answers[0] = lambda _q: web.json_response({"status": "error", "error": "bad"}, status=400)
    assert await _outcome(url) == "http"
    answers[0] = lambda _q: web.Response(text="<html>proxy</html>", content_type="text/html")
    assert await _outcome(url) == "garbage"
    answers[0] = lambda _q: None  # hangs
    assert await _outcome(url) == "timeout"
    assert await _outcome("http://127.0.0.1:9/api/v1/query") == "error"


async def test_a_query_error_is_a_signal_error(prometheus: tuple[list[Answer], str]) -> None:
    answers, url = prometheus
    answers[0] = lambda _q: web.Response(status=503, text="down")
    async with aiohttp.ClientSession() as client:
        with pytest.raises(SignalError, match="HTTP 503: down"):
            await query_vector(client, url=url, promql="up", timeout_s=1.0, mapper=MAPPER)
