"""Fixtures: real simulated servers on loopback ports and an HTTP client."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from component.sim.simclient import StartServer
from xds_lab.sim.profiles import get_profile
from xds_lab.sim.server import SimServer


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    connector = aiohttp.TCPConnector(limit=0)
    timeout = aiohttp.ClientTimeout(total=20)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        yield session


@pytest.fixture
async def start_server() -> AsyncIterator[StartServer]:
    started: list[SimServer] = []

    async def start(
        profile: str = "vllm-h100", *, name: str = "sim-0", time_scale: float = 1.0, **over: Any
    ) -> SimServer:
        over.setdefault("jitter", 0.0)
        server = SimServer(name=name, profile=get_profile(profile, **over).scaled(time_scale))
        await server.start()
        started.append(server)
        return server

    yield start
    for server in started:
        await server.stop()
