"""The endpoint that served reaches the picker through a real Envoy as xds-control configures
it: the response's headers go to the picker with Envoy's ``upstream.address``, so a request
the picker named a dead server for, and Envoy retried on the next of its list, is counted
where it served (``xds_control_picker_served_total``)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import aiohttp

from e2e.stack import echo_stack
from xds_lab.harness.backends import BACKEND_HEADER, PICKED_HEADER
from xds_lab.harness.pool_config import one_pool_config
from xds_lab.harness.ports import free_port

PROMPTS = 30


def served_count(metrics: str, where: str, *, pool: str = "chat") -> float:
    """``xds_control_picker_served_total`` of ``pool`` and ``where`` in ``metrics``."""
    pattern = rf'^xds_control_picker_served_total\{{pool="{pool}",where="{where}"\}} (\S+)$'
    found = re.search(pattern, metrics, re.MULTILINE)
    return float(found.group(1)) if found else 0.0


async def test_a_request_picked_for_a_dead_server_is_counted_where_it_served(
    tmp_path: Path,
) -> None:
    stack = echo_stack(tmp_path, backends=2)
    dead = f"127.0.0.1:{free_port()}"  # listed, healthy as far as the config knows, nobody home
    endpoints = [{"address": dead, "weight": 10}] + [
        {"address": stack.backends.address(i), "weight": 10} for i in range(2)
    ]
    config = one_pool_config(
        endpoints=endpoints,
        listener_port=stack.listener_port,
        pool={"picker": {"address": f"127.0.0.1:{free_port()}", "fallbacks": 2}},
        route={"retry": {"retry_on": "connect-failure", "num_retries": 2}},
    )
    try:
        await stack.start(config)
        url = f"{stack.url}/v1/chat/completions"
        answers: list[tuple[int, str, str]] = []
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session:
            for n in range(PROMPTS):
                messages = [{"role": "system", "content": f"You are assistant number {n}."}]
                body = json.dumps({"model": "m", "messages": messages})
                async with session.post(url, data=body) as response:
                    await response.read()
                    picked = response.headers.get(PICKED_HEADER, "").split(",")[0]
                    server = response.headers.get(BACKEND_HEADER, "")
                    answers.append((response.status, server, picked))
        assert [status for status, _, _ in answers] == [200] * PROMPTS, answers
        elsewhere = sum(1 for _, server, picked in answers if server != picked)
        assert {picked for _, server, picked in answers if server != picked} == {dead}
        assert elsewhere >= 3, answers  # a third of the prompts: the dead one is named first
        metrics = await stack.control_plane.metrics()
        assert served_count(metrics, "elsewhere") == elsewhere
        assert served_count(metrics, "picked") == PROMPTS - elsewhere
    finally:
        await stack.close()
