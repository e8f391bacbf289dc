"""Priority-class rates between cycles: P99 readings in, each Envoy's buckets out.

The stateful half of the limits stage: once per engine cycle it asks ``signals.latency`` for
every endpoint's P99s, folds them into each pool's (its worst endpoint's), steps the pure rule
(``limits.rule``) for every limited route, keeping the rates from one cycle to the next as the
weigher keeps its decisions, and divides the fleet-wide rates among each node group's Envoys,
so that three Envoys enforce a third each and, when one leaves, two enforce half. The Envoys
counted are the group's whole gateway fleet when the config says where to read its size
(``gateways``: the same answer on every control-plane replica), and never fewer than those
connected here.
A failed P99 read keeps nothing: the rule then holds the rates (no reading, no change), and
the error is ``source_error``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import aiohttp
import structlog

from xds_control.config import Config, Listener, PriorityClass, Route, group_names
from xds_control.discovery import Endpoint
from xds_control.errors import SignalError
from xds_control.limits.buckets import Bucket, Buckets, RouteBucket, bucket_for_rate
from xds_control.limits.metrics import count_adjustment
from xds_control.limits.rule import Latency, RouteRates, next_rates, pressure
from xds_control.signals.latency import FallbackLatency, LatencySource, P99Readings, P99Source

__all__ = ["Limiter", "RateRow", "pool_latency"]

log = structlog.get_logger(__name__)

_Key = tuple[str, str]


@dataclass(frozen=True, slots=True)
class RateRow:
    """Every number set for one class of one route in one node group, and where it came from."""

    group: str
    listener: str
    route: str
    priority: PriorityClass
    pools: tuple[str, ...]
    latency: Mapping[str, Latency]
    adapted: RouteRates
    """The route's rates after the last cycle, and the pressure and action behind them."""
    envoys: int
    """The Envoys the rate is divided among: the larger of ``connected`` and ``fleet``."""
    connected: int
    """The group's Envoys connected to this control plane."""
    fleet: int | None
    """The group's gateway fleet size (``gateways``), when the config gives one."""
    bucket: Bucket


def pool_latency(
    readings: P99Readings, *, config: Config, endpoints: Mapping[str, tuple[Endpoint, ...]]
) -> dict[str, Latency]:
    """Pool -> its worst endpoint's P99s, the pessimistic reading; a pool with no reading is
    left out."""
    out: dict[str, Latency] = {}
    for pool in config.pools:
        addresses = [e.address for e in endpoints.get(pool.name, ())]
        ttft = _worst(readings.ttft_s, addresses)
        tpot = _worst(readings.tpot_s, addresses)
        if ttft is not None or tpot is not None:
            out[pool.name] = Latency(ttft_p99_s=ttft, tpot_p99_s=tpot)
    return out


def _worst(values: Mapping[str, float], addresses: list[str]) -> float | None:
    found = [values[a] for a in addresses if a in values]
    return max(found) if found else None


def _limited(config: Config) -> list[tuple[Listener, Route]]:
    return [(lis, r) for lis in config.listeners if lis.limits is not None for r in lis.routes]


def _listeners_of(config: Config, group: str) -> set[str]:
    if not config.node_groups:
        return {listener.name for listener in config.listeners}
    return {name for g in config.node_groups if g.name == group for name in g.listeners}


