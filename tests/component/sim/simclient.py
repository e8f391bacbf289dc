"""Small client helpers shared by the simulator's component tests."""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any, Protocol

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from xds_lab.sim.server import SimServer


class StartServer(Protocol):
    """The ``start_server`` fixture: a started simulated server of ``profile``, with profile
    fields overridden by ``over`` (jitter 0 unless given), stopped after the test."""

    def __call__(
        self, profile: str = ..., *, name: str = ..., time_scale: float = ..., **over: Any
    ) -> Awaitable[SimServer]: ...


@dataclass
class Timed:
    status: int
    server: str
    ttft: float
    e2e: float
    completion_tokens: int
    cached_tokens: int


def words(n: int, *, prefix: str = "w") -> str:
    return " ".join(f"{prefix}{i}" for i in range(n))


async def stream_completion(
    http: aiohttp.ClientSession, url: str, prompt: str, *, max_tokens: int
) -> Timed:
    """POST a streaming completion and time the first token and the end, as a client sees it."""
    body = {
        "prompt": prompt,
        "max_tokens": max_tokens,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    start = time.monotonic()
    ttft = -1.0
    usage: dict[str, object] = {}
    async with http.post(f"{url}/v1/completions", json=body) as resp:
        server = resp.headers.get("x-sim-server", "")
        if resp.status != 200:
            return Timed(resp.status, server, -1.0, time.monotonic() - start, 0, 0)
        async for raw in resp.content:
            line = raw.decode().strip()
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            if chunk["choices"] and ttft < 0:
                ttft = time.monotonic() - start
            if "usage" in chunk:
                usage = chunk["usage"]
    details = usage["prompt_tokens_details"]
    assert isinstance(details, dict)
    completion = usage["completion_tokens"]
    assert isinstance(completion, int)
    return Timed(200, server, ttft, time.monotonic() - start, completion, details["cached_tokens"])


async def scrape(http: aiohttp.ClientSession, url: str) -> dict[str, float]:
    """Every sample of ``/metrics`` keyed by name (plus ``{le=...}`` for histogram buckets)."""
    async with http.get(f"{url}/metrics") as resp:
        text = await resp.text()
    samples: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            le = s.labels.get("le")
            samples[f"{s.name}{{le={le}}}" if le else s.name] = s.value
    return samples
