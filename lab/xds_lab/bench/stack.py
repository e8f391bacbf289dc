"""One scenario's processes: the fleet, the control plane and a real Envoy, per policy."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

from xds_lab.bench.fleet_process import FleetProcess
from xds_lab.bench.policies import Policy, control_plane_config
from xds_lab.bench.scenario import Scenario
from xds_lab.harness.control_plane import ControlPlaneProcess
from xds_lab.harness.envoy import EnvoyProcess
from xds_lab.harness.pool_config import POOL
from xds_lab.harness.ports import free_port
from xds_lab.sim.fleet import ServerSpec
from xds_lab.sim.profiles import get_profile

__all__ = ["BenchStack"]

_EDS = re.compile(r'^xds_control_ads_responses_total\{type="EDS"\}\s+(\S+)', re.MULTILINE)


class BenchStack:
    """Started once per scenario; ``use_policy`` gives a fresh control plane and Envoy."""

    def __init__(self, scenario: Scenario, *, workdir: Path) -> None:
        self.scenario = scenario
        self.workdir = workdir
        self.fleet = FleetProcess(
            servers=[
                ServerSpec(name=s.name, profile=s.profile, overrides=s.overrides)
                for s in scenario.fleet
            ],
            seed=scenario.seed,
            time_scale=scenario.time_scale,
            workdir=workdir,
        )
        self._slots = {
            s.name: get_profile(s.profile, **s.overrides).max_num_seqs for s in scenario.fleet
        }
        self.listener_port = free_port()
        self.config_path = workdir / "config.yaml"
        self.control_plane = ControlPlaneProcess(config_path=self.config_path, workdir=workdir)
        self.envoy: EnvoyProcess | None = None
        self.policy: Policy | None = None
        self._envoys = 0

    @property
    def url(self) -> str:
        """Envoy's listener: where the load goes."""
        return f"http://127.0.0.1:{self.listener_port}"

    async def start(self) -> None:
        """Start the fleet (the control plane and Envoy start with the first policy)."""
        await self.fleet.start()

    def _write_config(self, servers: list[str]) -> None:
        assert self.policy is not None
        data = control_plane_config(
            policy=self.policy,
            batch_slots={self.fleet.address[s]: self._slots[s] for s in servers},
            listener_port=self.listener_port,
        )
        self.control_plane.write_config(data)

    async def use_policy(self, policy: Policy) -> None:
        """Restart the control plane with ``policy`` and start a fresh Envoy against it.

        A fresh Envoy per policy: no connection, outlier or LB state carries over.
        """
        if self.envoy is not None:
            await self.envoy.stop()
        self.policy = policy
        self._write_config(self.scenario.pool_servers())
        await self.control_plane.restart()
        self._envoys += 1
        self.envoy = EnvoyProcess(
            workdir=self.workdir / f"envoy-{self._envoys}",
            xds_port=self.control_plane.xds_port,
            node_id=f"bench-{self._envoys}",
        )
        await self.envoy.start()
        await self.envoy.wait_live()

    async def add_servers(self, added: frozenset[str]) -> None:
        """Rewrite the pool to include late servers (the control plane polls its file)."""
        self._write_config(self.scenario.pool_servers(added=added))

    async def envoy_weights(self) -> dict[str, int]:
        """Server name -> the weight Envoy runs with now."""
        assert self.envoy is not None
        by_address = {v: k for k, v in self.fleet.address.items()}
        hosts = await self.envoy.cluster_hosts(POOL)
        return {by_address.get(h.address, h.address): h.weight for h in hosts}

    async def eds_responses(self) -> float:
        """EDS responses the control plane has sent since it started (weight pushes)."""
        match = _EDS.search(await self.control_plane.metrics())
        return float(match.group(1)) if match else 0.0

    async def close(self) -> None:
        """Stop Envoy, the control plane and the fleet; errors in one do not skip the others."""
        stops = []
        if self.envoy is not None:
            stops.append(self.envoy.stop())
        stops += [self.control_plane.stop(), self.fleet.stop()]
        await asyncio.gather(*stops, return_exceptions=True)
