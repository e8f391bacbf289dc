"""Must show 5: each fault takes effect at run time and clears, through the control endpoints."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import aiohttp
import pytest

from component.sim.simclient import scrape, stream_completion, words
from xds_lab.sim.fleet import Fleet, FleetSpec


@pytest.fixture
async def fleet() -> AsyncIterator[Fleet]:
    spec = FleetSpec.model_validate(
        {
            "control_port": 0,
            "time_scale": 0.2,
            "groups": [{"profile": "vllm-h100", "count": 2, "overrides": {"jitter": 0.0}}],
        }
    )
    async with Fleet(spec) as running:
        yield running


async def _set(http: aiohttp.ClientSession, fleet: Fleet, name: str, **faults: object) -> None:
    async with http.post(f"{fleet.control_url}/servers/{name}/faults", json=faults) as resp:
        assert resp.status == 200, await resp.text()


async def _clear(http: aiohttp.ClientSession, fleet: Fleet, name: str) -> None:
    async with http.delete(f"{fleet.control_url}/servers/{name}/faults") as resp:
        assert resp.status == 200


@pytest.mark.serial  # latencies compared to the millisecond: not next to other load
async def test_slowdown_multiplies_latency_and_clears(
    http: aiohttp.ClientSession, fleet: Fleet
) -> None:
    server = fleet.servers["vllm-h100-0"]
    # Distinct prompts, so no request is cheaper for a prefix-cache hit.
    base = await stream_completion(http, server.url, words(512, prefix="a"), max_tokens=20)
    await _set(http, fleet, server.name, slowdown=4.0)
    slow = await stream_completion(http, server.url, words(512, prefix="b"), max_tokens=20)
    await _clear(http, fleet, server.name)
    again = await stream_completion(http, server.url, words(512, prefix="c"), max_tokens=20)
    assert slow.e2e > 3.0 * base.e2e
    assert again.e2e < 1.5 * base.e2e


async def test_error_rate_answers_500_and_clears(http: aiohttp.ClientSession, fleet: Fleet) -> None:
    server = fleet.servers["vllm-h100-0"]

    async def statuses(n: int) -> list[int]:
        body = {"prompt": "hello there", "max_tokens": 2}
        out = []
        for _ in range(n):
            async with http.post(f"{server.url}/v1/completions", json=body) as resp:
                out.append(resp.status)
                assert resp.headers["x-sim-server"] == server.name
        return out

    await _set(http, fleet, server.name, error_rate=0.5)
    mixed = await statuses(40)
    assert 5 <= mixed.count(500) <= 35
    assert set(mixed) == {200, 500}
    await _set(http, fleet, server.name, error_rate=1.0)
    assert set(await statuses(5)) == {500}
    await _clear(http, fleet, server.name)
    assert set(await statuses(5)) == {200}


async def test_refuse_closes_the_port_and_clear_reopens_it(
    http: aiohttp.ClientSession, fleet: Fleet
) -> None:
    server, other = fleet.servers["vllm-h100-0"], fleet.servers["vllm-h100-1"]
    await _set(http, fleet, server.name, refuse=True)
    with pytest.raises(aiohttp.ClientConnectorError):
        await stream_completion(http, server.url, "hi", max_tokens=1)
    assert (await stream_completion(http, other.url, "hi", max_tokens=1)).status == 200
    await _clear(http, fleet, server.name)
    assert (await stream_completion(http, server.url, "hi", max_tokens=1)).status == 200


async def test_hang_holds_requests_until_cleared(http: aiohttp.ClientSession, fleet: Fleet) -> None:
    server = fleet.servers["vllm-h100-0"]
    await _set(http, fleet, server.name, hang=True)
    pending = asyncio.create_task(stream_completion(http, server.url, "hi there", max_tokens=3))
    done, _ = await asyncio.wait({pending}, timeout=0.5)
    assert not done  # accepted, never answered
    await _clear(http, fleet, server.name)
    result = await asyncio.wait_for(pending, timeout=5)
    assert result.status == 200


async def test_restart_refuses_then_returns_cold_with_zeroed_counters(
    http: aiohttp.ClientSession, fleet: Fleet
) -> None:
    server = fleet.servers["vllm-h100-0"]
    prompt = words(320)
    await stream_completion(http, server.url, prompt, max_tokens=1)
    warm = await stream_completion(http, server.url, prompt, max_tokens=1)
    assert warm.cached_tokens > 0
    await _set(http, fleet, server.name, restart=0.3)
    await asyncio.sleep(0.1)
    with pytest.raises(aiohttp.ClientConnectorError):
        await stream_completion(http, server.url, prompt, max_tokens=1)
    await asyncio.sleep(0.4)
    counters = await scrape(http, server.url)
    assert counters["vllm:request_success_total"] == 0
    cold = await stream_completion(http, server.url, prompt, max_tokens=1)
    assert cold.status == 200
    assert cold.cached_tokens == 0


async def test_memory_creep_grows_framebuffer_use_and_clears(
    http: aiohttp.ClientSession, fleet: Fleet
) -> None:
    server = fleet.servers["vllm-h100-1"]
    base = (await scrape(http, server.url))["DCGM_FI_DEV_FB_USED"]
    await _set(http, fleet, server.name, memory_creep_mib_per_s=2000)
    await asyncio.sleep(0.5)
    crept = await scrape(http, server.url)
    assert 700 <= crept["DCGM_FI_DEV_FB_USED"] - base <= 2000
    assert crept["DCGM_FI_DEV_FB_FREE"] < server.profile.gpu_memory_mib - base - 700
    await _clear(http, fleet, server.name)
    assert (await scrape(http, server.url))["DCGM_FI_DEV_FB_USED"] == base


async def test_per_server_control_endpoint_and_bad_input(
    http: aiohttp.ClientSession, fleet: Fleet
) -> None:
    server = fleet.servers["vllm-h100-0"]
    async with http.post(f"{server.url}/sim/faults", json={"slowdown": 0.5}) as resp:
        assert resp.status == 400  # a slowdown below 1 would be a speed-up
    async with http.post(f"{server.url}/sim/faults", json={"error_rate": 1.0}) as resp:
        assert (await resp.json())["faults"]["error_rate"] == 1.0
    async with http.post(f"{server.url}/v1/completions", json={"prompt": "x"}) as resp:
        assert resp.status == 500
    async with http.delete(f"{server.url}/sim/faults") as resp:
        assert resp.status == 200
    async with http.get(f"{fleet.control_url}/servers/nope/faults") as resp:
        assert resp.status == 404
