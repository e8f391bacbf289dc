"""Priority classes and budgets in a real Envoy over echo backends: a bucket of R requests/s
offered 2R admits about R, a 429 carries retry-after, and a fleet-wide budget is divided among
the Envoys connected (three: a third each; one leaves: half each)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from e2e.envoy_metrics import ENVOY_METRICS, PREFIX_LABEL
from e2e.stack import EchoStack, eventually, weighted_config

RATE = 20.0


def _limited_config(stack: EchoStack, classes: dict[str, Any]) -> dict[str, Any]:
    config = weighted_config(stack, [10, 10])
    listener = config["listeners"][0]
    listener["limits"] = {"classes": classes, "adapt": {"enabled": False}}
    return config


async def _offer(
    stack: EchoStack, *, rate: float, seconds: float, priority: str
) -> tuple[Counter[int], set[str]]:
    """Send ``rate`` requests/s for ``seconds``, paced; statuses and retry-after values."""
    statuses: Counter[int] = Counter()
    retry_after: set[str] = set()

    async def one(session: aiohttp.ClientSession) -> None:
        headers = {"x-priority": priority}
        async with session.get(f"{stack.url}/v1/completions", headers=headers) as response:
            await response.read()
            statuses[response.status] += 1
            if response.status == 429:
                retry_after.add(response.headers.get("retry-after", ""))

    start = time.monotonic()
    async with aiohttp.ClientSession() as session:
        tasks = []
        for i in range(int(rate * seconds)):
            await asyncio.sleep(max(0.0, start + i / rate - time.monotonic()))
            tasks.append(asyncio.create_task(one(session)))
        await asyncio.gather(*tasks)
    return statuses, retry_after


@pytest.mark.serial  # an admitted rate: a CPU-starved client sends bursts the bucket drops
async def test_a_bucket_of_r_offered_2r_admits_about_r_and_429_says_retry_after(
    stack: EchoStack,
) -> None:
    classes = {"medium": {"rate_per_s": RATE, "burst_s": 0.1}}
    await stack.start(_limited_config(stack, classes))
    statuses, retry_after = await _offer(stack, rate=2 * RATE, seconds=3.0, priority="medium")
    admitted = statuses[200] / 3.0
    assert RATE * 0.8 <= admitted <= RATE * 1.2, statuses
    assert statuses[429] > 0, statuses
    assert retry_after == {"1"}
    # Envoy's own counters, as its /stats/prometheus names them (the dashboard's admissions
    # panel reads these; docs/limits.md lists them): every request counted, each 429 once.
    counters = await _envoy_counters(stack, priority="medium")
    assert counters["envoy_http_local_rate_limit_rate_limited"] == statuses[429], counters
    assert counters["envoy_http_local_rate_limit_ok"] == statuses[200], counters
    assert counters["envoy_http_local_rate_limit_enabled"] == sum(statuses.values()), counters
    assert set(counters) >= ENVOY_METRICS, counters
    # Critical has no budget here: it is not limited at all.
    statuses, _ = await _offer(stack, rate=2 * RATE, seconds=1.0, priority="critical")
    assert statuses == Counter({200: 2 * RATE}), statuses
    assert await _envoy_counters(stack, priority="critical") == {}  # no bucket, no counts


async def _envoy_counters(stack: EchoStack, *, priority: str) -> dict[str, float]:
    """Envoy's local rate limit samples under class ``priority``'s stat prefix, by the series
    name Prometheus stores (read raw: prometheus_client's parser would rename counters
    `_total`)."""
    text = await stack.envoys[0].admin_get("/stats/prometheus")
    wanted = f'{PREFIX_LABEL}="priority_limits_{priority}"'
    return {
        match[1]: float(match[3])
        for match in re.finditer(r"^([a-z_:][a-z0-9_:]*)\{([^}]*)\} (\S+)$", text, re.MULTILINE)
        if wanted in match[2].split(",")
    }


async def _envoy_rate(stack: EchoStack, index: int) -> float:
    dump = await stack.envoys[index].config_dump()
    for config in dump["configs"]:
        for table in config.get("dynamic_route_configs", []):
            for route in table["route_config"]["virtual_hosts"][0]["routes"]:
                if route["name"] == "all/medium":
                    limit = route["typed_per_filter_config"]["envoy.filters.http.local_ratelimit"]
                    bucket = limit["token_bucket"]
                    interval = float(bucket["fill_interval"].rstrip("s"))
                    return float(bucket["tokens_per_fill"]) / interval
    return 0.0


async def test_three_envoys_get_a_third_each_and_two_get_half(stack: EchoStack) -> None:
    classes = {"medium": {"rate_per_s": 30.0}}
    await stack.start(_limited_config(stack, classes), envoys=3)

    async def shares(want: float, envoys: int) -> bool:
        rates = [await _envoy_rate(stack, i) for i in range(envoys)]
        return all(abs(r - want) < 0.2 for r in rates)

    await eventually(lambda: shares(10.0, 3), what="a third of 30/s in each of three Envoys")
    view = await stack.control_plane.get_json("/v1/limits")
    row = next(r for r in view["budgets"] if r["priority"] == "medium")
    assert (row["envoys"], row["fleet_rps"], row["envoy_rps"]) == (3, 30.0, 10.0), row
    await stack.envoys.pop().stop()
    await eventually(lambda: shares(15.0, 2), what="half of 30/s in each of two Envoys")
    xdsctl = Path(sys.executable).with_name("xdsctl")
    process = await asyncio.create_subprocess_exec(
        str(xdsctl),
        "--server",
        stack.control_plane.admin_url,
        "limits",
        "gateway/all",
        stdout=asyncio.subprocess.PIPE,
        env={**os.environ, "COLUMNS": "200"},
    )
    out, _ = await process.communicate()
    medium = next(line for line in out.decode().splitlines() if " medium " in line)
    assert medium.split()[2:6] == ["medium", "30", "2", "15"], medium  # fleet, Envoys, each


async def test_a_token_budget_charges_each_request_its_cost(stack: EchoStack) -> None:
    config = _limited_config(stack, {"high": {"rate_per_s": 2.0, "burst_s": 50.0}})
    config["listeners"][0]["limits"]["unit"] = "tokens"
    config["listeners"][0]["classify"] = {}
    await stack.start(config)
    got = []
    async with aiohttp.ClientSession() as session:
        # No cost header: the classifier sets x-cost-tokens to prompt (bytes / 4) + max_tokens.
        # A bucket of 100 tokens: the third one does not fit.
        for prompt, max_tokens in ((200, 10), (80, 10), (40, 10), (12, 2)):  # 60, 30, 20, 5
            body = json.dumps({"model": "m", "prompt": "a" * prompt, "max_tokens": max_tokens})
            async with session.post(
                f"{stack.url}/v1/completions",
                data=body,
                headers={"x-priority": "high", "content-type": "application/json"},
            ) as response:
                got.append(response.status)
    assert got == [200, 200, 429, 200]
