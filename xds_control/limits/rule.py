"""Admission rates that follow the measured P99: the pure rule, one cycle at a time.

Each route has a fill rate per priority class, at most the configured one (its ceiling). The
route's *pressure* is its pools' worst P99 over its target (time to first token, and time per
output token when a target is set): 1.2 means 20% over. While pressure is over 1 the rule
lowers one class per cycle, Medium first, High once Medium is at its floor, Critical last, by
``gain`` times the excess (at most ``max_step``). While pressure is under ``RAISE_BELOW`` it
gives back ``raise_step`` of the ceiling to one class per cycle, Critical first. Between the
two, and without a reading (an idle pool has no P99), the rates hold. They hold too for
``period_s`` after each change (``next_rates``): Envoy refills a bucket on every change.

No clock, no IO, no globals: ``now`` is a parameter, and the state a route's next cycle needs
(its rates and when they last changed) travels in the returned ``RouteRates``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace

from xds_control.config import AdaptPolicy, PriorityClass
from xds_control.config.limits import SHED_ORDER

__all__ = ["RAISE_BELOW", "Latency", "RouteRates", "adapt_rates", "next_rates", "pressure"]

RAISE_BELOW = 0.9
"""Pressure under which rates are raised: a band below target in which they hold, so a P99
near its target does not make the rate swing every cycle."""


@dataclass(frozen=True, slots=True)
class Latency:
    """A pool's measured P99s in seconds; ``None``: not measured (no requests in the window)."""

    ttft_p99_s: float | None = None
    tpot_p99_s: float | None = None


def pressure(policy: AdaptPolicy, latencies: Mapping[str, Latency]) -> float | None:
    """The worst P99 over its target among ``latencies`` (pool -> P99s); ``None`` when no
    watched P99 was measured."""
    ratios = []
    for latency in latencies.values():
        for value, target in (
            (latency.ttft_p99_s, policy.ttft_p99_target_s),
            (latency.tpot_p99_s, policy.tpot_p99_target_s),
        ):
            if value is not None and target is not None:
                ratios.append(value / target)
    return max(ratios) if ratios else None


@dataclass(frozen=True, slots=True)
class RouteRates:
    """One route's rates after a cycle, and why."""

    rates: Mapping[PriorityClass, float]
    """Fleet-wide fill rate per class (requests per second)."""
    pressure: float | None
    action: str
    """``lowered <class>``, ``raised <class>``, ``held: ...``: what this cycle did."""
    changed_at: float = -math.inf
    """When ``rates`` last changed, on the clock ``next_rates`` is given."""


def _lower(
    rates: dict[PriorityClass, float],
    ceilings: Mapping[PriorityClass, float],
    *,
    policy: AdaptPolicy,
    excess: float,
) -> str:
    step = min(policy.max_step, policy.gain * excess)
    for priority in SHED_ORDER:
        if priority not in ceilings:
            continue
        floor = policy.floor * ceilings[priority]
        if rates[priority] > floor * (1 + 1e-9):
            rates[priority] = max(floor, rates[priority] * (1 - step))
            return f"lowered {priority.value}"
    return "held: every class at its floor"


def _raise(
    rates: dict[PriorityClass, float],
    ceilings: Mapping[PriorityClass, float],
    *,
    policy: AdaptPolicy,
) -> str:
    for priority in reversed(SHED_ORDER):
        if priority not in ceilings:
            continue
        ceiling = ceilings[priority]
        if rates[priority] < ceiling:
            rates[priority] = min(ceiling, rates[priority] + policy.raise_step * ceiling)
            return f"raised {priority.value}"
    return "held: at the configured rates"


def adapt_rates(
    *,
    policy: AdaptPolicy,
    ceilings: Mapping[PriorityClass, float],
    previous: Mapping[PriorityClass, float],
    pressure: float | None,
) -> RouteRates:
    """The next rates from ``previous`` (a class without one starts at its ceiling), given
    the route's ``pressure``. Every rate stays within [``floor`` x ceiling, ceiling]."""
    rates = {
        priority: min(ceiling, max(policy.floor * ceiling, previous.get(priority, ceiling)))
        for priority, ceiling in ceilings.items()
    }
    if not policy.enabled:
        rates = dict(ceilings)
        action = "fixed: adapt is off"
    elif pressure is None:
        action = "held: no P99 measured"
    elif pressure > 1:
        action = _lower(rates, ceilings, policy=policy, excess=pressure - 1)
    elif pressure < RAISE_BELOW:
        action = _raise(rates, ceilings, policy=policy)
    else:
        action = "held: P99 near target"
    return RouteRates(rates=rates, pressure=pressure, action=action)


def next_rates(
    *,
    policy: AdaptPolicy,
    ceilings: Mapping[PriorityClass, float],
    previous: RouteRates | None,
    pressure: float | None,
    now: float,
) -> RouteRates:
    """One cycle of the rule for one route at ``now``: ``previous``'s rates held while they
    changed less than ``policy.period_s`` ago (each change lets one full bucket through in
    every Envoy), else ``adapt_rates``. ``previous`` is ``None`` for a route not limited in the
    last cycle; a change of its classes starts it afresh."""
    if (
        previous is not None
        and previous.rates.keys() == ceilings.keys()
        and policy.enabled
        and now - previous.changed_at < policy.period_s
    ):
        return replace(previous, pressure=pressure, action="held: changed recently")
    adapted = adapt_rates(
        policy=policy,
        ceilings=ceilings,
        previous=previous.rates if previous is not None else {},
        pressure=pressure,
    )
    if previous is not None and adapted.rates == previous.rates:
        return replace(adapted, changed_at=previous.changed_at)
    return replace(adapted, changed_at=now)
