"""Tenants' shares of what a pool let go: who is over, and how the past fades."""

from __future__ import annotations

from xds_control.flow.shares import TenantShares


def _served(shares: TenantShares, tenant: str, count: int, *, at: float) -> None:
    for _ in range(count):
        shares.served(tenant, now=at)


def test_tenants_sending_alike_are_none_of_them_over() -> None:
    shares = TenantShares()
    _served(shares, "a", 50, at=0.0)
    _served(shares, "b", 54, at=0.0)
    assert shares.over({"a", "b"}, now=1.0) == frozenset()


def test_a_tenant_let_go_more_than_its_equal_share_is_over() -> None:
    shares = TenantShares()
    _served(shares, "heavy", 60, at=0.0)
    _served(shares, "light", 40, at=0.0)
    assert shares.over({"heavy", "light"}, now=1.0) == {"heavy"}
    # A tenant that holds nothing is not compared: alone, nobody is over.
    assert shares.over({"heavy"}, now=1.0) == frozenset()
    # A tenant new to the pool is within its share at once.
    assert shares.over({"light", "new"}, now=1.0) == {"light"}


def test_the_past_fades_so_a_tenant_that_turned_light_is_within_again() -> None:
    shares = TenantShares(half_life_s=10.0)
    _served(shares, "a", 100, at=0.0)
    _served(shares, "b", 10, at=0.0)
    assert shares.over({"a", "b"}, now=0.0) == {"a"}
    _served(shares, "b", 30, at=40.0)  # a's 100 is worth ~6 by now
    assert shares.over({"a", "b"}, now=40.0) == {"b"}
