"""A simulated fleet (in this process), the control plane with the weight engine on, a real
Envoy, optionally a real Prometheus, and background load through Envoy."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from pathlib import Path
from typing import Any

import aiohttp

from xds_lab.harness.control_plane import ControlPlaneProcess
from xds_lab.harness.envoy import EnvoyProcess
from xds_lab.harness.pool_config import one_pool_config
from xds_lab.harness.ports import free_port
from xds_lab.harness.prometheus import Prometheus, Target
from xds_lab.loadgen.runner import run_load
from xds_lab.loadgen.workloads import LoadSpec, build_requests
from xds_lab.sim.fleet import Fleet, FleetSpec, ServerSpec


class EngineStack:
    """Servers ``s0``, ``s1``, ... with the given profiles (and profile overrides)."""

    def __init__(
        self, workdir: Path, *, profiles: list[str], overrides: dict[str, Any] | None = None
    ) -> None:
        self.workdir = workdir
        servers = [
            ServerSpec(name=f"s{i}", profile=p, port=free_port(), overrides=overrides or {})
            for i, p in enumerate(profiles)
        ]
        self.fleet = Fleet(FleetSpec(host="127.0.0.1", control_port=None, servers=servers))
        self.address = {s.name: f"127.0.0.1:{s.port}" for s in servers}
        self.listener_port = free_port()
        self.config_path = workdir / "config.yaml"
        self.control_plane = ControlPlaneProcess(config_path=self.config_path, workdir=workdir)
        self.prometheus: Prometheus | None = None
        self.envoy: EnvoyProcess | None = None
        self._loads: list[asyncio.Task[Any]] = []

    def config(
        self, *, signals: dict[str, Any], weights: dict[str, Any], servers: list[str] | None = None
    ) -> dict[str, Any]:
        """One vLLM pool over ``servers`` (default all) with the engine settings given."""
        names = servers if servers is not None else list(self.address)
        return one_pool_config(
            endpoints=[{"address": self.address[n]} for n in names],
            listener_port=self.listener_port,
            pool={"engine": "vllm", "weights": weights},
            signals=signals,
        )

    def write_config(self, data: dict[str, Any]) -> None:
        """Atomically replace the config file."""
        self.control_plane.write_config(data)

    async def start(self, config: dict[str, Any], *, prometheus: bool = False) -> None:
        """Start the fleet, Prometheus (if asked), the control plane and Envoy."""
        await self.fleet.start()
        if prometheus:
            targets = [Target(address=a) for a in self.address.values()]
            self.prometheus = Prometheus(targets=targets, scrape_interval_s=1.0)
            await self.prometheus.start()
            await self.prometheus.wait_for_targets(len(targets))
            config["signals"]["prometheus_url"] = self.prometheus.url
        self.write_config(config)
        await self.control_plane.start()
        self.envoy = EnvoyProcess(workdir=self.workdir, xds_port=self.control_plane.xds_port)
        await self.envoy.start()
        await self.envoy.wait_live()

    @property
    def url(self) -> str:
        """Envoy's listener."""
        return f"http://127.0.0.1:{self.listener_port}"

    async def envoy_weights(self) -> dict[str, int]:
        """Server name -> the weight Envoy is using."""
        assert self.envoy is not None
        by_address = {v: k for k, v in self.address.items()}
        hosts = await self.envoy.cluster_hosts("chat")
        return {by_address[h.address]: h.weight for h in hosts}

    async def decisions(self) -> dict[str, dict[str, Any]]:
        """Server name -> the engine's explained decision."""
        data = await self.control_plane.get_json("/v1/weights?explain=1")
        by_address = {v: k for k, v in self.address.items()}
        return {by_address[d["address"]]: d for d in data["pools"]["chat"]}

    async def load(
        self, *, rate: float, seconds: float, seed: int = 1, output_mean: float = 40
    ) -> Counter[str]:
        """Offer chat load through Envoy; count which server answered each request."""
        spec = LoadSpec(
            rate=rate,
            requests=max(1, int(rate * seconds)),
            seed=seed,
            input_mean=200,
            output_mean=output_mean,
            output_cap=4 * int(output_mean),
            stream_fraction=0.0,
        )
        run = await run_load(self.url, build_requests(spec), timeout_s=60)
        return Counter(r.server for r in run.results if r.server)

    def load_in_background(self, *, rate: float, seconds: float, seed: int = 1) -> None:
        """Start ``load`` as a task; ``close`` cancels it."""
        self._loads.append(
            asyncio.create_task(self.load(rate=rate, seconds=seconds, seed=seed), name="load")
        )

    async def flood(self, server: str, *, requests: int) -> list[asyncio.Task[Any]]:
        """Send ``requests`` long completions straight to ``server`` (not through Envoy)."""
        session = aiohttp.ClientSession()
        body = json.dumps({"model": "m", "prompt": "flood " * 50, "max_tokens": 400})

        async def one() -> None:
            try:
                async with session.post(
                    f"http://{self.address[server]}/v1/completions",
                    data=body,
                    headers={"content-type": "application/json"},
                ) as response:
                    await response.read()
            except aiohttp.ClientError:
                pass

        tasks = [asyncio.create_task(one(), name=f"flood-{i}") for i in range(requests)]

        async def close_when_done() -> None:
            await asyncio.gather(*tasks, return_exceptions=True)
            await session.close()

        self._loads.append(asyncio.create_task(close_when_done(), name="flood-closer"))
        return tasks

    async def close(self) -> None:
        """Stop everything."""
        for task in self._loads:
            task.cancel()
        await asyncio.gather(*self._loads, return_exceptions=True)
        if self.envoy is not None:
            await self.envoy.stop()
        await self.control_plane.stop()
        if self.prometheus is not None:
            await self.prometheus.stop()
        await self.fleet.stop()
