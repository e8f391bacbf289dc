"""Usage from real vLLM responses settles the token budget exactly (issue 49, must-show 3):
a tenant's requests through a real Envoy, streamed (``stream_options.include_usage``) and not,
are charged their ``max_tokens`` when admitted and settled to the ``usage`` vLLM's response
reports, which the picker reads from the bodies Envoy hands it. Half of them stop early (a
``stop`` string), so what is settled differs from what was charged. The budget's count equals
the sum of the usages the client read, and that equals what vLLM's own
``vllm:generation_tokens_total`` counted."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from e2e.real_engine.real_stack import real_stack
from e2e.stack import eventually
from xds_lab.real_engine.server import MODEL_NAME, VllmFleet, metric_value

pytestmark = pytest.mark.asyncio(loop_scope="session")

TENANT_HEADER = "x-gateway-inference-fairness-id"
BUDGET = 1_000_000
REQUESTS = 16
_COUNTED = re.compile(
    r'^xds_control_flow_output_tokens_total\{budget="a/all",pool="chat"\} (\S+)$', re.MULTILINE
)


def _body(n: int, *, stream: bool) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": MODEL_NAME,
        "messages": [{"role": "user", "content": f"say something short about {n}"}],
        "max_tokens": 8 + 4 * n,
        "stream": stream,
    }
    if stream:
        body["stream_options"] = {"include_usage": True}
    if n % 2:
        body["stop"] = ["a"]
    return body


async def _ask(http: aiohttp.ClientSession, url: str, body: dict[str, Any]) -> int:
    """The completion tokens the response's usage reports."""
    async with http.post(url, json=body, headers={TENANT_HEADER: "a"}) as response:
        assert response.status == 200, await response.text()
        if not body["stream"]:
            return int((await response.json())["usage"]["completion_tokens"])
        usages = []
        for line in (await response.text()).splitlines():
            if line.startswith("data: {"):
                usage = json.loads(line[6:]).get("usage")
                if usage:
                    usages.append(int(usage["completion_tokens"]))
        assert len(usages) == 1, usages
        return usages[0]


async def _generated(fleet: VllmFleet) -> float:
    texts = [await s.metrics() for s in fleet.servers.values()]
    return sum(metric_value(t, "vllm:generation_tokens_total") for t in texts)


async def test_usage_from_real_responses_settles_the_budget_exactly(
    vllm_fleet: VllmFleet, tmp_path: Path
) -> None:
    budget = {"tenant": "a", "output_tokens": BUDGET, "window_s": 3600.0}
    async with (
        real_stack(vllm_fleet, tmp_path, picker={"flow": {"budgets": [budget]}}) as stack,
        aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as http,
    ):
        generated = await _generated(vllm_fleet)
        url = f"{stack.url}/v1/chat/completions"
        usages = [await _ask(http, url, _body(n, stream=n % 4 < 2)) for n in range(REQUESTS)]
        charged_in_full = sum(8 + 4 * n for n in range(REQUESTS))
        served = sum(usages)
        # Early stops made it a real settlement, not the estimate kept.
        assert served < charged_in_full, usages

        async def counted() -> bool:
            found = _COUNTED.search(await stack.control_plane.metrics())
            return found is not None and float(found[1]) == served

        try:
            await eventually(counted, timeout=10, what=f"{served} output tokens counted")
        except AssertionError:
            found = _COUNTED.search(await stack.control_plane.metrics())
            view = await stack.control_plane.get_json("/v1/limits")
            raise AssertionError((usages, found and found[1], view)) from None
        view = await stack.control_plane.get_json("/v1/limits")
        rows = [r for r in view["token_budgets"] if r["tenant"] == "a"]
        assert [(r["charged"], r["left"]) for r in rows] == [(served, BUDGET - served)], rows
        assert await _generated(vllm_fleet) - generated == served
        print(f"\nusages {usages}: {served} tokens served, {charged_in_full} charged at admission")
