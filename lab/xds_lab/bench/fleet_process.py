"""The parent's handle on ``fleet_worker``: start, reset, counters, faults, stop."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp

from xds_lab.harness.errors import HarnessError
from xds_lab.harness.fleet import pinned
from xds_lab.harness.ports import free_port
from xds_lab.harness.process import ManagedProcess, wait_until_ready
from xds_lab.sim.fleet import FleetSpec, ServerSpec

__all__ = ["FleetProcess"]


class FleetProcess:
    """A scenario's fleet in a child process; server ports are chosen here, up front."""

    def __init__(
        self, *, servers: list[ServerSpec], seed: int, time_scale: float, workdir: Path
    ) -> None:
        ports = pinned(servers)
        self.spec = FleetSpec(
            host="127.0.0.1", control_port=None, seed=seed, time_scale=time_scale, servers=ports
        )
        self.addresses = {s.name: f"127.0.0.1:{s.port}" for s in ports}
        self.control_port = free_port()
        workdir.mkdir(parents=True, exist_ok=True)
        spec_path = workdir / "fleet.json"
        spec_path.write_text(self.spec.model_dump_json())
        self.process = ManagedProcess(
            name="bench-fleet",
            argv=[
                sys.executable,
                "-m",
                "xds_lab.bench.fleet_worker",
                str(spec_path),
                str(self.control_port),
            ],
            log_path=workdir / "fleet.log",
        )

    @property
    def control_url(self) -> str:
        """Base URL of the worker's control app."""
        return f"http://127.0.0.1:{self.control_port}"

    async def _request(self, method: str, path: str, body: Any = None) -> Any:
        timeout = aiohttp.ClientTimeout(total=10)
        async with (
            aiohttp.ClientSession(timeout=timeout) as http,
            http.request(method, self.control_url + path, json=body) as resp,
        ):
            if resp.status != 200:
                raise HarnessError(f"fleet {method} {path}: {resp.status} {await resp.text()}")
            return await resp.json()

    async def start(self, *, timeout: float = 30.0) -> None:
        """Spawn the worker and wait until its control app answers."""
        await self.process.start()

        async def answers() -> bool:
            await self.counters()
            return True

        await wait_until_ready(answers, process=self.process, timeout=timeout, what="did not start")

    async def counters(self) -> dict[str, dict[str, int]]:
        """Per server: vLLM prefix counters (tokens), successes, running and waiting now."""
        data: dict[str, dict[str, int]] = await self._request("GET", "/bench/counters")
        return data

    async def wait_idle(self, *, timeout: float) -> bool:
        """Wait until no server runs or queues anything; False if ``timeout`` passed first."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            counters = await self.counters()
            if all(c["running"] == 0 and c["waiting"] == 0 for c in counters.values()):
                return True
            await asyncio.sleep(0.2)
        return False

    async def reset(self) -> None:
        """Cold caches and no faults on every server (counters keep counting)."""
        await self._request("POST", "/bench/reset")

    async def slow_down(self, server: str, factor: float) -> None:
        """Degrade ``server``: every step takes ``factor`` times as long."""
        await self._request("POST", f"/sim/servers/{server}/faults", {"slowdown": factor})

    async def stop(self) -> None:
        """SIGTERM the worker and wait."""
        await self.process.stop()
