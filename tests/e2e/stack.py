"""Echo backends behind the harness's ``Stack`` for the end-to-end tests, the one-pool config
over them with the weights a test asks for, and traffic that counts who answered."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from xds_control.xds.bootstrap import AdsVariant
from xds_lab.harness.backends import BACKEND_HEADER, EchoBackends
from xds_lab.harness.pool_config import POOL, one_pool_config
from xds_lab.harness.ports import free_port
from xds_lab.harness.stack import Stack
from xds_lab.harness.traffic import count_backends

EchoStack = Stack[EchoBackends]

BOTH_PROTOCOLS = pytest.mark.parametrize("stack", ["sotw", "delta"], indirect=True)
"""Run a test once with Envoys on state-of-the-world ADS and once on delta (``DELTA_GRPC``)."""


def echo_stack(workdir: Path, *, backends: int = 2, ads: AdsVariant = "sotw") -> EchoStack:
    """``backends`` echo backends behind a stack not yet started; its Envoys speak ``ads``."""
    echo = EchoBackends(ports=[free_port() for _ in range(backends)])
    return Stack(workdir=workdir, backends=echo, ads=ads)


def weighted_config(stack: EchoStack, weights: list[int], **route: Any) -> dict[str, Any]:
    """One MAGLEV pool over the backends with ``weights``, one listener, one route."""
    backends = stack.backends
    return one_pool_config(
        endpoints=[{"address": backends.address(i), "weight": w} for i, w in enumerate(weights)],
        listener_port=stack.listener_port,
        route=route,
    )


async def traffic(
    stack: EchoStack, *, count: int, key: Callable[[int], str] | None = None
) -> Counter[str]:
    """Send ``count`` requests with hash keys ``key(i)`` (default: all distinct)."""
    make_key = key or (lambda i: f"prefix-{i}")
    return await count_backends(
        url=f"{stack.url}/v1/completions",
        count=count,
        headers_for=lambda i: {"x-prefix-hash": make_key(i)},
        backend_header=BACKEND_HEADER,
    )


async def eventually(
    check: Callable[[], Awaitable[bool]], *, timeout: float = 20.0, what: str = "condition"
) -> None:
    """Poll ``check`` until it is true; fail with ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if await check():
            return
        await asyncio.sleep(0.2)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


async def envoy_holds(
    stack: EchoStack,
    expected: Mapping[str, str],
    *,
    what: str,
    timeout: float,
    pool: str = POOL,
) -> None:
    """Wait until Envoy's cluster ``pool`` holds exactly the hosts ``expected`` (server name ->
    EDS health, as ``envoy_hosts`` names them)."""

    async def check() -> bool:
        hosts = await stack.envoy_hosts(pool=pool)
        return {name: host.health for name, host in hosts.items()} == dict(expected)

    await eventually(check, timeout=timeout, what=what)


async def start_one_pool(stack: EchoStack, pool: Mapping[str, Any]) -> None:
    """The control plane with ``pool`` (its settings but the name) as its one pool, ``chat``,
    reconciling every 30 s, longer than any wait for a watched change; one Envoy."""
    config = one_pool_config(endpoints=[], listener_port=stack.listener_port)
    config["pools"][0] = {"name": "chat", **pool}
    config["signals"] = {"reconcile_period_s": 30}
    await stack.start(config)
