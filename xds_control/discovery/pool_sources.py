"""Which source each pool's endpoints come from, and the lifetimes of the watching ones.

``endpoint_source`` is the one factory: Kubernetes (EndpointSlices or an InferencePool), DNS,
a watched file or the config's own
list, wrapped once in ``SingleDeviceSource`` for a ``single_device`` pool. A config reload
builds every pool's source anew; a watching source whose settings did not change is kept
instead (``carry_over``), so an unrelated edit does not list every Service again, and one
that is dropped is closed (its watch task and connection end).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from xds_control.config import Pool
from xds_control.discovery.devices import SingleDeviceSource
from xds_control.discovery.dns import DnsSource
from xds_control.discovery.file import FileSource
from xds_control.discovery.kubernetes import FailureMode, InferencePoolSource, KubernetesSource
from xds_control.discovery.protocol import EndpointSource
from xds_control.discovery.static import StaticSource
from xds_control.tasks import guarded_task

__all__ = [
    "carry_over",
    "close_sources",
    "endpoint_source",
    "endpoints_path",
    "failure_modes",
]

_WATCHING = (KubernetesSource, InferencePoolSource)
"""Sources with a watch task and a connection, closed when dropped."""


def endpoint_source(
    pool: Pool, *, base: Path, wake: Callable[[], None] = lambda: None
) -> EndpointSource:
    """The source of ``pool``'s endpoints; relative files are read from ``base``; ``wake``
    starts a reconcile when a watched (Kubernetes) source changes."""
    source = _source(pool, base=base, wake=wake)
    # The config refuses single_device on a DNS pool: its answers say nothing of GPUs.
    return SingleDeviceSource(source, pool=pool.name) if pool.single_device else source


def _source(pool: Pool, *, base: Path, wake: Callable[[], None]) -> EndpointSource:
    if pool.kubernetes is not None:
        return KubernetesSource(pool.kubernetes, pool=pool.name, wake=wake)
    if pool.inference_pool is not None:
        return InferencePoolSource(pool.inference_pool, pool=pool.name, wake=wake)
    if pool.dns is not None:
        return DnsSource(pool.dns)
    path = endpoints_path(pool, base=base)
    return StaticSource(pool.endpoints) if path is None else FileSource(path)


def endpoints_path(pool: Pool, *, base: Path) -> Path | None:
    """``pool``'s endpoints file (relative to ``base``), ``None`` when it has none."""
    if pool.endpoints_file is None:
        return None
    return pool.endpoints_file if pool.endpoints_file.is_absolute() else base / pool.endpoints_file


def _unwrapped(source: EndpointSource) -> EndpointSource:
    return source.source if isinstance(source, SingleDeviceSource) else source


def _same(old: EndpointSource, new: EndpointSource) -> bool:
    if type(old) is not type(new):  # single_device turned on or off
        return False
    old, new = _unwrapped(old), _unwrapped(new)
    if isinstance(old, KubernetesSource) and isinstance(new, KubernetesSource):
        return old.settings == new.settings
    if isinstance(old, InferencePoolSource) and isinstance(new, InferencePoolSource):
        return old.settings == new.settings
    if isinstance(old, DnsSource) and isinstance(new, DnsSource):
        return old.settings == new.settings
    return False


def carry_over(
    *, old: Mapping[str, EndpointSource], new: Mapping[str, EndpointSource]
) -> dict[str, EndpointSource]:
    """``new``, keeping each pool's ``old`` Kubernetes, InferencePool or DNS source whose
    settings are unchanged (it keeps its watch and last answers); the old ones not kept are
    closed in the background."""
    kept = {
        name: old[name] for name, source in new.items() if name in old and _same(old[name], source)
    }
    dropped = [s for name, s in old.items() if kept.get(name) is not s]
    if any(isinstance(_unwrapped(s), _WATCHING) for s in dropped):
        guarded_task(close_sources(dropped), name="close-endpoint-sources")
    return {name: kept.get(name, source) for name, source in new.items()}


async def close_sources(sources: Iterable[EndpointSource]) -> None:
    """End the watches of the sources that have one."""
    watching = (_unwrapped(s) for s in sources)
    closing = [s.close() for s in watching if isinstance(s, _WATCHING)]
    await asyncio.gather(*closing, return_exceptions=True)


def failure_modes(sources: Mapping[str, EndpointSource]) -> dict[str, FailureMode]:
    """Pool name -> its InferencePool's ``endpointPickerRef.failureMode``, for each pool whose
    source has read an InferencePool that names a picker."""
    modes: dict[str, FailureMode] = {}
    for name, source in sources.items():
        inner = _unwrapped(source)
        if isinstance(inner, InferencePoolSource) and inner.spec and inner.spec.picker:
            modes[name] = inner.spec.picker.failure_mode
    return modes
