"""Priority-class budgets between cycles: P99 readings in, each Envoy's buckets out.

The IO half of the budget rule (``engine.budgets``): it asks Prometheus for each pool's P99s
once per engine cycle, keeps every route's rates from one cycle to the next (as the weigher
keeps its decisions), and divides the fleet-wide rates among the Envoys connected in each
node group, so that three Envoys enforce a third each and, when one leaves, two enforce half.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp

from xds_control.cache.groups import group_names
from xds_control.config import Config, Listener, PriorityClass, Route
from xds_control.control.latency import LatencySource
from xds_control.control.limit_metrics import count_adjustment
from xds_control.discovery import Endpoint
from xds_control.engine.budgets import Latency, RouteBudget, adapt_rates, pressure
from xds_control.xds.ratelimit import Bucket, bucket_for_rate
from xds_control.xds.routes import class_route_name

__all__ = ["BudgetRow", "GroupBudgets", "Limiter"]

GroupBudgets = dict[str, dict[str, dict[str, dict[PriorityClass, Bucket]]]]
"""Node group -> listener -> route -> class -> the bucket each of its Envoys enforces."""

_Key = tuple[str, str]


@dataclass(frozen=True, slots=True)
class BudgetRow:
    """Every number set for one class of one route in one node group, and where it came from."""

    group: str
    listener: str
    route: str
    priority: PriorityClass
    pools: tuple[str, ...]
    latency: Mapping[str, Latency]
    budget: RouteBudget
    envoys: int
    bucket: Bucket

    def to_json(self) -> dict[str, Any]:
        """The row as the admin API shows it."""
        ceiling = self.budget.rates[self.priority]
        return {
            "group": self.group,
            "listener": self.listener,
            "route": self.route,
            "envoy_route": class_route_name(self.route, self.priority),
            "priority": self.priority.value,
            "pools": list(self.pools),
            "fleet_rps": round(ceiling, 3),
            "envoys": self.envoys,
            "share": round(1 / max(1, self.envoys), 4),
            "envoy_rps": round(self.bucket.rate, 3),
            "bucket": {
                "max_tokens": self.bucket.max_tokens,
                "tokens_per_fill": self.bucket.tokens_per_fill,
                "fill_interval_s": self.bucket.fill_interval_s,
            },
            "p99": {
                pool: {"ttft_s": lat.ttft_p99_s, "tpot_s": lat.tpot_p99_s}
                for pool, lat in self.latency.items()
            },
            "pressure": None if self.budget.pressure is None else round(self.budget.pressure, 3),
            "action": self.budget.action,
        }


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
        latency: LatencySource | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._latency_source = latency
        self._clock = clock
        self._changed_at: dict[_Key, float] = {}
        self._latency: dict[str, Latency] = {}
        self._budgets: dict[_Key, RouteBudget] = {}
        self._rows: tuple[BudgetRow, ...] = ()
        self.cycle = 0

    def configure(self, *, client: aiohttp.ClientSession, config: Config) -> None:
        """(Re)build the P99 source from ``config.signals``; rates are kept."""
        url = config.signals.prometheus_url
        self._latency_source = (
            LatencySource(client=client, signals=config.signals) if url is not None else None
        )

    @property
    def source_error(self) -> str | None:
        """The P99 query's last failure."""
        return self._latency_source.error if self._latency_source is not None else None

    async def cycle_once(
        self, *, config: Config, endpoints: Mapping[str, tuple[Endpoint, ...]]
    ) -> None:
        """Read the pools' P99s (when a route has limits) and adapt every route's rates."""
        limited = _limited(config)
        if not limited:
            self._budgets = {}
            return
        if self._latency_source is not None:
            windows = {lis.limits.adapt.window for lis, _ in limited if lis.limits is not None}
            latency: dict[str, Latency] = {}
            for window in sorted(windows):
                latency.update(
                    await self._latency_source.fetch(
                        config=config, endpoints=endpoints, window=window
                    )
                )
            self.observe(latency)
        self.decide(config)

    def observe(self, latency: Mapping[str, Latency]) -> None:
        """Pool -> the P99s the next ``decide`` reads (a pool left out: not measured)."""
        self._latency = dict(latency)

    def decide(self, config: Config) -> None:
        """One step of the rule for every limited route, from the last P99s."""
        budgets: dict[_Key, RouteBudget] = {}
        now = self._clock()
        for listener, route in _limited(config):
            limits = listener.limits
            assert limits is not None  # _limited keeps only those
            key = (listener.name, route.name)
            previous = self._budgets.get(key)
            ceilings = {c: b.rate_per_s for c, b in limits.classes.items()}
            measured = pressure(limits.adapt, self._pool_latency(route))
            waited = now - self._changed_at.get(key, -math.inf) >= limits.adapt.period_s
            same = previous is not None and previous.rates.keys() == ceilings.keys()
            if previous is not None and same and not waited and limits.adapt.enabled:
                budgets[key] = RouteBudget(
                    rates=previous.rates, pressure=measured, action="held: changed recently"
                )
                continue
            budget = adapt_rates(
                policy=limits.adapt,
                ceilings=ceilings,
                previous=previous.rates if previous is not None else {},
                pressure=measured,
            )
            if previous is None or budget.rates != previous.rates:
                self._changed_at[key] = now
            count_adjustment(listener=listener.name, route=route.name, action=budget.action)
            budgets[key] = budget
        self._budgets = budgets
        self.cycle += 1

    def _pool_latency(self, route: Route) -> dict[str, Latency]:
        return {p: self._latency[p] for p in route.pool_names() if p in self._latency}

    def budgets(self, config: Config, *, envoys: Mapping[str, int]) -> GroupBudgets:
        """Each group's buckets: the fleet rates divided by its connected Envoys (none yet:
        the whole rate, for the first to come). Records the rows ``rows`` shows."""
        out: GroupBudgets = {}
        rows: list[BudgetRow] = []
        for group in group_names(config):
            count = max(1, envoys.get(group, 0))
            names = _listeners_of(config, group)
            for listener, route in _limited(config):
                budget = self._budgets.get((listener.name, route.name))
                if listener.name not in names or budget is None or listener.limits is None:
                    continue
                for priority, rate in budget.rates.items():
                    burst_s = listener.limits.classes[priority].burst_s
                    bucket = bucket_for_rate(rate / count, burst_s=burst_s)
                    by_route = out.setdefault(group, {}).setdefault(listener.name, {})
                    by_route.setdefault(route.name, {})[priority] = bucket
                    rows.append(
                        BudgetRow(
                            group=group,
                            listener=listener.name,
                            route=route.name,
                            priority=priority,
                            pools=route.pool_names(),
                            latency=self._pool_latency(route),
                            budget=budget,
                            envoys=envoys.get(group, 0),
                            bucket=bucket,
                        )
                    )
        self._rows = tuple(rows)
        return out

    @property
    def rows(self) -> tuple[BudgetRow, ...]:
        """What the last ``budgets`` set, one row per group, route and class."""
        return self._rows
