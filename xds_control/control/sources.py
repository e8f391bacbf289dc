"""Sources that discover endpoints at run time (Kubernetes, DNS), and their lifetimes.

A config reload builds every pool's source anew; a watching source whose settings did not
change is kept instead, so an unrelated edit does not list every Service again, and one that
is dropped is closed (its watch task and connection end).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping

from xds_control.config import Pool
from xds_control.discovery import EndpointSource
from xds_control.discovery.devices import SingleDeviceSource
from xds_control.discovery.dns import DnsSource
from xds_control.discovery.kubernetes import KubernetesSource
from xds_control.tasks import guarded_task

__all__ = ["carry_over", "close_sources", "discovered_source"]


def discovered_source(pool: Pool, *, wake: Callable[[], None]) -> EndpointSource | None:
    """The pool's Kubernetes or DNS source, or ``None`` when its endpoints are in the config
    or a file. ``wake`` starts a reconcile when a watched source changes."""
    if pool.kubernetes is not None:
        source = KubernetesSource(pool.kubernetes, pool=pool.name, wake=wake)
        return SingleDeviceSource(source, pool=pool.name) if pool.single_device else source
    if pool.dns is not None:
        return DnsSource(pool.dns)
    return None


def _unwrapped(source: EndpointSource) -> EndpointSource:
    return source.source if isinstance(source, SingleDeviceSource) else source


def _same(old: EndpointSource, new: EndpointSource) -> bool:
    if type(old) is not type(new):  # single_device turned on or off
        return False
    old, new = _unwrapped(old), _unwrapped(new)
    if isinstance(old, KubernetesSource) and isinstance(new, KubernetesSource):
        return old.settings == new.settings
    if isinstance(old, DnsSource) and isinstance(new, DnsSource):
        return old.settings == new.settings
    return False


def carry_over(
    *, old: Mapping[str, EndpointSource], new: Mapping[str, EndpointSource]
) -> dict[str, EndpointSource]:
    """``new``, keeping each pool's ``old`` Kubernetes or DNS source whose settings are
    unchanged (it keeps its watch and last answers); the old ones not kept are closed in the
    background."""
    kept = {
        name: old[name] for name, source in new.items() if name in old and _same(old[name], source)
    }
    dropped = [s for name, s in old.items() if kept.get(name) is not s]
    if any(isinstance(_unwrapped(s), KubernetesSource) for s in dropped):
        guarded_task(close_sources(dropped), name="close-endpoint-sources")
    return {name: kept.get(name, source) for name, source in new.items()}


async def close_sources(sources: Iterable[EndpointSource]) -> None:
    """End the watches of the sources that have one."""
    watching = (_unwrapped(s) for s in sources)
    closing = [s.close() for s in watching if isinstance(s, KubernetesSource)]
    await asyncio.gather(*closing, return_exceptions=True)
