"""The control loop: watch the config and endpoint sources, publish a snapshot on change."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog

from xds_control.cache import DEFAULT_GROUP, SnapshotCache
from xds_control.config import Config, Pool, load_config
from xds_control.control.metrics import (
    CONFIG_RELOADS,
    DISCOVERY_ERRORS,
    LAST_PUBLISH,
    SNAPSHOT_INFO,
    SNAPSHOTS_PUBLISHED,
)
from xds_control.control.reconcile import EndpointWeight, reconcile_once
from xds_control.control.weigher import Weigher, targets_of
from xds_control.discovery import (
    Endpoint,
    EndpointSource,
    FileSource,
    FileStamp,
    StaticSource,
    file_stamp,
)
from xds_control.errors import ConfigError, DiscoveryError, SnapshotError
from xds_control.tasks import guarded_task

__all__ = ["ControlLoop", "LoopState", "endpoint_source"]

log = structlog.get_logger(__name__)


def _stamp(path: Path) -> FileStamp | None:
    try:
        return file_stamp(path)
    except OSError:
        return None  # a missing file is a change too; load_config then reports it


def endpoint_source(pool: Pool, *, base: Path) -> EndpointSource:
    """The source of ``pool``'s endpoints; relative files are read from ``base``."""
    if pool.endpoints_file is None:
        return StaticSource(pool.endpoints)
    path = pool.endpoints_file if pool.endpoints_file.is_absolute() else base / pool.endpoints_file
    return FileSource(path)


@dataclass
class LoopState:
    """What the admin API shows about the loop."""

    config: Config
    config_path: Path
    config_error: str | None = None
    discovery_errors: dict[str, str] = field(default_factory=dict)
    endpoints: dict[str, tuple[Endpoint, ...]] = field(default_factory=dict)
    version: str = ""
    published_at: float = 0.0


class ControlLoop:
    """Every reconcile period (``signals.reconcile_period_s``): reload the config if its file
    changed, fetch endpoints, let the weigher decide weights, publish if anything changed. A bad
    edit is logged and rejected, and the last good config and endpoints keep being served."""

    def __init__(
        self,
        *,
        config: Config,
        config_path: Path,
        cache: SnapshotCache,
        weigher: Weigher | None = None,
        on_signals_change: Callable[[Config], None] | None = None,
    ) -> None:
        self.state = LoopState(config=config, config_path=config_path)
        self.weigher = weigher
        self._on_signals_change = on_signals_change
        self._cache = cache
        self._stamp = _stamp(config_path)
        self._sources = self._make_sources(config)
        self.published = asyncio.Event()
        self._last_inputs: tuple[Config, dict[str, tuple[Endpoint, ...]], dict[str, Any]] | None = (
            None
        )

    def _make_sources(self, config: Config) -> dict[str, EndpointSource]:
        base = self.state.config_path.parent
        return {pool.name: endpoint_source(pool, base=base) for pool in config.pools}

    async def run(self) -> None:
        """Reconcile forever (and scrape, on the fast path); never raises for bad input."""
        scraper = guarded_task(self._scrape_forever(), name="signals-scrape")
        try:
            while True:
                await self.step()
                await asyncio.sleep(self.state.config.signals.reconcile_period_s)
        finally:
            scraper.cancel()

    async def _scrape_forever(self) -> None:
        # The fast path: sub-second scrapes of each endpoint's /metrics, read by the next step.
        while True:
            scrape = self.weigher.scrape if self.weigher is not None else None
            if scrape is not None:
                await scrape.fetch(targets_of(self.state.config, self.state.endpoints))
            await asyncio.sleep(self.state.config.signals.scrape.interval_s)

    async def step(self) -> None:
        """One pass: reload the config if its file changed, fetch endpoints, decide weights,
        publish."""
        await self._reload_config()
        await self._fetch_endpoints()
        state = self.state
        weights: dict[str, EndpointWeight] = {}
        if self.weigher is not None and self.weigher.enabled:
            decisions = await self.weigher.weigh(config=state.config, endpoints=state.endpoints)
            weights = {a: EndpointWeight(d.weight, d.health) for a, d in decisions.items()}
        inputs = (state.config, dict(state.endpoints), weights)
        if inputs == self._last_inputs:
            return  # same config, endpoints and weights: the same snapshot, not worth building
        try:
            snapshot = reconcile_once(
                config=state.config, endpoints=state.endpoints, weights=weights
            )
        except SnapshotError as exc:
            log.error("snapshot is inconsistent; keeping the last one", error=str(exc))
            return
        self._last_inputs = inputs
        if self._cache.set_snapshot(DEFAULT_GROUP, snapshot):
            state.version = snapshot.version
            state.published_at = time.time()
            SNAPSHOTS_PUBLISHED.inc()
            SNAPSHOT_INFO.info({"version": snapshot.version})
            LAST_PUBLISH.set(state.published_at)
        self.published.set()

    async def _reload_config(self) -> None:
        path = self.state.config_path
        stamp = await asyncio.to_thread(_stamp, path)
        if stamp == self._stamp:
            return
        self._stamp = stamp
        try:
            config = await asyncio.to_thread(load_config, path)
        except ConfigError as exc:
            CONFIG_RELOADS.labels(result="rejected").inc()
            self.state.config_error = str(exc)
            log.error(
                "config rejected; serving the last good one",
                path=str(path),
                problems=[f"{p}: {m}" if p else m for p, m in exc.problems],
            )
            return
        CONFIG_RELOADS.labels(result="ok").inc()
        if config.signals != self.state.config.signals and self._on_signals_change is not None:
            self._on_signals_change(config)
        self.state.config = config
        self.state.config_error = None
        self._sources = self._make_sources(config)
        self.state.endpoints = {
            name: eps for name, eps in self.state.endpoints.items() if name in self._sources
        }
        log.info("config reloaded", path=str(path), **config.summary())

    async def _fetch_endpoints(self) -> None:
        state = self.state
        for name, source in self._sources.items():
            try:
                state.endpoints[name] = await source.fetch()
            except DiscoveryError as exc:
                DISCOVERY_ERRORS.labels(pool=name).inc()
                if state.discovery_errors.get(name) != str(exc):
                    log.error(
                        "endpoints rejected; keeping the last good set", pool=name, error=str(exc)
                    )
                state.discovery_errors[name] = str(exc)
            else:
                state.discovery_errors.pop(name, None)
