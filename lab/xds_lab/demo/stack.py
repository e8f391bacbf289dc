"""What the tour runs: a mixed simulated fleet, ``xds-control serve`` with the weight engine on,
and a real Envoy in front; and one look at what each of them reports."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from xds_lab.harness.control_plane import ControlPlaneProcess
from xds_lab.harness.envoy import EnvoyProcess
from xds_lab.harness.pool_config import POOL, one_pool_config
from xds_lab.harness.ports import free_port
from xds_lab.sim.faults import FaultUpdate
from xds_lab.sim.fleet import Fleet, FleetSpec, ServerSpec

__all__ = ["FLEET", "POOL", "DemoStack", "ServerState"]

FLEET: tuple[tuple[str, str], ...] = (
    ("h100-0", "vllm-h100"),
    ("h100-1", "vllm-h100"),
    ("a100-0", "vllm-a100"),
    ("a100-1", "vllm-a100"),
    ("l4-0", "vllm-l4"),
    ("l4-1", "vllm-l4"),
)
"""One engine (a pool selects metric names by engine), three GPU classes: the capacity spread
DESIGN.md's fleet model used (A100 about 1.8x and L4 about 3.5x slower than an H100)."""

_SIGNALS = {
    # The fast path alone: Prometheus adds nothing the demo can show in a minute.
    # A 5 s rate window (default 10 s) lets a fault show within a short --duration run.
    "scrape": {"enabled": True, "interval_s": 0.5, "window_s": 5.0},
    "reconcile_period_s": 1.0,
}


@dataclass(frozen=True, slots=True)
class ServerState:
    """One server as Envoy and the engine see it; ``None`` when not (yet) reported."""

    envoy_weight: int | None
    envoy_health: str | None
    engine_weight: int | None = None
    reason: str = ""
    factors: dict[str, float] = field(default_factory=dict)
    inputs: dict[str, float] = field(default_factory=dict)


class DemoStack:
    """The fleet (in this process), the control plane and Envoy (child processes)."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        servers = [ServerSpec(name=n, profile=p, port=free_port()) for n, p in FLEET]
        self.fleet = Fleet(FleetSpec(host="127.0.0.1", control_port=None, servers=servers))
        self.profiles = {n: p for n, p in FLEET}
        self.address = {s.name: f"127.0.0.1:{s.port}" for s in servers}
        self._name_of = {a: n for n, a in self.address.items()}
        self.listener_port = free_port()
        self.config_path = workdir / "config.yaml"
        self.control_plane = ControlPlaneProcess(
            config_path=self.config_path, workdir=workdir, log_level="warning"
        )
        self.envoy: EnvoyProcess | None = None

    @property
    def url(self) -> str:
        """Envoy's listener: where the traffic goes."""
        return f"http://127.0.0.1:{self.listener_port}"

    def config(self) -> dict[str, Any]:
        """One vLLM pool over the whole fleet, weights from direct scrapes every second."""
        return one_pool_config(
            endpoints=[{"address": a} for a in self.address.values()],
            listener_port=self.listener_port,
            pool={"engine": "vllm"},
            signals=_SIGNALS,
        )

    async def start(self) -> None:
        """Start the fleet, then the control plane, then Envoy (LIVE when this returns)."""
        await self.fleet.start()
        self.control_plane.write_config(self.config())
        await self.control_plane.start()
        self.envoy = EnvoyProcess(workdir=self.workdir, xds_port=self.control_plane.xds_port)
        await self.envoy.start()
        await self.envoy.wait_live()

    async def stop(self) -> None:
        """Stop Envoy, the control plane and the fleet; safe after a partial start."""
        try:
            if self.envoy is not None:
                await self.envoy.stop()
            await self.control_plane.stop()
        finally:
            await self.fleet.stop()

    def slow_down(self, server: str, factor: float) -> None:
        """Inject the fault: every engine step of ``server`` takes ``factor`` times longer."""
        self.fleet.servers[server].faults.apply(FaultUpdate(slowdown=factor))

    def clear_faults(self, server: str) -> None:
        """Lift every fault on ``server``."""
        self.fleet.servers[server].faults.clear()

    async def observe(self) -> dict[str, ServerState]:
        """Envoy's weight and health per server (from ``/clusters``: what Envoy really uses) and
        the engine's decision (``/v1/weights?explain=1``)."""
        assert self.envoy is not None, "start() first"
        hosts = {h.address: h for h in await self.envoy.cluster_hosts(POOL)}
        explained = await self.control_plane.get_json("/v1/weights?explain=1")
        decisions = {d["address"]: d for d in explained.get("pools", {}).get(POOL, [])}
        states = {}
        for name, address in self.address.items():
            host = hosts.get(address)
            decision = decisions.get(address, {})
            states[name] = ServerState(
                envoy_weight=host.weight if host else None,
                envoy_health=host.health if host else None,
                engine_weight=decision.get("weight"),
                reason=str(decision.get("reason", "")),
                factors=dict(decision.get("factors", {})),
                inputs={k: v["value"] for k, v in decision.get("inputs", {}).items()},
            )
        return states
