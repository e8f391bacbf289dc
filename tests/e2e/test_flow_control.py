"""Flow control through a real Envoy (issue 25, must-show 2): a pool with no ready server holds
its requests; a server that turns ready within ``max_wait_s`` serves them; past it, a held
request is refused 503 with the reason (and 429 ``queue-full`` at once when the queue is
full); a band with a shorter wait is refused at its own, and a request that names no band
has its route's."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import aiohttp

from e2e.stack import EchoStack, echo_stack, eventually
from xds_lab.harness.backends import BACKEND_HEADER
from xds_lab.harness.pool_config import one_pool_config
from xds_lab.harness.ports import free_port

MAX_WAIT_S = 4.0


CRITICAL_PREFIX = "/critical"
"""The path of a route whose ``priority`` is ``critical``: its requests that name no band."""


def _config(stack: EchoStack, *, picker: str, servers: int, **flow: Any) -> dict[str, Any]:
    endpoints = [{"address": stack.backends.address(i), "weight": 10} for i in range(servers)]
    data = one_pool_config(
        endpoints=endpoints,
        listener_port=stack.listener_port,
        pool={"picker": {"address": picker, "flow": {"max_wait_s": MAX_WAIT_S, **flow}}},
    )
    critical = {"name": "vip", "pool": "chat", "priority": "critical"}
    data["listeners"][0]["routes"].insert(0, {**critical, "match": {"prefix": CRITICAL_PREFIX}})
    return data


async def _post(
    session: aiohttp.ClientSession, url: str, n: int, *, band: str | None = "medium"
) -> tuple[int, str, float]:
    """Status, the backend (or the flow-control reason) and the seconds it took; ``band``
    ``None``: the request names none."""
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": f"hi {n}"}]})
    headers = {} if band is None else {"x-priority": band}
    started = time.monotonic()
    async with session.post(url, data=body, headers=headers) as response:
        await response.read()
        said = response.headers.get(BACKEND_HEADER) or response.headers.get("x-xds-control-flow")
        return response.status, said or "", time.monotonic() - started


async def _queued(stack: EchoStack, count: int, *, band: str = "medium") -> bool:
    metrics = await stack.control_plane.metrics()
    return f'xds_control_flow_queued{{band="{band}",pool="chat"}} {count:.1f}' in metrics


async def test_a_pool_with_no_ready_server_holds_its_requests_until_one_is(
    tmp_path: Path,
) -> None:
    stack = echo_stack(tmp_path, backends=1)
    picker = f"127.0.0.1:{free_port()}"
    try:
        await stack.start(_config(stack, picker=picker, servers=0))
        url = f"{stack.url}/v1/chat/completions"
        timeout = aiohttp.ClientTimeout(total=3 * MAX_WAIT_S)
        async with aiohttp.ClientSession(timeout=timeout) as session:
            # Scale from zero: three requests wait; the server arrives within the wait.
            waiting = [asyncio.create_task(_post(session, url, n)) for n in range(3)]
            await eventually(lambda: _queued(stack, 3), timeout=MAX_WAIT_S / 2)
            stack.write_config(_config(stack, picker=picker, servers=1))
            answers = await asyncio.gather(*waiting)
            server = stack.backends.address(0)
            assert [(status, said) for status, said, _ in answers] == [(200, server)] * 3

            # Back to zero: a request waits the whole max_wait_s, then 503 with the reason.
            stack.write_config(_config(stack, picker=picker, servers=0))

            async def gone() -> bool:
                status, _, _ = await _post(session, url, 99)
                return status == 503

            await eventually(gone, timeout=3 * MAX_WAIT_S)
            status, said, took = await _post(session, url, 100)
            assert (status, said) == (503, "no-ready-endpoint")
            assert MAX_WAIT_S - 0.5 <= took <= MAX_WAIT_S + 2.0, took
    finally:
        await stack.close()


async def test_a_full_queue_refuses_at_once_with_429_and_retry_after(tmp_path: Path) -> None:
    stack = echo_stack(tmp_path, backends=1)
    picker = f"127.0.0.1:{free_port()}"
    try:
        await stack.start(_config(stack, picker=picker, servers=0, max_queued=2))
        url = f"{stack.url}/v1/chat/completions"
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as session:
            waiting = [asyncio.create_task(_post(session, url, n)) for n in range(2)]
            await eventually(lambda: _queued(stack, 2), timeout=MAX_WAIT_S / 2)  # the queue is full
            body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "x"}]})
            started = time.monotonic()
            async with session.post(url, data=body) as response:
                await response.read()
                assert response.status == 429
                assert response.headers["x-xds-control-flow"] == "queue-full"
                assert response.headers["retry-after"] == "1"
            assert time.monotonic() - started < 1.0  # at once, not after the wait
            stack.write_config(_config(stack, picker=picker, servers=1, max_queued=2))
            assert [status for status, _, _ in await asyncio.gather(*waiting)] == [200, 200]
    finally:
        await stack.close()


async def test_a_band_with_a_shorter_wait_is_refused_at_it_while_another_waits_on(
    tmp_path: Path,
) -> None:
    stack = echo_stack(tmp_path, backends=1)
    picker = f"127.0.0.1:{free_port()}"
    flow: dict[str, Any] = {"max_wait_s": 10.0, "band_max_wait_s": {"medium": 1.0}}
    try:
        await stack.start(_config(stack, picker=picker, servers=0, **flow))
        url = f"{stack.url}/v1/chat/completions"
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as session:
            # Critical by its header, and by its route with no header at all.
            critical = [
                asyncio.create_task(_post(session, url, 0, band="critical")),
                asyncio.create_task(_post(session, stack.url + CRITICAL_PREFIX, 1, band=None)),
            ]
            await eventually(lambda: _queued(stack, 2, band="critical"), timeout=MAX_WAIT_S / 2)
            status, said, took = await _post(session, url, 2, band=None)  # medium: no class
            assert (status, said) == (503, "no-ready-endpoint")
            assert 0.5 <= took < 5.0, took  # its band's wait, not the pool's 10 s
            assert not any(task.done() for task in critical)
            stack.write_config(_config(stack, picker=picker, servers=1, **flow))
            answers = await asyncio.gather(*critical)
            server = stack.backends.address(0)
            assert [(status, said) for status, said, _ in answers] == [(200, server)] * 2
    finally:
        await stack.close()
