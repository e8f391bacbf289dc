"""A retry under the picker, through a real Envoy: ``override_host`` keeps per request which
entry of the picker's list it has used, so a retry goes to the next server listed, and to the
pool's fallback policy once the list is used up. Without a retry, a listed server that refuses
connections fails the request: the list's later entries only stand in for servers the cluster
no longer has."""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import pytest

from xds_control.config import RetryPolicy
from xds_lab.harness.backends import BACKEND_HEADER, EchoBackends
from xds_lab.harness.gie_gateway import gie_gateway_envoy
from xds_lab.harness.header_picker import SELECTION_HEADER, HeaderPicker
from xds_lab.harness.ports import free_port

BODY = b'{"model": "m", "prompt": "What are the advantages of tea?"}'
REQUESTS = 20


@dataclass
class Servers:
    dead: str
    """In the cluster, but nothing listens there: every connect fails."""
    live: list[str]


@pytest.fixture
async def servers() -> AsyncIterator[Servers]:
    backends = EchoBackends(ports=[free_port(), free_port()])
    await backends.start()
    try:
        yield Servers(dead=f"127.0.0.1:{free_port()}", live=[backends.address(i) for i in (0, 1)])
    finally:
        await backends.stop()


async def _served(
    tmp_path: Path, servers: Servers, *, retry: RetryPolicy | None, lists: list[list[str]]
) -> list[Counter[str]]:
    """For each list the picker answers, who served ``REQUESTS`` requests (status and server)."""
    picker = HeaderPicker(address=f"127.0.0.1:{free_port()}")
    endpoints = [servers.dead, *servers.live]
    envoy, port = gie_gateway_envoy(
        workdir=tmp_path / "gateway",
        node_id="picker-retries",
        pool=picker.pool(endpoints),
        endpoints=endpoints,
        fail_open=False,
        retry=retry,
    )
    await picker.start()
    try:
        await envoy.start()
        await envoy.wait_live()
        out = []
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session:
            for listed in lists:
                got: Counter[str] = Counter()
                for _ in range(REQUESTS):
                    headers = {SELECTION_HEADER: ",".join(listed)}
                    async with session.post(
                        f"http://127.0.0.1:{port}/v1/completions", data=BODY, headers=headers
                    ) as response:
                        await response.read()
                        got[f"{response.status} {response.headers.get(BACKEND_HEADER, '')}"] += 1
                out.append(got)
        return out
    finally:
        await envoy.stop()
        await picker.stop()


async def test_a_retry_takes_the_next_server_the_picker_listed(
    tmp_path: Path, servers: Servers
) -> None:
    dead, (first, second) = servers.dead, servers.live
    lists = [[dead, second], [dead, first], [dead]]
    then_second, then_first, alone = await _served(
        tmp_path, servers, retry=RetryPolicy(), lists=lists
    )
    # The next entry, every time: not wherever the fallback policy would have sent it.
    assert then_second == Counter({f"200 {second}": REQUESTS})
    assert then_first == Counter({f"200 {first}": REQUESTS})
    # The list used up: the fallback policy, on a server not tried yet.
    assert sum(n for key, n in alone.items() if key.startswith("200 ")) == REQUESTS, alone


async def test_without_a_retry_a_listed_server_that_refuses_fails_the_request(
    tmp_path: Path, servers: Servers
) -> None:
    (got,) = await _served(tmp_path, servers, retry=None, lists=[[servers.dead, servers.live[0]]])
    assert got == Counter({"503 ": REQUESTS})
