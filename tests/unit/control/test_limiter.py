"""The limiter: a route's rates change at most every ``period_s`` (each change refills
Envoy's buckets), and a fleet-wide rate is divided among a group's connected Envoys."""

from __future__ import annotations

from typing import Any

from xds_control.config import Config, PriorityClass
from xds_control.control.limiter import Limiter
from xds_control.engine.budgets import Latency


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
        budgets = limiter.budgets(config, envoys={"default": 3})
        rates.append(budgets["default"]["gateway"]["all"][PriorityClass.MEDIUM].rate)
    # 30/s shared by three is 10/s each; P99 at twice the target takes 25% off, at 0, 5, 10 s.
    assert len(set(rates[0:5])) == len(set(rates[5:10])) == len(set(rates[10:])) == 1
    assert [round(rates[i], 1) for i in (0, 5, 10)] == [7.5, 5.6, 4.2]
    row = limiter.rows[0]
    assert (row.envoys, round(row.bucket.rate, 1)) == (3, round(rates[-1], 1))
