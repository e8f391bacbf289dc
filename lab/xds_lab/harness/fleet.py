"""A simulated fleet in this process with every server's port chosen up front."""

from __future__ import annotations

from collections.abc import Iterable

from xds_lab.harness.ports import free_port
from xds_lab.sim.fleet import Fleet, FleetSpec, ServerSpec

__all__ = ["local_fleet", "pinned"]


def pinned(servers: Iterable[ServerSpec]) -> list[ServerSpec]:
    """``servers`` with a free loopback port for each that has none: a config can then name
    every server before the fleet starts."""
    return [s.model_copy(update={"port": s.port or free_port()}) for s in servers]


def local_fleet(servers: Iterable[ServerSpec], *, seed: int = 0, time_scale: float = 1.0) -> Fleet:
    """``servers`` on loopback in this process, with no fleet control endpoint."""
    spec = FleetSpec(
        host="127.0.0.1",
        control_port=None,
        seed=seed,
        time_scale=time_scale,
        servers=pinned(servers),
    )
    return Fleet(spec)
