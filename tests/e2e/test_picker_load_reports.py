"""Per-response load through a real Envoy: the picker asks, the simulated vLLM servers answer
``endpoint-load-metrics``, and the client never sees it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import aiohttp

from e2e.engine_stack import sim_stack
from xds_lab.harness.pool_config import one_pool_config
from xds_lab.harness.ports import free_port


async def test_the_report_is_asked_for_and_never_reaches_the_client(tmp_path: Path) -> None:
    stack = sim_stack(tmp_path, profiles=["vllm-h100", "vllm-h100"], time_scale=0.1)
    sims = stack.backends.servers
    endpoints = [{"address": f"127.0.0.1:{s.port}", "weight": 10} for s in sims.values()]
    config = one_pool_config(
        endpoints=endpoints,
        listener_port=stack.listener_port,
        pool={
            "engine": "vllm",
            "picker": {"address": f"127.0.0.1:{free_port()}", "per_response_load": True},
        },
    )
    try:
        await stack.start(config)
        url = f"{stack.url}/v1/chat/completions"
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session:
            for n in range(10):
                messages = [{"role": "user", "content": f"hello {n}"}]
                body = json.dumps({"model": "m", "messages": messages, "max_tokens": 2})
                async with session.post(url, data=body) as response:
                    await response.read()
                    assert response.status == 200
                    assert "endpoint-load-metrics" not in response.headers
        # Every response carried a report to the picker, which read it (and removed it).
        metrics = await stack.control_plane.metrics()
        pattern = r'^xds_control_picker_load_reports_total\{outcome="read",pool="chat"\} (\S+)$'
        found = re.search(pattern, metrics, re.MULTILINE)
        assert found is not None
        assert float(found.group(1)) == 10
    finally:
        await stack.close()
