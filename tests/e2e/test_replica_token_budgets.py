"""An output-token budget held once by two control-plane replicas (issue 25 beside issue 24's
replicas): each replica's picker charges its share of a tenant's budget, the budget over the
replicas the control-plane Service's EndpointSlices list (``control_planes``), so two
replicas behind one Envoy fleet serve the tenant about its budget a window, not twice it.
Real Envoys (one on each replica) and streamed responses whose usage settles each charge."""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections import Counter
from pathlib import Path

import aiohttp
import pytest
import structlog

from e2e.replicas import TOKEN_WINDOW_S, Replicas, replicas
from e2e.stack import eventually

log = structlog.get_logger(__name__)

TOKENS = 2560
"""Tenant a's budget a window, fleet-wide: 20 of the simulator's 128-token answers."""
WINDOWS = 3
TENANT_HEADER = "x-gateway-inference-fairness-id"


async def _stream(http: aiohttp.ClientSession, url: str, *, n: int) -> tuple[int, int]:
    """Status and the output tokens the streamed response's usage reported (no ``max_tokens``:
    charged the default estimate, settled to the usage)."""
    body = {
        "model": "m",
        "messages": [{"role": "user", "content": f"tell me about {n}"}],
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    headers = {TENANT_HEADER: "a"}
    async with http.post(f"{url}/v1/chat/completions", json=body, headers=headers) as response:
        tokens = 0
        for line in (await response.text()).splitlines():
            if line.startswith("data:") and '"usage"' in line:
                usage = json.loads(line[5:])["usage"]
                tokens = int(usage["completion_tokens"]) if usage else tokens
        return response.status, tokens


async def _served(fleet: Replicas) -> tuple[int, Counter[int]]:
    """Output tokens served to tenant a over ``WINDOWS`` whole windows of the replicas' clock
    (this host's monotonic clock), by clients that send as fast as they are answered, each
    request on a new connection so the kernel spreads them over both Envoys."""
    statuses: Counter[int] = Counter()
    served = 0
    connector = aiohttp.TCPConnector(force_close=True)
    timeout = aiohttp.ClientTimeout(total=30)
    async with aiohttp.ClientSession(timeout=timeout, connector=connector) as http:
        start = math.ceil(time.monotonic() / TOKEN_WINDOW_S) * TOKEN_WINDOW_S
        await asyncio.sleep(start - time.monotonic())
        stop = start + WINDOWS * TOKEN_WINDOW_S - 0.3

        async def client(worker: int) -> None:
            nonlocal served
            n = 0
            while time.monotonic() < stop:
                n += 1
                status, tokens = await _stream(http, fleet.url, n=worker * 1000 + n)
                statuses[status] += 1
                served += tokens if status == 200 else 0
                if status == 429:
                    await asyncio.sleep(0.05)

        await asyncio.gather(*(client(w) for w in range(8)))
    return served, statuses


@pytest.mark.serial  # tokens counted per window of the control planes' clock: not next to load
async def test_two_replicas_serve_a_tenant_its_budget_once(tmp_path: Path) -> None:
    async with replicas(tmp_path, tokens=TOKENS) as fleet:

        async def one_envoy_each() -> bool:
            return [await fleet.nodes(i) for i in (0, 1)] == [{"envoy-a"}, {"envoy-b"}]

        await eventually(one_envoy_each, what="one Envoy on each replica")
        served, statuses = await _served(fleet)
        log.info("served", budget=TOKENS, windows=WINDOWS, served=served, statuses=statuses)
        want = TOKENS * WINDOWS
        assert 0.9 * want <= served <= 1.1 * want, (served, statuses)
        assert statuses[429] > 0, statuses
        # Each replica says what it holds: half the budget, shared by two.
        for replica in fleet.replicas:
            rows = (await replica.get_json("/v1/limits"))["token_budgets"]
            assert [(r["output_tokens"], r["replicas"], r["here"]) for r in rows] == [
                (TOKENS, 2, TOKENS // 2)
            ], rows

        # The Service lists one replica now (the other drained): it holds the whole budget.
        await fleet.list_control_planes(1)

        async def whole() -> bool:
            rows = (await fleet.replicas[0].get_json("/v1/limits"))["token_budgets"]
            return [(r["replicas"], r["here"]) for r in rows] == [(1, TOKENS)]

        await eventually(whole, what="one replica, the whole budget")
