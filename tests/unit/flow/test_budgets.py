"""Token budgets: the estimate admits, the usage settles, windows renew, tenants apart."""

from __future__ import annotations

import pytest

from xds_control.config.flow import TokenBudget
from xds_control.flow import Band, Charge, Refused, TokenBudgets, estimate_tokens


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _charge(
    budgets: TokenBudgets,
    rules: list[TokenBudget],
    *,
    tenant: str = "a",
    estimate: int = 100,
    band: Band = Band.MEDIUM,
) -> Charge | None:
    return budgets.charge(pool="p", budgets=rules, tenant=tenant, band=band, estimate=estimate)


def test_the_estimate_admits_until_the_window_is_full_and_the_refusal_says_when_it_renews() -> None:
    clock = Clock()
    budgets = TokenBudgets(clock=clock)
    rules = [TokenBudget(tenant="a", output_tokens=250, window_s=60)]
    assert _charge(budgets, rules) is not None
    assert _charge(budgets, rules) is not None
    with pytest.raises(Refused) as refused:
        _charge(budgets, rules)
    assert (refused.value.status, refused.value.reason) == (429, "token-budget")
    assert refused.value.retry_after_s == 20  # the window [60, 120) renews at 120
    clock.now = 120.0
    assert _charge(budgets, rules) is not None


def test_usage_settles_the_estimate_so_smaller_answers_leave_room() -> None:
    budgets = TokenBudgets(clock=Clock())
    rules = [TokenBudget(tenant="a", output_tokens=250, window_s=60)]
    first = _charge(budgets, rules, estimate=200)
    assert first is not None
    budgets.settle(first, tokens=50)
    assert _charge(budgets, rules, estimate=200) is not None  # 50 + 200 fits
    with pytest.raises(Refused):
        _charge(budgets, rules, estimate=1)  # 250 charged: full


def test_an_empty_window_admits_one_request_however_large() -> None:
    budgets = TokenBudgets(clock=Clock())
    rules = [TokenBudget(tenant="a", output_tokens=10)]
    assert _charge(budgets, rules, estimate=500) is not None
    with pytest.raises(Refused):
        _charge(budgets, rules, estimate=1)


def test_star_gives_each_tenant_its_own_and_other_bands_or_tenants_are_free() -> None:
    budgets = TokenBudgets(clock=Clock())
    rules = [TokenBudget(tenant="*", priority="medium", output_tokens=100)]
    assert _charge(budgets, rules, tenant="a") is not None
    assert _charge(budgets, rules, tenant="b") is not None
    with pytest.raises(Refused):
        _charge(budgets, rules, tenant="a")
    assert _charge(budgets, rules, tenant="a", band=Band.HIGH) is None  # no budget matches
    rows = budgets.rows()
    assert [(r["tenant"], r["charged"], r["left"]) for r in rows] == [("a", 100, 0), ("b", 100, 0)]


def test_a_settlement_after_its_window_renewed_changes_nothing_now() -> None:
    clock = Clock()
    budgets = TokenBudgets(clock=clock)
    rules = [TokenBudget(tenant="a", output_tokens=100, window_s=10)]
    old = _charge(budgets, rules, estimate=100)
    assert old is not None
    clock.now = 110.0
    assert _charge(budgets, rules, estimate=100) is not None
    budgets.settle(old, tokens=0)  # the old window's refund does not free the new one
    with pytest.raises(Refused):
        _charge(budgets, rules, estimate=1)


@pytest.mark.parametrize(
    ("body", "want"),
    [
        (b'{"max_tokens": 64}', 64),
        (b'{"max_completion_tokens": 32, "prompt": "x"}', 32),
        (b'{"prompt": "x"}', 256),
        (b'{"max_tokens": true}', 256),
        (b"not json", 256),
        (b"[1]", 256),
    ],
)
def test_the_estimate_is_max_tokens_else_the_default(body: bytes, want: int) -> None:
    assert estimate_tokens(body, default=256) == want


def test_control_planes_sharing_a_budget_each_hold_their_share_and_follow_the_count() -> None:
    """Two replicas: each admits half a window, so the two together hand out the budget once;
    when one is gone the other holds it all (the count is read each time)."""
    replicas = 2
    budgets = TokenBudgets(clock=Clock(), replicas=lambda: replicas)
    rules = [TokenBudget(tenant="a", output_tokens=400, window_s=60)]
    assert _charge(budgets, rules) is not None
    assert _charge(budgets, rules) is not None
    with pytest.raises(Refused):
        _charge(budgets, rules)
    [row] = budgets.rows()
    assert (row["output_tokens"], row["replicas"], row["here"], row["left"]) == (400, 2, 200, 0)
    replicas = 1
    assert _charge(budgets, rules) is not None
    assert _charge(budgets, rules) is not None
    with pytest.raises(Refused):
        _charge(budgets, rules)
