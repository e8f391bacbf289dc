"""The limiter: a route's rates change at most every ``period_s`` (each change refills
Envoy's buckets), and a fleet-wide rate is divided among a group's connected Envoys."""

from __future__ import annotations

from typing import Any

import aiohttp

from xds_control.config import Config, PriorityClass
from xds_control.discovery import Endpoint
from xds_control.errors import SignalError
from xds_control.limits import Latency, Limiter
from xds_control.signals.latency import FallbackLatency, P99Readings


def _config(period_s: float) -> Config:
    data: dict[str, Any] = {
        "pools": [{"name": "chat", "endpoints": [{"address": "127.0.0.1:9000"}]}],
        "listeners": [
            {
                "name": "gateway",
                "address": "127.0.0.1:10000",
                "routes": [{"name": "all", "pool": "chat"}],
                "limits": {
                    "classes": {"medium": {"rate_per_s": 30}},
                    "adapt": {"period_s": period_s, "ttft_p99_target_s": 1.0},
                },
            }
        ],
    }
    return Config.model_validate(data)


def test_rates_change_at_most_once_per_period_and_are_shared_by_the_envoys() -> None:
    now = [0.0]
    limiter = Limiter(clock=lambda: now[0])
    limiter.observe({"chat": Latency(ttft_p99_s=2.0)})  # twice the target
    config = _config(period_s=5.0)
    rates = []
    for second in range(12):
        now[0] = float(second)
        limiter.decide(config)
        budgets = limiter.buckets(config, envoys={"default": 3})
        rates.append(
            budgets.of_group("default").of_route("gateway", "all")[PriorityClass.MEDIUM].rate
        )
    # 30/s shared by three is 10/s each; P99 at twice the target takes 25% off, at 0, 5, 10 s.
    assert len(set(rates[0:5])) == len(set(rates[5:10])) == len(set(rates[10:])) == 1
    assert [round(rates[i], 1) for i in (0, 5, 10)] == [7.5, 5.6, 4.2]
    row = limiter.rows[0]
    assert (row.envoys, round(row.bucket.rate, 1)) == (3, round(rates[-1], 1))


class _FailingSource:
    async def fetch(self, *, window: str) -> P99Readings:
        raise SignalError(f"every P99 query failed: timeout ({window})")


async def test_a_failed_p99_read_holds_the_rates_and_shows_why() -> None:
    limiter = Limiter(latency=_FailingSource(), clock=lambda: 100.0)
    limiter.observe({"chat": Latency(ttft_p99_s=2.0)})
    config = _config(period_s=0.0)
    limiter.decide(config)
    lowered = limiter.buckets(config, envoys={}).of_group("default").of_route("gateway", "all")
    await limiter.cycle_once(config=config, endpoints={})
    held = limiter.buckets(config, envoys={}).of_group("default").of_route("gateway", "all")
    assert held == lowered
    assert limiter.rows[0].adapted.action == "held: no P99 measured"
    assert limiter.source_error == "every P99 query failed: timeout (1m)"


class _Fixed:
    def __init__(self, readings: P99Readings | None) -> None:
        self.readings = readings

    async def fetch(self, *, window: str) -> P99Readings:
        if self.readings is None:
            raise SignalError("every P99 query failed")
        return self.readings


async def test_the_data_path_fills_what_the_engines_histograms_leave_out() -> None:
    engines = _Fixed(P99Readings(ttft_s={"10.0.0.1:8000": 0.5}, tpot_s={}))
    path = _Fixed(P99Readings(ttft_s={"10.0.0.1:8000": 0.9, "10.0.0.2:8000": 2.5}, tpot_s={}))
    both = FallbackLatency(primary=engines, fallback=path)
    assert (await both.fetch(window="1m")).ttft_s == {"10.0.0.1:8000": 0.5, "10.0.0.2:8000": 2.5}
    engines.readings = None  # Prometheus down: the data path's alone
    assert (await both.fetch(window="1m")).ttft_s == path.readings.ttft_s  # type: ignore[union-attr]


async def test_without_prometheus_the_budgets_adapt_to_the_data_path() -> None:
    plain = _config(period_s=0.0).model_dump(mode="json")
    config = Config.model_validate({**plain, "signals": {"data_path": {"enabled": True}}})
    path = _Fixed(P99Readings(ttft_s={"127.0.0.1:9000": 2.0}, tpot_s={}))
    limiter = Limiter(clock=lambda: 100.0)
    async with aiohttp.ClientSession() as client:
        limiter.configure(client=client, config=config, data_path=path)
    endpoint = Endpoint(address="127.0.0.1:9000", host="127.0.0.1", port=9000, weight=1)
    await limiter.cycle_once(config=config, endpoints={"chat": (endpoint,)})
    budgets = limiter.buckets(config, envoys={}).of_group("default").of_route("gateway", "all")
    assert budgets[PriorityClass.MEDIUM].rate < 30  # P99 at twice the target: lowered
    assert limiter.rows[0].latency["chat"].ttft_p99_s == 2.0


def test_the_gateway_fleets_size_divides_the_budget_on_every_replica() -> None:
    # Two replicas behind one Service, one Envoy on each: the fleet of two, read from the
    # gateway Service, makes each replica hand out half, not the whole budget.
    config = _config(period_s=5.0)
    limiter = Limiter(clock=lambda: 0.0)
    limiter.decide(config)

    def medium(*, connected: int, fleet: int | None) -> float:
        sizes = {} if fleet is None else {"default": fleet}
        budgets = limiter.buckets(config, envoys={"default": connected}, fleet=sizes)
        bucket = budgets.of_group("default").of_route("gateway", "all")[PriorityClass.MEDIUM]
        return round(bucket.rate, 2)

    assert medium(connected=1, fleet=None) == 30.0  # one replica's view: the defect
    assert medium(connected=1, fleet=2) == 15.0
    row = limiter.rows[0]
    assert (row.envoys, row.connected, row.fleet) == (2, 1, 2)
    # The Service's slices lag a new Envoy: never fewer than those connected here.
    assert medium(connected=3, fleet=2) == 10.0
    assert medium(connected=0, fleet=0) == 30.0  # nothing known yet: the whole rate
