"""Two control-plane replicas behind one Service, two real Envoys, one on each (``replicas``):
under prefix-heavy load both replicas' pickers name the same server for the same prompt, as
the servers' KV events decide it; one replica killed, its Envoy moves to the other with no
request failing; and the fleet admits its budget once, with two replicas and with one."""

from __future__ import annotations

import asyncio
import itertools
import os
import sys
import time
from collections import Counter
from pathlib import Path

import aiohttp
import pytest
import structlog

from e2e.replicas import BUDGET, Replicas, post, prompt, replicas
from e2e.stack import eventually

log = structlog.get_logger(__name__)

TEMPLATES = 6
"""Shared system prompts: the prefixes the load keeps reusing."""


async def _load(fleet: Replicas, statuses: Counter[int], *, stop: asyncio.Event) -> None:
    """Prefix-heavy chat traffic through the Envoys, three at a time, until ``stop``."""
    questions = itertools.count(1000)
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=20)) as http:

        async def worker() -> None:
            while not stop.is_set():
                q = next(questions)
                statuses[await post(http, fleet.url, prompt(q % TEMPLATES, q))] += 1

        await asyncio.gather(*(worker() for _ in range(3)))


async def _on_replicas(fleet: Replicas, want: dict[int, set[str]]) -> None:
    """Wait until replica ``i`` has exactly Envoys ``want[i]`` connected."""

    async def placed() -> bool:
        return {i: await fleet.nodes(i) for i in want} == want

    await eventually(placed, what=f"Envoys connected as {want}")


async def test_two_replicas_pick_alike_and_an_envoy_moves_over_without_a_failed_request(
    tmp_path: Path,
) -> None:
    async with replicas(tmp_path, budget=10_000) as fleet:  # no request limited
        await _on_replicas(fleet, {0: {"envoy-a"}, 1: {"envoy-b"}})
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=20)) as http:
            for template in range(TEMPLATES):  # each prefix placed once
                assert await post(http, fleet.url, prompt(template, template)) == 200
        await fleet.caught_up()

        statuses: Counter[int] = Counter()
        stop = asyncio.Event()
        load = asyncio.create_task(_load(fleet, statuses, stop=stop))
        same, asked = 0, 0
        for q in range(60):  # the same prompt, asked of both pickers at once
            body = prompt(q % TEMPLATES, q)
            first, second = await asyncio.gather(fleet.pick(0, body), fleet.pick(1, body))
            log.info("picks", template=q % TEMPLATES, replica_0=first, replica_1=second)
            asked += 1
            same += first == second != ""
            await asyncio.sleep(0.1)  # spread over the load
        assert same >= 0.9 * asked, f"{same} of {asked} picks alike"

        fleet.replicas[0].process.kill()  # a crash: Envoy A's stream breaks
        await _on_replicas(fleet, {1: {"envoy-a", "envoy-b"}})
        before = sum(statuses.values())
        await eventually(
            lambda: _grown(statuses, before + 30), what="30 more requests after the move"
        )
        stop.set()
        await load
        assert set(statuses) == {200}, statuses


async def _grown(statuses: Counter[int], want: int) -> bool:
    return sum(statuses.values()) >= want


async def _admitted(fleet: Replicas, *, seconds: float) -> float:
    """Offer twice the budget through the Envoys (a new connection per request, so the kernel
    spreads them over both); the admitted rate."""
    statuses: Counter[int] = Counter()
    connector = aiohttp.TCPConnector(force_close=True)
    async with aiohttp.ClientSession(connector=connector) as http:

        async def one(q: int) -> None:
            statuses[await post(http, fleet.url, prompt(q % TEMPLATES, q))] += 1

        start, tasks = time.monotonic(), []
        rate = 2 * BUDGET
        for i in range(int(rate * seconds)):
            await asyncio.sleep(max(0.0, start + i / rate - time.monotonic()))
            tasks.append(asyncio.create_task(one(i)))
        await asyncio.gather(*tasks)
    assert set(statuses) <= {200, 429}, statuses
    return statuses[200] / seconds


async def _bucket_rates(fleet: Replicas) -> list[float]:
    """Each Envoy's medium-class fill rate, as its config dump says."""
    rates = []
    for envoy in fleet.envoys:
        rate = 0.0
        for config in (await envoy.config_dump())["configs"]:
            for table in config.get("dynamic_route_configs", []):
                for route in table["route_config"]["virtual_hosts"][0]["routes"]:
                    if route["name"] == "all/medium":
                        filters = route["typed_per_filter_config"]
                        bucket = filters["envoy.filters.http.local_ratelimit"]["token_bucket"]
                        interval = float(bucket["fill_interval"].rstrip("s"))
                        rate = float(bucket["tokens_per_fill"]) / interval
        rates.append(rate)
    return rates


@pytest.mark.serial  # an admitted rate: a CPU-starved client sends bursts the buckets drop
async def test_the_fleet_admits_its_budget_once_with_two_replicas_and_with_one(
    tmp_path: Path,
) -> None:
    async with replicas(tmp_path) as fleet:
        await _on_replicas(fleet, {0: {"envoy-a"}, 1: {"envoy-b"}})

        async def halves() -> bool:
            return all(abs(r - BUDGET / 2) < 0.2 for r in await _bucket_rates(fleet))

        # Each replica has one Envoy; the gateway Service says the fleet has two.
        await eventually(halves, what="half the budget in each Envoy, with two replicas")

        async def counted() -> bool:
            view = await fleet.replicas[0].get_json("/v1/limits")
            row = next(r for r in view["budgets"] if r["priority"] == "medium")
            return (row["envoys"], row["connected"], row["gateway_fleet"]) == (2, 1, 2)

        await eventually(counted, what="two Envoys in the fleet, one connected here")
        xdsctl = Path(sys.executable).with_name("xdsctl")
        process = await asyncio.create_subprocess_exec(
            *(str(xdsctl), "--server", fleet.replicas[0].admin_url, "limits", "gateway/all"),
            stdout=asyncio.subprocess.PIPE,
            env={**os.environ, "COLUMNS": "200"},
        )
        out, _ = await process.communicate()
        medium = next(line for line in out.decode().splitlines() if " medium " in line)
        assert "2 (1 here)" in medium, medium
        two = await _admitted(fleet, seconds=4.0)

        fleet.replicas[0].process.kill()
        await _on_replicas(fleet, {1: {"envoy-a", "envoy-b"}})
        await eventually(halves, what="half the budget in each Envoy, with one replica")
        one = await _admitted(fleet, seconds=4.0)
        log.info("admitted", budget=BUDGET, two_replicas=two, one_replica=one)
        for admitted in (two, one):
            assert 0.8 * BUDGET <= admitted <= 1.25 * BUDGET, (two, one)
