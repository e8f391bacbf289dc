"""The control loop: watch the config and endpoint sources, publish a snapshot on change."""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, TypeVar

import structlog

from xds_control.cache import NodeRouting, SnapshotCache
from xds_control.config import Config, gateway_fleets, load_config
from xds_control.control.discovered import CATALOG, DiscoveredPools
from xds_control.control.metrics import (
    CONFIG_RELOADS,
    DISCOVERY_ERRORS,
    LAST_PUBLISH,
    LOOP_ERRORS,
    SNAPSHOT_INFO,
    SNAPSHOTS_PUBLISHED,
)
from xds_control.control.reconcile import ReconcileInputs, fleet_version, reconcile_groups
from xds_control.control.warm_start import WarmStart
from xds_control.control.watch import FileWatch
from xds_control.control.weigher import EngineWeights, Weigher, targets_of
from xds_control.discovery import (
    CONTROL_PLANES,
    Endpoint,
    EndpointSource,
    FileStamp,
    FleetSize,
    Health,
    carry_over,
    close_sources,
    endpoint_source,
    endpoints_path,
    file_stamp,
    fleet_key,
    follow_fleets,
    sized_fleets,
)
from xds_control.errors import ConfigError, DiscoveryError
from xds_control.limits import Buckets, Limiter
from xds_control.signals.kv_events import KvEvents
from xds_control.tasks import guarded_task, wait_set

__all__ = ["ControlLoop", "LoopState"]

log = structlog.get_logger(__name__)
T = TypeVar("T")


class _Failed:
    """What a phase that raised returns: its caller keeps the last good result."""


_FAILED: Final = _Failed()


def _stamp(path: Path) -> FileStamp | None:
    try:
        return file_stamp(path)
    except OSError:
        return None  # a missing file is a change too; load_config then reports it


def _watched_files(config: Config, *, config_path: Path) -> list[Path]:
    base = config_path.parent
    paths = (endpoints_path(pool, base=base) for pool in config.pools)
    return [config_path, *(p for p in paths if p is not None)]


@dataclass
class LoopState:
    """What the admin API shows about the loop."""

    config: Config
    config_path: Path
    config_error: str | None = None
    discovery_errors: dict[str, str] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    """Phase (config, endpoints, weights, limits, publish, state) -> the unexpected error of
    its last run; the phase's last good result is kept."""
    endpoints: dict[str, tuple[Endpoint, ...]] = field(default_factory=dict)
    fleet_sizes: dict[str, int] = field(default_factory=dict)
    """Node group -> its gateway fleet's size (``gateways``), for the groups that give one."""
    control_planes: int | None = None
    """How many control-plane replicas serve the fleet (``control_planes``); ``None``: not
    given, one."""
    version: str = ""
    published_at: float = 0.0


