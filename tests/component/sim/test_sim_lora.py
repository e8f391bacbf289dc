"""The simulator's LoRA adapters, as vLLM serves them: ``max_loras`` slots, a miss costing a
load, the least recently used idle adapter evicted, and ``vllm:lora_requests_info`` written as
vLLM writes it, which the control plane reads back into the server's adapters."""

from __future__ import annotations

import asyncio

import aiohttp

from component.sim.simclient import StartServer, words
from xds_control.config import Engine
from xds_control.signals.exposition import parse_exposition


async def _complete(http: aiohttp.ClientSession, url: str, model: str, tokens: int) -> None:
    body = {"model": model, "prompt": words(20), "max_tokens": tokens}
    async with http.post(f"{url}/v1/completions", json=body) as resp:
        assert resp.status == 200


async def _adapters(http: aiohttp.ClientSession, url: str) -> object:
    async with http.get(f"{url}/metrics") as resp:
        return parse_exposition(await resp.text(), engine=Engine.VLLM).adapters


async def test_adapters_load_on_first_use_and_report_as_vllm_does(
    http: aiohttp.ClientSession, start_server: StartServer
) -> None:
    server = await start_server(time_scale=0.05, max_loras=2, lora_load_s=0.05)
    base = server.profile.model
    await _complete(http, server.url, base, 2)
    assert await _adapters(http, server.url) is None  # none until an adapter was loaded
    running = asyncio.gather(
        _complete(http, server.url, "adapter-a", 1500),
        _complete(http, server.url, "adapter-b", 1500),
    )
    await asyncio.sleep(0.3)
    busy = await _adapters(http, server.url)
    assert busy is not None
    assert busy.running == frozenset({"adapter-a", "adapter-b"})  # type: ignore[attr-defined]
    assert busy.full  # type: ignore[attr-defined]
    third = asyncio.ensure_future(_complete(http, server.url, "adapter-c", 2))
    await asyncio.sleep(0.1)
    waiting = await _adapters(http, server.url)
    assert waiting.waiting == frozenset({"adapter-c"})  # type: ignore[attr-defined]
    await running
    await third
    idle = await _adapters(http, server.url)
    assert idle.running == frozenset()  # type: ignore[attr-defined]
    assert server.scheduler.loras.loads == 3
