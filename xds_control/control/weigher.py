"""Signals -> weight decisions for every pool, keeping the last good of each.

The IO half of the weight engine: it asks the signal sources, merges their samples and hands
them to the pure ``compute_weights``. A source that fails keeps its last good samples (the
engine then holds and, past the TTL, decays by their age), so a dead Prometheus never zeroes a
weight. The data path's readings (``signals.data_path``) join the samples when it is on, so
the explanations show them; the engine does not weigh them yet.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

import aiohttp
import structlog

from xds_control.config import Config, SignalsConfig
from xds_control.control.reconcile import PoolWeights
from xds_control.discovery import Endpoint
from xds_control.engine import (
    EndpointState,
    WeightDecision,
    compute_weights,
    fleet_step_scale,
    states_of,
)
from xds_control.engine.autoscale import Recommendation, recommend_pools
from xds_control.engine.pool_weights import (
    PoolWeight,
    RouteWeights,
    compute_route_weights,
    route_key,
)
from xds_control.errors import SignalError
from xds_control.signals import (
    DataPath,
    DataPathSource,
    PrometheusSource,
    ReportedLoad,
    Sample,
    ScrapeSource,
    Signal,
    SignalSource,
    Target,
    merge_samples,
    targets_for_pool,
)
from xds_control.xds import EndpointWeight

__all__ = ["EngineView", "EngineWeights", "Weigher", "targets_of"]

log = structlog.get_logger(__name__)


def targets_of(config: Config, endpoints: Mapping[str, tuple[Endpoint, ...]]) -> tuple[Target, ...]:
    """Every endpoint of every pool, as signal targets."""
    out: list[Target] = []
    for pool in config.pools:
        out += targets_for_pool(pool, endpoints.get(pool.name, ()))
    return tuple(out)


def _decidable(sample: Sample) -> bool:
    values = sample.values
    return (
        Signal.DECODE_STEP_S in values
        or Signal.EXEC_COMPUTE_S in values
        or values.get(Signal.RUNNING) == 0
        or sample.scrape_failures > 0
    )


@dataclass(frozen=True, slots=True)
class EngineWeights:
    """What an engine cycle hands the reconcile step: the part of its decisions EDS and RDS
    publish. Compared by value: equal weights build the same snapshot."""

    endpoints: Mapping[str, EndpointWeight] = field(default_factory=dict)
    """Address -> weight and health."""
    pools: PoolWeights = field(default_factory=dict)
    """Listener -> route -> pool -> weight, for each route over several pools the engine
    measured (the others keep their static weights)."""


@dataclass(frozen=True, slots=True)
class EngineView:
    """The engine's last cycle as readers (the admin API) see it: a read-only value."""

    enabled: bool
    """Whether any signal source is configured (else static weights are served)."""
    cycle: int
    """Engine cycles run so far (explanations name the cycle they were decided in)."""
    source_error: str | None
    """The Prometheus source's last error, ``None`` when its last fetch worked."""
    pools: Mapping[str, tuple[WeightDecision, ...]]
    """Each pool's decisions, in the pool's endpoint order."""
    routes: RouteWeights = field(default_factory=lambda: MappingProxyType({}))
    """``listener/route`` -> pool -> weight, for each route over several pools the engine
    measured."""
    autoscale: Mapping[str, Recommendation] = field(default_factory=lambda: MappingProxyType({}))
    """Each pool's replica recommendation, for pools with ``autoscale.enabled``."""


