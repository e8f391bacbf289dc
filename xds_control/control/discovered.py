"""The config the loop serves: the config file's, with a pool for each InferencePool that
``inference_pools`` finds, and each InferencePool pool's picker failing open or closed as its
object says.

Two pure steps and their owner:

- ``with_discovered_pools``: config + InferencePool names -> the config with a pool per name
  (``inference_pools``' defaults, endpoints from that InferencePool). The loop builds the
  pools' endpoint sources from this one, so a new pool's pods are listed and watched like
  those of any pool and a pool that goes closes its watches.
- ``with_failure_modes``: each pool whose InferencePool names a picker with ``failureMode``
  gets ``picker.fail_open`` from it (FailOpen true, FailClose false): the object is what the
  platform team wrote, the config's value is our default. Envoy then refuses that pool's
  requests when its picker cannot answer (``xds.picker``).

``DiscoveredPools`` holds the catalog watch across steps and returns the same ``Config`` object
while nothing changed, so the loop's "same inputs, nothing to build" check stays cheap.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import structlog

from xds_control.config import Config, Pool
from xds_control.config.discovery import InferencePoolDiscovery, KubeConnection
from xds_control.discovery import (
    EndpointSource,
    FailureMode,
    InferencePoolCatalog,
    failure_modes,
)
from xds_control.errors import DiscoveryError
from xds_control.tasks import guarded_task

__all__ = ["CATALOG", "DiscoveredPools", "with_discovered_pools", "with_failure_modes"]

log = structlog.get_logger(__name__)
CATALOG = "inference_pools"
"""The key of the InferencePool list's error in ``discovery_errors``."""


def _pool(config: Config, name: str) -> Pool:
    settings = config.inference_pools
    assert settings is not None  # only called with inference_pools set
    connection = settings.model_dump(include={*KubeConnection.model_fields, "namespace", "weight"})
    return Pool(
        name=name,
        engine=settings.engine,
        lb=settings.lb,
        picker=settings.picker,
        inference_pool=InferencePoolDiscovery(name=name, **connection),
    )


def with_discovered_pools(config: Config, names: Sequence[str]) -> tuple[Config, list[str]]:
    """``config`` with a pool for each of ``names`` after its own pools, and the names left
    out because the config has a pool of that name (the config's wins). Pure."""
    own = {pool.name for pool in config.pools}
    clashes = [name for name in names if name in own]
    added = tuple(_pool(config, name) for name in names if name not in own)
    if not added:
        return config, clashes
    return config.model_copy(update={"pools": config.pools + added}), clashes


def with_failure_modes(config: Config, modes: Mapping[str, FailureMode]) -> Config:
    """``config`` with each picker pool in ``modes`` failing open or closed as its
    InferencePool says; ``config`` itself when that changes nothing. Pure."""
    pools: list[Pool] = []
    for pool in config.pools:
        mode = modes.get(pool.name)
        if pool.picker is not None and mode is not None:
            fail_open = mode == "FailOpen"
            if pool.picker.fail_open != fail_open:
                picker = pool.picker.model_copy(update={"fail_open": fail_open})
                pool = pool.model_copy(update={"picker": picker})
        pools.append(pool)
    if all(new is old for new, old in zip(pools, config.pools, strict=True)):
        return config
    return config.model_copy(update={"pools": tuple(pools)})


class DiscoveredPools:
    """The InferencePools ``inference_pools`` watches, between steps of the loop; ``wake``
    starts a step when the set of them changes."""

    def __init__(self, *, wake: Callable[[], None]) -> None:
        self._wake = wake
        self._catalog: InferencePoolCatalog | None = None
        self._names: tuple[str, ...] = ()
        self._clashes: list[str] = []
        self._pools: tuple[Config, tuple[str, ...], Config] | None = None
        """(config, names, their result) of the last ``pools_config``."""
        self._served: tuple[Config, dict[str, FailureMode], Config] | None = None
        """(config, failure modes, their result) of the last ``served``."""

    async def pools_config(self, config: Config, *, errors: dict[str, str]) -> Config:
        """``config`` with the pools of the InferencePools found now; while the list fails,
        those of the last good list (the failure in ``errors`` under ``CATALOG``)."""
        self._follow(config)
        errors.pop(CATALOG, None)
        if self._catalog is not None:
            try:
                self._names = await self._catalog.fetch()
            except DiscoveryError as exc:
                errors[CATALOG] = str(exc)
        last = self._pools
        if last is not None and last[0] is config and last[1] == self._names:
            return last[2]
        made, clashes = with_discovered_pools(config, self._names)
        if clashes and clashes != self._clashes:
            log.error("InferencePool left out: the config has a pool of that name", pools=clashes)
        self._clashes = clashes
        self._pools = (config, self._names, made)
        return made

    def served(self, config: Config, *, sources: Mapping[str, EndpointSource]) -> Config:
        """``config`` (``pools_config``'s answer) as it is served: each InferencePool pool's
        failure mode applied."""
        modes = failure_modes(sources)
        last = self._served
        if last is not None and last[0] is config and last[1] == modes:
            return last[2]
        made = with_failure_modes(config, modes)
        self._served = (config, modes, made)
        return made

    async def close(self) -> None:
        """End the catalog's watch."""
        if self._catalog is not None:
            await self._catalog.close()
            self._catalog = None

    def _follow(self, config: Config) -> None:
        """Keep the catalog while ``inference_pools`` is unchanged; else start anew."""
        settings = config.inference_pools
        catalog = self._catalog
        if catalog is not None and catalog.settings == settings:
            return
        if catalog is not None:
            guarded_task(catalog.close(), name="close-inferencepools")
        self._catalog = None
        if settings is not None:
            self._catalog = InferencePoolCatalog(settings, wake=self._wake)
        self._names = ()
