"""A real stack on loopback: echo backends, `xds-control serve` as a process, real Envoys."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

from xds_lab.harness.backends import BACKEND_HEADER, EchoBackends
from xds_lab.harness.control_plane import ControlPlaneProcess
from xds_lab.harness.envoy import EnvoyProcess
from xds_lab.harness.pool_config import one_pool_config
from xds_lab.harness.ports import free_port
from xds_lab.harness.traffic import count_backends


def stack_config(
    *, backends: EchoBackends, weights: list[int], listener_port: int, **route: Any
) -> dict[str, Any]:
    """One MAGLEV pool over the backends with ``weights``, one listener, one route."""
    return one_pool_config(
        endpoints=[{"address": backends.address(i), "weight": w} for i, w in enumerate(weights)],
        listener_port=listener_port,
        route=route,
    )


class Stack:
    """Backends, control plane and Envoys for one test; ``close`` stops everything."""

    def __init__(self, workdir: Path, *, backends: int = 2) -> None:
        self.workdir = workdir
        self.backends = EchoBackends(ports=[free_port() for _ in range(backends)])
        self.listener_port = free_port()
        self.config_path = workdir / "config.yaml"
        self.control_plane = ControlPlaneProcess(config_path=self.config_path, workdir=workdir)
        self.envoys: list[EnvoyProcess] = []

    def write_config(self, data: Mapping[str, Any] | str) -> None:
        """Replace the config file atomically (as an editor or a ConfigMap update does)."""
        self.control_plane.write_config(data)

    def write_weights(self, weights: list[int], **route: Any) -> None:
        """Config with one pool of the backends weighted ``weights``."""
        self.write_config(
            stack_config(
                backends=self.backends,
                weights=weights,
                listener_port=self.listener_port,
                **route,
            )
        )

    async def start(self, *, weights: list[int], envoys: int = 1) -> None:
        """Start backends, the control plane, and ``envoys`` Envoys, all LIVE."""
        await self.backends.start()
        self.write_weights(weights)
        await self.control_plane.start()
        for index in range(envoys):
            await self.add_envoy(node_id=f"envoy-{index}")

    async def add_envoy(self, *, node_id: str) -> EnvoyProcess:
        """Start one more Envoy and wait until it is LIVE."""
        envoy = EnvoyProcess(
            workdir=self.workdir, xds_port=self.control_plane.xds_port, node_id=node_id
        )
        self.envoys.append(envoy)
        await envoy.start()
        await envoy.wait_live()
        return envoy

    @property
    def url(self) -> str:
        """Envoy's listener."""
        return f"http://127.0.0.1:{self.listener_port}/v1/completions"

    async def traffic(
        self, *, count: int, key: Callable[[int], str] | None = None, port: int | None = None
    ) -> Counter[str]:
        """Send ``count`` requests with hash keys ``key(i)`` (default: all distinct)."""
        make_key = key or (lambda i: f"prefix-{i}")
        url = self.url if port is None else f"http://127.0.0.1:{port}/v1/completions"
        return await count_backends(
            url=url,
            count=count,
            headers_for=lambda i: {"x-prefix-hash": make_key(i)},
            backend_header=BACKEND_HEADER,
        )

    async def close(self) -> None:
        """Stop everything, Envoys first."""
        for envoy in self.envoys:
            await envoy.stop()
        await self.control_plane.stop()
        await self.backends.stop()


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
