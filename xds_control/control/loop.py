"""The control loop: watch the config and endpoint sources, publish a snapshot on change."""

from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

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
from xds_control.control.reconcile import reconcile_once
from xds_control.discovery import Endpoint, EndpointSource, FileSource, StaticSource
from xds_control.errors import ConfigError, DiscoveryError, SnapshotError

__all__ = ["ControlLoop", "LoopState", "endpoint_source"]

log = structlog.get_logger(__name__)


def _stamp(path: Path) -> tuple[int, int, int] | None:
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return (stat.st_mtime_ns, stat.st_size, stat.st_ino)


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
    """Polls the config file and endpoint sources every ``period_s``; a bad edit is logged and
    rejected, and the last good config and endpoints keep being served."""

    def __init__(
        self, *, config: Config, config_path: Path, cache: SnapshotCache, period_s: float = 0.5
    ) -> None:
        self.state = LoopState(config=config, config_path=config_path)
        self._cache = cache
        self._period_s = period_s
        self._stamp = _stamp(config_path)
        self._sources = self._make_sources(config)
        self.published = asyncio.Event()

    def _make_sources(self, config: Config) -> dict[str, EndpointSource]:
        base = self.state.config_path.parent
        return {pool.name: endpoint_source(pool, base=base) for pool in config.pools}

    async def run(self) -> None:
        """Reconcile forever; never raises for bad input."""
        while True:
            await self.step()
            await asyncio.sleep(self._period_s)

    async def step(self) -> None:
        """One pass: reload the config if its file changed, fetch endpoints, publish."""
        await self._reload_config()
        await self._fetch_endpoints()
        state = self.state
        try:
            snapshot = reconcile_once(config=state.config, endpoints=state.endpoints, weights={})
        except SnapshotError as exc:
            log.error("snapshot is inconsistent; keeping the last one", error=str(exc))
            return
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