class ControlLoop:
    """Every reconcile period (``signals.reconcile_period_s``), and as soon as a watched file
    or a watch changes (``watch``, the Kubernetes sources): reload the config if its file
    changed, add the pools of the InferencePools found (``inference_pools``), fetch
    endpoints, let the weigher decide weights (only on the period), publish if anything
    changed. A bad edit is logged and rejected, and the last good config and endpoints keep
    being served; an unexpected error in one phase is logged and shown (``state.errors``),
    never stops the loop. With the engine on, nothing is published before the engine has
    weights (``WarmStart``)."""

    def __init__(
        self,
        *,
        config: Config,
        config_path: Path,
        cache: SnapshotCache,
        weigher: Weigher | None = None,
        on_signals_change: Callable[[Config], None] | None = None,
        limiter: Limiter | None = None,
        envoys: Callable[[], Mapping[str, int]] = dict,
        kv_events: KvEvents | None = None,
    ) -> None:
        self.state = LoopState(config=config, config_path=config_path)
        self._loaded = config
        """The config file's; ``state.config`` is what is served (with InferencePools' pools)."""
        self.weigher = weigher
        self.limiter = limiter
        self.kv_events = kv_events
        """The servers' KV-event subscriptions, kept in step with every discovery pass."""
        self._envoys = envoys
        """Node group -> Envoys connected in it: each enforces its share of a budget."""
        self._warm = WarmStart(weigher=weigher, config_path=config_path) if weigher else None
        self._on_signals_change = on_signals_change
        self._cache = cache
        self._stamp = _stamp(config_path)
        self._woken = asyncio.Event()
        self._sources: dict[str, EndpointSource] = {}
        self._sources = self._make_sources(config)
        self._fleets: dict[str, FleetSize] = {}
        self._discovered = DiscoveredPools(wake=self._woken.set)
        self._pools_config = config
        """The loaded config with the InferencePools' pools: what the sources are built from."""
        self.published = asyncio.Event()
        self._last_inputs: ReconcileInputs | None = None
        """What the published snapshots were built from: equal inputs, nothing to build."""
        self._last_weights: EngineWeights | None = None
        self.watch = FileWatch(
            settings=config.watch, wake=self._woken.set, errors=self.state.errors
        )
        self.watch.watch(_watched_files(config, config_path=config_path))

    def _make_sources(self, config: Config) -> dict[str, EndpointSource]:
        base = self.state.config_path.parent
        fresh = {
            pool.name: endpoint_source(pool, base=base, wake=self._woken.set)
            for pool in config.pools
        }
        return carry_over(old=self._sources, new=fresh)

    async def resume(self) -> None:
        """Resume the engine from its state file, or start waiting for signals (engine on)."""
        if self._warm is not None and self.weigher is not None and self.weigher.enabled:
            await self._warm.resume(self.state.config)

    async def run(self) -> None:
        """``resume``, then reconcile forever; never raises for bad input. A file event starts
        a step at once without deciding weights: weight cycles keep their own period."""
        await self.resume()
        watcher = guarded_task(self.watch.run(), name="file-watch")
        clock = asyncio.get_running_loop().time
        try:
            decide, next_cycle = True, 0.0
            while True:
                self._woken.clear()  # an event during the step wakes the next one
                await self.step(decide=decide)
                if decide:
                    next_cycle = clock() + self.state.config.signals.reconcile_period_s
                await wait_set(self._woken, timeout=next_cycle - clock())
                decide = clock() >= next_cycle
        finally:
            watcher.cancel()
            await asyncio.gather(watcher, return_exceptions=True)  # its thread stops too
            await close_sources(self._sources.values())
            await asyncio.gather(*(f.close() for f in self._fleets.values()))
            await self._discovered.close()

    async def scrape_forever(self) -> None:
        """The fast path: sub-second scrapes of each endpoint's /metrics, read by the next step.
        A failing endpoint is that endpoint's problem; anything else is logged and retried."""
        while True:
            scrape = self.weigher.scrape if self.weigher is not None else None
            if scrape is not None:
                targets = targets_of(self.state.config, self.state.endpoints)
                await self._phase("scrape", functools.partial(scrape.fetch, targets))
            await asyncio.sleep(self.state.config.signals.scrape.interval_s)

    async def step(self, *, decide: bool = True) -> None:
        """One pass: reload the config if its file changed, fetch endpoints, decide weights
        (unless ``decide`` is false: then the last ones), publish, save the engine's state.
        Each phase that fails keeps its last good result."""
        await self._phase("config", self._reload_config)
        await self._phase("endpoints", self._fetch_endpoints)
        if self.kv_events is not None:
            await self._phase("kv_events", self._sync_kv_events)
        decided = await self._phase("weights", self._weights) if decide else _FAILED
        if decide and self.limiter is not None:
            limiter, state = self.limiter, self.state
            await self._phase(
                "limits",
                lambda: limiter.cycle_once(config=state.config, endpoints=state.endpoints),
            )
        # A failed engine cycle (or none, on a file event) publishes config and endpoint changes
        # with the last weights.
        weights = self._last_weights if isinstance(decided, _Failed) else decided
        if self.kv_events is not None and isinstance(decided, EngineWeights):
            self.kv_events.observe_health(kv_health(decided))
        if weights is None:
            return  # the engine has no weights yet: publish nothing rather than made-up ones
        await self._phase("publish", lambda: self._publish(weights))
        if self._warm is not None and self._last_weights is not None:
            warm, state = self._warm, self.state
            await self._phase(
                "state",
                lambda: warm.save(config=state.config, version=state.version, weights=weights),
            )

    async def _phase(self, name: str, action: Callable[[], Awaitable[T]]) -> T | _Failed:
        try:
            result = await action()
        except Exception as exc:  # no input may stop the loop
            LOOP_ERRORS.labels(phase=name).inc()
            message = f"{type(exc).__name__}: {exc}"
            if self.state.errors.get(name) != message:
                log.error("phase failed; keeping its last good result", phase=name, exc_info=exc)
            self.state.errors[name] = message
            if name == "config":
                self.state.config_error = message
            return _FAILED
        self.state.errors.pop(name, None)
        return result

    async def _weights(self) -> EngineWeights | None:
        state = self.state
        if self._warm is None or self.weigher is None or not self.weigher.enabled:
            return EngineWeights()
        return await self._warm.weigh(config=state.config, endpoints=state.endpoints)

    async def _publish(self, weights: EngineWeights) -> None:
        state = self.state
        budgets = (
            self.limiter.buckets(state.config, envoys=self._envoys(), fleet=state.fleet_sizes)
            if self.limiter is not None
            else Buckets()
        )
        inputs = ReconcileInputs(
            config=state.config,
            endpoints=dict(state.endpoints),  # a copy: the next fetch updates state's in place
            weights=weights.endpoints,
            pool_weights=weights.pools,
            budgets=budgets,
        )
        if inputs == self._last_inputs:
            return  # same config, endpoints and weights: the same snapshot, not worth building
        # A SnapshotError (inconsistent snapshot) is this phase's error: the last one stays.
        snapshots = reconcile_groups(inputs)
        self._last_inputs = inputs
        self._last_weights = weights
        self._cache.set_routing(NodeRouting.of(state.config))
        changed = [self._cache.set_snapshot(group, snap) for group, snap in snapshots.items()]
        if any(changed):
            state.version = fleet_version(snapshots)
            state.published_at = time.time()
            SNAPSHOTS_PUBLISHED.inc()
            SNAPSHOT_INFO.info({"version": state.version})
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
        self._loaded = config  # served from the endpoints phase on, with its pools
        self.state.config_error = None
        self.watch.configure(config.watch)
        self.watch.watch(_watched_files(config, config_path=path))
        log.info("config reloaded", path=str(path), **config.summary())

    async def _sync_kv_events(self) -> None:
        if self.kv_events is not None:
            self.kv_events.sync(self.state.config, self.state.endpoints)

    async def _find_pools(self) -> None:
        """The pools to serve: the loaded config's and the InferencePools'; a changed set
        gets its sources (kept where unchanged) and loses the endpoints of pools gone."""
        state = self.state
        pools = await self._discovered.pools_config(self._loaded, errors=state.discovery_errors)
        if pools is self._pools_config:
            return
        self._pools_config = pools
        self._sources = self._make_sources(pools)
        state.endpoints = {n: eps for n, eps in state.endpoints.items() if n in self._sources}
        kept = {CATALOG, *self._fleets}
        for name in [n for n in state.discovery_errors if n not in self._sources]:
            if name not in kept:
                del state.discovery_errors[name]

    async def _fetch_endpoints(self) -> None:
        state = self.state
        await self._find_pools()
        for name, source in self._sources.items():
            try:
                state.endpoints[name] = await source.fetch()
            except Exception as exc:  # one pool's must not stop the others
                self._discovery_failed(
                    name, exc, event="endpoints rejected; keeping the last good set", pool=name
                )
            else:
                state.discovery_errors.pop(name, None)
        state.config = self._discovered.served(self._pools_config, sources=self._sources)
        await self._fetch_fleet_sizes()

    async def _fetch_fleet_sizes(self) -> None:
        """Each group's gateway fleet size and the control planes' count; a failed read
        keeps the last good one."""
        state = self.state
        gateways = gateway_fleets(state.config)
        groups = {fleet_key(g): g for g in gateways}
        fleets = sized_fleets(gateways, state.config.control_planes)
        for key in [k for k in self._fleets if k not in fleets]:
            state.discovery_errors.pop(key, None)
        self._fleets = follow_fleets(self._fleets, fleets, wake=self._woken.set)
        state.fleet_sizes = {g: n for g, n in state.fleet_sizes.items() if fleet_key(g) in groups}
        if CONTROL_PLANES not in fleets:
            state.control_planes = None
        for key, size in self._fleets.items():
            fetched = await self._fetch_size(key, size)
            if fetched is None:
                continue
            if key == CONTROL_PLANES:
                state.control_planes = fetched
            else:
                state.fleet_sizes[groups[key]] = fetched

    async def _fetch_size(self, key: str, size: FleetSize) -> int | None:
        """``size`` now; ``None`` when it cannot be read (logged once per message)."""
        state = self.state
        try:
            fetched = await size.fetch()
        except Exception as exc:  # one fleet's must not stop the others
            self._discovery_failed(
                key, exc, event="fleet size unknown; keeping the last good one", fleet=key
            )
            return None
        state.discovery_errors.pop(key, None)
        return fetched

    def _discovery_failed(self, key: str, exc: Exception, *, event: str, **context: str) -> None:
        """Count a failed read under ``key`` and log it once per message; a
        ``DiscoveryError`` is the input's fault (its message), anything else a bug (its trace)."""
        state = self.state
        DISCOVERY_ERRORS.labels(pool=key).inc()
        message = str(exc) if isinstance(exc, DiscoveryError) else repr(exc)
        if state.discovery_errors.get(key) != message:
            log.error(
                event,
                error=message,
                exc_info=None if isinstance(exc, DiscoveryError) else exc,
                **context,
            )
        state.discovery_errors[key] = message


def kv_health(weights: EngineWeights) -> dict[str, bool]:
    """Each weighed server's health as the KV-event source judges restarts by: healthy or
    unhealthy (draining servers left out)."""
    return {
        address: w.health is Health.HEALTHY
        for address, w in weights.endpoints.items()
        if w.health in (Health.HEALTHY, Health.UNHEALTHY)
    }
