"""Budgets follow the measured P99 in a real Envoy over a simulated fleet with a real
Prometheus: a pool slowed by fault injection lowers Medium's fill rate within a few cycles
(in the explain API and in Envoy's /config_dump), then High's, Critical last, so that under
the overload Medium is throttled before High and High before Critical; after recovery the
rates come back."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from e2e.engine_stack import SimStack, engine_config, load_in_background, sim_stack
from e2e.stack import eventually
from xds_lab.sim.faults import FaultUpdate

CEILING = 20.0
CLASSES = ("critical", "high", "medium")


@pytest.fixture
async def stack(tmp_path: Path) -> AsyncIterator[SimStack]:
    stack = sim_stack(tmp_path, profiles=["vllm-h100", "vllm-h100"])
    config = engine_config(stack, signals={"reconcile_period_s": 0.5}, weights={})
    config["listeners"][0]["limits"] = {
        # A small bucket: each change of rate refills it, and the test changes rates often.
        "classes": {c: {"rate_per_s": CEILING, "burst_s": 0.25} for c in CLASSES},
        "adapt": {
            "ttft_p99_target_s": 1.5,
            "window": "4s",
            "floor": 0.5,
            "raise_step": 0.25,
            "period_s": 1.0,
        },
    }
    try:
        await stack.start(config, prometheus=True)
        yield stack
    finally:
        await stack.close()


async def _rates(stack: SimStack) -> dict[str, dict[str, Any]]:
    view = await stack.control_plane.get_json("/v1/limits")
    return {row["priority"]: row for row in view["budgets"]}


async def _envoy_medium_rate(stack: SimStack) -> float:
    dump = await stack.envoy.config_dump()
    for config in dump["configs"]:
        for table in config.get("dynamic_route_configs", []):
            for route in table["route_config"]["virtual_hosts"][0]["routes"]:
                if route["name"] == "all/medium":
                    limit = route["typed_per_filter_config"]["envoy.filters.http.local_ratelimit"]
                    bucket = limit["token_bucket"]
                    return float(bucket["tokens_per_fill"]) / float(
                        bucket["fill_interval"].rstrip("s")
                    )
    return 0.0


async def _offer_each_class(stack: SimStack, *, rate: float, seconds: float) -> dict[str, float]:
    """Each class at ``rate`` requests/s at once; the share of each class refused (429).
    Refusals come at once; admitted requests are not waited for (the pool is slow)."""
    refused: Counter[str] = Counter()
    body = {"model": "m", "prompt": "hi", "max_tokens": 1}

    async def one(session: aiohttp.ClientSession, priority: str) -> None:
        headers = {"x-priority": priority}
        async with session.post(f"{stack.url}/v1/completions", json=body, headers=headers) as r:
            refused[priority] += r.status == 429

    start = time.monotonic()
    count = int(rate * seconds)
    # No connection limit: the slowed servers hold connections for seconds, and a queue in
    # the client would lower the rate offered.
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
        tasks = []
        for i in range(count):
            await asyncio.sleep(max(0.0, start + i / rate - time.monotonic()))
            tasks += [asyncio.create_task(one(session, c)) for c in CLASSES]
        await asyncio.wait(tasks, timeout=0.5)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return {c: refused[c] / count for c in CLASSES}


async def test_a_slow_pool_lowers_medium_first_and_recovery_brings_it_back(
    stack: SimStack,
) -> None:
    load_in_background(stack, rate=8, seconds=120)

    async def measured_and_at_ceiling() -> bool:
        rows = await _rates(stack)
        medium = rows.get("medium", {})
        return medium.get("pressure") is not None and medium["fleet_rps"] == CEILING

    await eventually(measured_and_at_ceiling, timeout=20, what="a P99 under target")
    for server in stack.backends.servers.values():
        server.faults.apply(FaultUpdate(slowdown=8))

    over_at: int | None = None

    async def medium_lowered() -> bool:
        nonlocal over_at
        view = await stack.control_plane.get_json("/v1/limits")
        rows = {row["priority"]: row for row in view["budgets"]}
        if over_at is None and (rows["medium"]["pressure"] or 0) > 1:
            over_at = view["cycle"]
        # The order holds at every step: High moves only once Medium is at its floor.
        if rows["high"]["fleet_rps"] < CEILING:
            assert rows["medium"]["fleet_rps"] == CEILING / 2, rows
        return float(rows["medium"]["fleet_rps"]) < CEILING

    await eventually(medium_lowered, timeout=20, what="Medium's rate lowered")
    view = await stack.control_plane.get_json("/v1/limits")
    assert over_at is not None
    assert view["cycle"] - over_at <= 3, "lowered more than three cycles after P99 passed target"
    await eventually(
        lambda: _lt(_envoy_medium_rate(stack), CEILING), what="a lower bucket in Envoy"
    )

    async def high_lowered() -> bool:
        rows = await _rates(stack)
        assert rows["critical"]["fleet_rps"] == CEILING or rows["high"]["fleet_rps"] == 10.0
        return (
            float(rows["medium"]["fleet_rps"]) == 10.0
            and float(rows["high"]["fleet_rps"]) < CEILING
        )

    await eventually(high_lowered, timeout=20, what="High's rate lowered after Medium's")
    refused = await _offer_each_class(stack, rate=CEILING * 0.9, seconds=2.0)
    assert refused["medium"] > refused["high"] >= refused["critical"], refused

    for server in stack.backends.servers.values():
        server.faults.clear()

    async def back() -> bool:
        rows = await _rates(stack)
        return all(rows[c]["fleet_rps"] == CEILING for c in CLASSES)

    await eventually(back, timeout=30, what="every rate back at its ceiling")
    assert await _envoy_medium_rate(stack) == pytest.approx(CEILING, rel=0.02)


async def _lt(value: Any, limit: float) -> bool:
    return float(await value) < limit
