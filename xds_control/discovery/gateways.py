"""How many Envoys a node group's fleet has (``config.gateways``), and how many control-plane
replicas serve it (``config.control_planes``), read where every replica reads the same answer:
a Service's ready endpoints, a name's addresses, or a fixed count.

The Service is watched as a pool's is (``KubernetesSource``, no pod reads: only the count
matters), the names resolved as a pool's are (``DnsSource``). A failed read raises
``DiscoveryError``; the caller keeps the last good size.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from xds_control.config import GatewayFleet
from xds_control.config.discovery import KubernetesDiscovery
from xds_control.discovery.dns import DnsSource
from xds_control.discovery.health import Health
from xds_control.discovery.kubernetes import KubernetesSource
from xds_control.tasks import guarded_task

__all__ = ["CONTROL_PLANES", "FleetSize", "fleet_key", "follow_fleets", "sized_fleets"]

CONTROL_PLANES = "control-planes"
"""The key of the control-plane replicas' count (``config.control_planes``)."""


def fleet_key(group: str) -> str:
    """The key of a group's fleet read in ``discovery_errors`` (beside the pools')."""
    return f"gateways/{group}"


def sized_fleets(
    gateways: Mapping[str, GatewayFleet], control_planes: GatewayFleet | None
) -> dict[str, GatewayFleet]:
    """Key -> where a size comes from: each group's gateway fleet (``fleet_key``) and the
    control-plane replicas (``CONTROL_PLANES``), for those the config gives."""
    out = {fleet_key(group): settings for group, settings in gateways.items()}
    if control_planes is not None:
        out[CONTROL_PLANES] = control_planes
    return out


class FleetSize:
    """The size of one fleet, read under ``key``; ``wake`` is called when a watched Service
    changes."""

    def __init__(self, settings: GatewayFleet, *, key: str, wake: Callable[[], None]) -> None:
        self.settings = settings
        self._source: KubernetesSource | DnsSource | None = None
        if settings.kubernetes is not None:
            discovery = KubernetesDiscovery(**settings.kubernetes.model_dump(), pod_metadata=False)
            self._source = KubernetesSource(discovery, pool=key, wake=wake)
        elif settings.dns is not None:
            self._source = DnsSource(settings.dns)

    async def fetch(self) -> int:
        """The fleet's size now: its ready gateways (a fixed count as given)."""
        if self._source is None:
            assert self.settings.count is not None  # the config gives exactly one source
            return self.settings.count
        endpoints = await self._source.fetch()
        return len({e.address for e in endpoints if e.health is Health.HEALTHY})

    async def close(self) -> None:
        """End the Service's watch, if there is one."""
        if isinstance(self._source, KubernetesSource):
            await self._source.close()


def follow_fleets(
    old: Mapping[str, FleetSize],
    fleets: Mapping[str, GatewayFleet],
    *,
    wake: Callable[[], None],
) -> dict[str, FleetSize]:
    """A ``FleetSize`` per key of ``fleets`` (``sized_fleets``), keeping each of ``old`` whose
    settings did not change (its watch and last answer); the others are closed in the
    background."""
    made = {
        key: old[key]
        if key in old and old[key].settings == settings
        else FleetSize(settings, key=key, wake=wake)
        for key, settings in fleets.items()
    }
    for key, size in old.items():
        if made.get(key) is not size:
            guarded_task(size.close(), name=f"close-{key}")
    return made