class Limiter:
    """Keeps each route's rates across cycles and the P99s they came from."""

    def __init__(
        self,
        *,
        latency: P99Source | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._latency_source = latency
        self._clock = clock
        self._latency: dict[str, Latency] = {}
        self._rates: dict[_Key, RouteRates] = {}
        self._rows: tuple[RateRow, ...] = ()
        self._source_error: str | None = None
        self.cycle = 0

    def configure(
        self,
        *,
        client: aiohttp.ClientSession,
        config: Config,
        data_path: P99Source | None = None,
    ) -> None:
        """(Re)build the P99 source from ``config.signals``; rates are kept. ``data_path``: the
        data path's P99s (``DataPathLatency``), read when ``signals.data_path`` is on, for the
        endpoints the engines' own histograms leave out (or for all, without Prometheus)."""
        url = config.signals.prometheus_url
        engines = LatencySource(client=client, signals=config.signals) if url is not None else None
        path = data_path if config.signals.data_path.on else None
        if engines is not None and path is not None:
            self._latency_source = FallbackLatency(primary=engines, fallback=path)
        else:
            self._latency_source = engines or path
        self._source_error = None

    @property
    def source_error(self) -> str | None:
        """The P99 read's last failure, ``None`` when it worked."""
        return self._source_error

    async def cycle_once(
        self, *, config: Config, endpoints: Mapping[str, tuple[Endpoint, ...]]
    ) -> None:
        """Read the pools' P99s (when a route has limits) and adapt every route's rates."""
        limited = _limited(config)
        if not limited:
            self._rates = {}
            return
        if self._latency_source is not None:
            windows = {lis.limits.adapt.window for lis, _ in limited if lis.limits is not None}
            self.observe(
                await self._read(
                    self._latency_source, config=config, endpoints=endpoints, windows=windows
                )
            )
        self.decide(config)

    async def _read(
        self,
        source: P99Source,
        *,
        config: Config,
        endpoints: Mapping[str, tuple[Endpoint, ...]],
        windows: set[str],
    ) -> dict[str, Latency]:
        latency: dict[str, Latency] = {}
        errors: list[str] = []
        for window in sorted(windows):
            try:
                readings = await source.fetch(window=window)
            except SignalError as exc:
                errors.append(str(exc))
                continue
            latency.update(pool_latency(readings, config=config, endpoints=endpoints))
        error = "; ".join(errors) or None
        if error is not None and error != self._source_error:
            log.warning("P99 read failed; rates hold", error=error)
        self._source_error = error
        return latency

    def observe(self, latency: Mapping[str, Latency]) -> None:
        """Pool -> the P99s the next ``decide`` reads (a pool left out: not measured)."""
        self._latency = dict(latency)

    def decide(self, config: Config) -> None:
        """One step of the rule for every limited route, from the last P99s."""
        rates: dict[_Key, RouteRates] = {}
        now = self._clock()
        for listener, route in _limited(config):
            limits = listener.limits
            assert limits is not None  # _limited keeps only those
            key = (listener.name, route.name)
            adapted = next_rates(
                policy=limits.adapt,
                ceilings={c: b.rate_per_s for c, b in limits.classes.items()},
                previous=self._rates.get(key),
                pressure=pressure(limits.adapt, self._pool_latency(route)),
                now=now,
            )
            count_adjustment(listener=listener.name, route=route.name, action=adapted.action)
            rates[key] = adapted
        self._rates = rates
        self.cycle += 1

    def _pool_latency(self, route: Route) -> dict[str, Latency]:
        return {p: self._latency[p] for p in route.pool_names() if p in self._latency}

    def buckets(
        self,
        config: Config,
        *,
        envoys: Mapping[str, int],
        fleet: Mapping[str, int] | None = None,
    ) -> Buckets:
        """Each group's buckets: the fleet rates divided by its Envoys, the larger of those
        connected here (``envoys``) and its gateway fleet's size (``fleet``; none at all: the
        whole rate, for the first to come). Records the rows ``rows`` shows."""
        rows: list[RateRow] = []
        sizes = fleet or {}
        for group in group_names(config):
            connected, members = envoys.get(group, 0), sizes.get(group)
            count = max(1, connected, members or 0)
            names = _listeners_of(config, group)
            for listener, route in _limited(config):
                adapted = self._rates.get((listener.name, route.name))
                if listener.name not in names or adapted is None or listener.limits is None:
                    continue
                for priority, rate in adapted.rates.items():
                    burst_s = listener.limits.classes[priority].burst_s
                    rows.append(
                        RateRow(
                            group=group,
                            listener=listener.name,
                            route=route.name,
                            priority=priority,
                            pools=route.pool_names(),
                            latency=self._pool_latency(route),
                            adapted=adapted,
                            envoys=max(connected, members or 0),
                            connected=connected,
                            fleet=members,
                            bucket=bucket_for_rate(rate / count, burst_s=burst_s),
                        )
                    )
        self._rows = tuple(rows)
        return Buckets(
            tuple(
                RouteBucket(
                    group=r.group,
                    listener=r.listener,
                    route=r.route,
                    priority=r.priority,
                    bucket=r.bucket,
                )
                for r in rows
            )
        )

    @property
    def rows(self) -> tuple[RateRow, ...]:
        """What the last ``buckets`` set, one row per group, route and class."""
        return self._rows