class Weigher:
    """Owns the engine's state between cycles: the last decisions (their states are what the
    next cycle continues from) and the last good samples."""

    def __init__(
        self,
        *,
        prometheus: SignalSource | None,
        scrape: ScrapeSource | None,
        data_path: DataPath | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """``data_path`` is the window the access-log service fills (``signals/access_log.py``),
        shared with whoever else reads it; ``configure`` sets it as ``signals.data_path`` says
        and reads it as a source while it is on."""
        self._prometheus = prometheus
        self.scrape = scrape
        self._data_path = data_path if data_path is not None else DataPath()
        self._data_path_source: SignalSource | None = None
        self.reported = ReportedLoad()
        """What the picker fills from the servers' per-response load reports."""
        self._reported_samples: Mapping[str, Sample] = {}
        self._clock = clock
        self._prometheus_samples: Mapping[str, Sample] = {}
        self._data_path_samples: Mapping[str, Sample] = {}
        self._states: dict[str, EndpointState] = {}
        self._by_pool: Mapping[str, tuple[WeightDecision, ...]] = MappingProxyType({})
        self._routes: RouteWeights = MappingProxyType({})
        self._autoscale: Mapping[str, Recommendation] = MappingProxyType({})
        self._source_error: str | None = None
        self._prometheus_answered = False
        self._cycle = 0

    @classmethod
    def from_config(
        cls,
        *,
        client: aiohttp.ClientSession,
        signals: SignalsConfig,
        data_path: DataPath | None = None,
    ) -> Weigher:
        """Sources as ``signals`` configures them, sharing ``client``; the data path's read from
        ``data_path`` (the window the access-log service fills)."""
        weigher = cls(prometheus=None, scrape=None, data_path=data_path)
        weigher.configure(client=client, signals=signals)
        return weigher

    def configure(self, *, client: aiohttp.ClientSession, signals: SignalsConfig) -> None:
        """(Re)build the sources; decisions and last good samples are kept (the data path's
        window too, unless ``window_s`` changed)."""
        self._prometheus = (
            PrometheusSource(client=client, config=signals)
            if signals.prometheus_url is not None
            else None
        )
        self.scrape = (
            ScrapeSource(client=client, config=signals, clock=self._clock)
            if signals.scrape.enabled
            else None
        )
        self._data_path.configure(signals.data_path)
        self._data_path_source = (
            DataPathSource(data_path=self._data_path, clock=self._clock)
            if signals.data_path.on
            else None
        )

    @property
    def enabled(self) -> bool:
        """Whether any signal source is configured (else static weights are served): the data
        path alone is one (servers with no metrics are timed by it)."""
        return (
            self._prometheus is not None
            or self.scrape is not None
            or self._data_path_source is not None
        )

    def view(self) -> EngineView:
        """The last cycle's decisions, read-only."""
        return EngineView(
            enabled=self.enabled,
            cycle=self._cycle,
            source_error=self._source_error,
            pools=self._by_pool,
            routes=self._routes,
            autoscale=self._autoscale,
        )

    def weights(self, config: Config) -> EngineWeights:
        """The last decisions (computed, or restored from a saved state) as the reconcile step
        takes them; pool weights only for the routes of ``config``."""
        endpoints = {
            d.address: EndpointWeight(d.weight, d.health)
            for decisions in self._by_pool.values()
            for d in decisions
        }
        pools: dict[str, dict[str, dict[str, int]]] = {}
        for listener in config.listeners:
            for route in listener.routes:
                found: Mapping[str, PoolWeight] = self._routes.get(
                    route_key(listener.name, route.name), {}
                )
                if found:
                    pools.setdefault(listener.name, {})[route.name] = {
                        pool: weight.weight for pool, weight in found.items()
                    }
        return EngineWeights(endpoints=endpoints, pools=pools)

    @property
    def has_signals(self) -> bool:
        """Whether the sources have told the engine enough to decide since the process started:
        one Prometheus query that worked, or a round of scrapes in which every endpoint has a
        decode step, is idle (nothing running: no step to time) or failed. A first round of
        scrapes has only gauges (a step time is a rate between two scrapes), and capacity,
        the factor that makes weights unequal, would be a guess. The data path counts once it
        has timed a stream."""
        if self._prometheus_answered:
            return True
        if any(Signal.DATAPATH_STEP_S in s.values for s in self._data_path_samples.values()):
            return True
        scraped = self.scrape.latest() if self.scrape is not None else {}
        return bool(scraped) and all(_decidable(sample) for sample in scraped.values())

    def states(self) -> dict[str, dict[str, EndpointState]]:
        """Each pool's endpoint states (address -> state, in the pool's endpoint order): what
        the state file keeps."""
        return {
            pool: {d.address: d.state for d in decisions}
            for pool, decisions in self._by_pool.items()
        }

    def restore(
        self, pools: Mapping[str, Mapping[str, EndpointState]], *, routes: RouteWeights
    ) -> None:
        """Resume from endpoint states and route pool weights saved by an earlier process: the
        weights they published are published again, and the next ``decide`` continues from them
        (smoothing, hysteresis, staleness, capacity estimates) as if never stopped."""
        self._by_pool = MappingProxyType(
            {
                pool: tuple(
                    WeightDecision.resumed(address, state) for address, state in states.items()
                )
                for pool, states in pools.items()
            }
        )
        self._routes = MappingProxyType(dict(routes))
        self._states = {
            address: state for states in pools.values() for address, state in states.items()
        }

    async def fetch(self, *, config: Config, endpoints: Mapping[str, tuple[Endpoint, ...]]) -> None:
        """Ask Prometheus and read the data path (the scrapes run in their own task); a
        Prometheus failure keeps its last good samples."""
        targets = targets_of(config, endpoints)
        self._reported_samples = await self.reported.fetch(targets)
        self._data_path_samples = (
            await self._data_path_source.fetch(targets)
            if self._data_path_source is not None
            else {}
        )
        if self._prometheus is not None:
            try:
                self._prometheus_samples = await self._prometheus.fetch(targets)
                self._source_error = None
                self._prometheus_answered = True
            except SignalError as exc:
                if self._source_error != str(exc):
                    log.warning("prometheus failed; keeping the last good samples", error=str(exc))
                self._source_error = str(exc)

    def decide(
        self, *, config: Config, endpoints: Mapping[str, tuple[Endpoint, ...]]
    ) -> EngineWeights:
        """Merge the latest samples, decide every pool's weights and every route's split over
        pools, and return them (``weights``)."""
        scraped = self.scrape.latest() if self.scrape is not None else {}
        samples = merge_samples(
            self._prometheus_samples, scraped, self._data_path_samples, self._reported_samples
        )
        now = self._clock()
        states: dict[str, EndpointState] = {}
        by_pool: dict[str, tuple[WeightDecision, ...]] = {}
        data_path = self._data_path_source is not None
        fleet_scale = fleet_step_scale(states=self._states, samples=samples) if data_path else None
        for pool in config.pools:
            pool_endpoints = endpoints.get(pool.name, ())
            previous = {
                e.address: self._states[e.address]
                for e in pool_endpoints
                if e.address in self._states
            }
            decided = compute_weights(
                pool=pool,
                endpoints=pool_endpoints,
                samples=samples,
                previous=previous,
                now=now,
                data_path=data_path,
                fleet_scale=fleet_scale,
            )
            states.update(states_of(decided))
            by_pool[pool.name] = tuple(decided[e.address] for e in pool_endpoints)
        self._states = states
        self._by_pool = MappingProxyType(by_pool)
        self._routes = MappingProxyType(
            compute_route_weights(
                config=config,
                decisions=by_pool,
                previous=self._routes,
                now=now,
                data_path=data_path,
            )
        )
        self._autoscale = MappingProxyType(
            recommend_pools(
                pools=config.pools, decisions=by_pool, previous=self._autoscale, now=now
            )
        )
        self._cycle += 1
        return self.weights(config)
