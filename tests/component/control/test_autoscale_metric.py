"""The replica recommendation reaches /metrics and /v1/weights: a real Weigher, control loop and
admin server, with the real PrometheusSource asking an HTTP server that answers like
Prometheus' /api/v1/query (the request-rate query included)."""

from __future__ import annotations

import asyncio
import re
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from xds_control.admin import AdminServer, AdminViews
from xds_control.cache import MemorySnapshotCache
from xds_control.config import load_config
from xds_control.control import ControlLoop, Weigher
from xds_control.server import StreamRegistry
from xds_lab.harness.ports import free_port

ADDRESSES = [f"127.0.0.1:{8001 + i}" for i in range(3)]

CONFIG = """\
signals: {{prometheus_url: "{url}"}}
pools:
  - name: chat
    endpoints: [{endpoints}]
    autoscale: {{enabled: true, qps_per_replica: 10, scale_up_window_s: 0, max_step: 2}}
  - name: batch
    endpoints: [{{address: 127.0.0.1:9001}}]
listeners:
  - name: gw
    address: 127.0.0.1:10000
    routes: [{{name: chat, pool: chat, match: {{prefix: /chat}}}}, {{name: rest, pool: batch}}]
"""


def value_for(query: str) -> str:
    if "request_success_total" in query:
        return "30"  # req/s per replica: 90 for the pool, three times what 3 replicas serve
    if "inter_token_latency" in query:
        return "0.02"
    if "num_requests_waiting" in query:
        return "0"
    return "0.5" if "cache_usage" in query else "1"


async def answer(request: web.Request) -> web.Response:
    query = str((await request.post())["query"])
    result = [
        {"metric": {"instance": a}, "value": [time.time(), value_for(query)]} for a in ADDRESSES
    ]
    return web.json_response(
        {"status": "success", "data": {"resultType": "vector", "result": result}}
    )


@pytest.fixture
async def prometheus() -> AsyncIterator[str]:
    app = web.Application()
    app.router.add_post("/api/v1/query", answer)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    yield str(server.make_url(""))
    await server.close()


async def test_recommended_replicas_gauge_and_admin_view(prometheus: str, tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    endpoints = ", ".join(f"{{address: {a}}}" for a in ADDRESSES)
    path.write_text(CONFIG.format(url=prometheus, endpoints=endpoints))
    config = load_config(path)
    cache = MemorySnapshotCache()
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as client:
        weigher = Weigher.from_config(client=client, signals=config.signals)
        loop = ControlLoop(config=config, config_path=path, cache=cache, weigher=weigher)
        server = AdminServer(
            address=f"127.0.0.1:{free_port()}",
            views=AdminViews(
                state=loop.state, cache=cache, registry=StreamRegistry(), engine=weigher.view
            ),
        )
        await server.start()
        try:
            base = f"http://127.0.0.1:{server.port}"
            await loop.step()  # first cycle: watches, recommends the current 3
            await loop.step()  # 90 req/s calls for 9; one step of at most 2
            async with client.get(f"{base}/metrics") as response:
                metrics = await response.text()
            async with client.get(f"{base}/v1/weights?explain=1") as response:
                weights = await response.json()
            shown = await xdsctl("--admin", base, "weights", "chat")
        finally:
            await server.stop()
    gauge = re.findall(
        r'^xds_control_pool_recommended_replicas\{pool="(\w+)"\} (\S+)$', metrics, re.M
    )
    assert gauge == [("chat", "5.0")]  # the pool without autoscale has no series
    chat = weights["autoscale"]["chat"]
    assert chat["recommended_replicas"] == 5
    assert chat["desired_replicas"] == 9
    assert chat["request_rate"] == 90.0
    assert "out to 5" in chat["reason"]
    assert "chat: 5 replicas recommended (now 3): 90 req/s calls for 9" in shown


async def xdsctl(*args: str) -> str:
    """The installed ``xdsctl``, run without blocking the loop that serves the admin API."""
    process = await asyncio.create_subprocess_exec(
        str(Path(sys.executable).with_name("xdsctl")),
        *args,
        stdout=asyncio.subprocess.PIPE,
        env={"COLUMNS": "200", "PATH": ""},
    )
    stdout, _ = await asyncio.wait_for(process.communicate(), 30)
    assert process.returncode == 0
    return stdout.decode()
