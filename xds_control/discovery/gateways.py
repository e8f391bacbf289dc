"""How many Envoys a node group's fleet has, read where every control-plane replica reads the
same answer (``config.gateways``): the gateway Service's ready endpoints, a name's addresses,
or a fixed count.

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

__all__ = ["FleetSize", "fleet_key", "follow_fleets"]


def fleet_key(group: str) -> str:
    """The key of a group's fleet read in ``discovery_errors`` (beside the pools')."""
    return f"gateways/{group}"


class FleetSize:
    """The size of one group's gateway fleet; ``wake`` is called when a watched Service
    changes."""

    def __init__(self, settings: GatewayFleet, *, group: str, wake: Callable[[], None]) -> None:
        self.settings = settings
        self._source: KubernetesSource | DnsSource | None = None
        if settings.kubernetes is not None:
            discovery = KubernetesDiscovery(**settings.kubernetes.model_dump(), pod_metadata=False)
            self._source = KubernetesSource(discovery, pool=fleet_key(group), wake=wake)
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
    """A ``FleetSize`` per group of ``fleets``, keeping each of ``old`` whose settings did not
    change (its watch and last answer); the others are closed in the background."""
    made = {
        group: old[group]
        if group in old and old[group].settings == settings
        else FleetSize(settings, group=group, wake=wake)
        for group, settings in fleets.items()
    }
    for group, size in old.items():
        if made.get(group) is not size:
            guarded_task(size.close(), name=f"close-{fleet_key(group)}")
    return made
