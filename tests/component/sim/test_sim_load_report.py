"""The simulator answers ``endpoint-load-metrics`` as vLLM does, only when asked."""

from __future__ import annotations

import aiohttp

from component.sim.simclient import StartServer
from xds_control.signals import LoadReport, parse_load_report

_BODY = {"model": "m", "prompt": "kakaka", "max_tokens": 2}


async def test_a_request_that_asks_gets_vllm_s_report_and_one_that_does_not_gets_none(
    http: aiohttp.ClientSession, start_server: StartServer
) -> None:
    server = await start_server("vllm-h100")
    asked = {"endpoint-load-metrics-format": "TEXT"}
    async with http.post(f"{server.url}/v1/completions", json=_BODY, headers=asked) as r:
        assert r.status == 200
        value = r.headers["endpoint-load-metrics"]
    assert value.startswith("TEXT named_metrics.num_requests_waiting=")
    report = parse_load_report(value)
    assert report.waiting == 0.0
    assert report.kv_usage is not None
    async with http.post(f"{server.url}/v1/completions", json=_BODY) as r:
        assert "endpoint-load-metrics" not in r.headers
    assert isinstance(report, LoadReport)
