"""The budget rule: lower while P99 is over target in proportion to the excess, Medium first
and Critical last; raise back while under, Critical first; bounded steps, floor and ceiling."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from xds_control.config import AdaptPolicy, PriorityClass
from xds_control.limits import Latency, RouteRates, adapt_rates, next_rates, pressure

C, H, M = PriorityClass.CRITICAL, PriorityClass.HIGH, PriorityClass.MEDIUM
CEILINGS = {C: 100.0, H: 100.0, M: 100.0}
POLICY = AdaptPolicy(gain=0.5, max_step=0.25, raise_step=0.1, floor=0.1)


def _run(
    pressures: list[float | None], start: dict[PriorityClass, float] | None = None
) -> dict[PriorityClass, float]:
    rates = dict(start or CEILINGS)
    for p in pressures:
        rates = dict(
            adapt_rates(policy=POLICY, ceilings=CEILINGS, previous=rates, pressure=p).rates
        )
    return rates


def test_the_step_is_proportional_to_the_excess_and_bounded() -> None:
    assert _run([1.2])[M] == 90.0  # 20% over: half of it, 10% off
    assert _run([3.0])[M] == 75.0  # 200% over: capped at max_step


def test_medium_is_shed_before_high_and_high_before_critical() -> None:
    rates = _run([2.0] * 9)  # 0.75**8 < 0.1: Medium reaches its floor in 9 cycles
    assert (rates[M], rates[H], rates[C]) == (10.0, 100.0, 100.0)
    rates = _run([2.0] * 12)
    assert (rates[M], rates[C]) == (10.0, 100.0)
    assert rates[H] < 100.0
    rates = _run([2.0] * 40)
    assert rates == {C: 10.0, H: 10.0, M: 10.0}  # never below the floor


def test_recovery_raises_critical_first_back_to_the_ceiling() -> None:
    low = {C: 10.0, H: 10.0, M: 10.0}
    assert _run([0.5], low) == {C: 20.0, H: 10.0, M: 10.0}
    assert _run([0.5] * 30, low) == CEILINGS


def test_no_reading_or_a_p99_near_target_holds() -> None:
    start = {C: 50.0, H: 50.0, M: 50.0}
    assert _run([None, 0.95, 1.0], start) == start


def test_pressure_is_the_worst_watched_p99_over_its_target() -> None:
    policy = AdaptPolicy(ttft_p99_target_s=2.0, tpot_p99_target_s=0.05)
    pools = {"a": Latency(ttft_p99_s=1.0, tpot_p99_s=0.1), "b": Latency(ttft_p99_s=3.0)}
    assert pressure(policy, pools) == 2.0
    assert pressure(policy, {"a": Latency()}) is None


@given(
    previous=st.floats(min_value=-1e6, max_value=1e6),
    p=st.one_of(st.none(), st.floats(min_value=0, max_value=1e6)),
)
def test_rates_stay_between_floor_and_ceiling(previous: float, p: float | None) -> None:
    budget = adapt_rates(policy=POLICY, ceilings=CEILINGS, previous={M: previous}, pressure=p)
    assert all(10.0 <= rate <= 100.0 for rate in budget.rates.values())


def test_rates_hold_for_a_period_after_each_change() -> None:
    policy = AdaptPolicy(period_s=5.0, gain=0.5, max_step=0.25)

    def step(previous: RouteRates | None, now: float) -> RouteRates:
        return next_rates(
            policy=policy, ceilings={M: 100.0}, previous=previous, pressure=2.0, now=now
        )

    first = step(None, 0.0)
    assert (first.rates[M], first.changed_at) == (75.0, 0.0)
    held = step(first, 4.9)
    assert (held.rates, held.changed_at, held.action) == (
        first.rates,
        0.0,
        "held: changed recently",
    )
    after = step(held, 5.0)
    assert (after.rates[M], after.changed_at, after.action) == (56.25, 5.0, "lowered medium")


def test_a_rule_that_changes_nothing_keeps_when_it_last_changed() -> None:
    policy = AdaptPolicy(period_s=5.0)
    start = next_rates(policy=policy, ceilings={M: 100.0}, previous=None, pressure=0.5, now=0.0)
    later = next_rates(policy=policy, ceilings={M: 100.0}, previous=start, pressure=0.5, now=9.0)
    assert (later.rates, later.changed_at) == (start.rates, 0.0)  # at the ceiling: no change
    with_high = next_rates(
        policy=policy, ceilings={M: 100.0, H: 50.0}, previous=later, pressure=0.5, now=9.5
    )
    assert with_high.changed_at == 9.5  # a class added: afresh, not held
