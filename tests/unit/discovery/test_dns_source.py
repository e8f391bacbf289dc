"""DnsSource: every address of every name is an endpoint; a failing name keeps its last good
addresses, re-resolved on the retry period; names are re-resolved on the refresh period. The
resolver is a typed seam (``Resolver``); ``localhost`` goes through the real one."""

from __future__ import annotations

import asyncio

import pytest

from xds_control.config.discovery import DnsDiscovery
from xds_control.discovery.dns import DnsSource, system_resolver
from xds_control.errors import DiscoveryError


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Answers:
    """A resolver that answers from a table and counts its calls; a missing name fails as
    the system resolver does."""

    def __init__(self, table: dict[str, tuple[str, ...]]) -> None:
        self.table = table
        self.calls = 0

    async def __call__(self, host: str, port: int) -> tuple[str, ...]:
        self.calls += 1
        if host not in self.table:
            raise OSError(-2, "Name or service not known")
        return self.table[host]


def settings(*hosts: str) -> DnsDiscovery:
    return DnsDiscovery(hosts=hosts, refresh_s=30, retry_s=2, weight=7, batch_slots=64)


async def test_localhost_resolves_through_the_system_resolver() -> None:
    got = await DnsSource(settings("localhost:8000")).fetch()
    assert {e.host for e in got} <= {"127.0.0.1", "::1"}
    assert "127.0.0.1:8000" in {e.address for e in got}
    assert all(e.port == 8000 and e.weight == 7 and e.batch_slots == 64 for e in got)


async def test_system_resolver_answers_ip_literals() -> None:
    assert "127.0.0.1" in await system_resolver("127.0.0.1", 80)


async def test_every_address_is_an_endpoint_ipv6_bracketed_and_duplicates_merged() -> None:
    resolver = Answers({"vllm.internal": ("10.0.0.2", "10.0.0.1", "10.0.0.1", "fd00::1")})
    got = await DnsSource(settings("vllm.internal:8000"), resolver=resolver).fetch()
    assert [e.address for e in got] == ["10.0.0.1:8000", "10.0.0.2:8000", "[fd00::1]:8000"]
    assert got[2].host == "fd00::1"


async def test_a_failing_name_keeps_its_last_good_addresses() -> None:
    clock = Clock()
    resolver = Answers({"a.internal": ("10.0.0.1",), "b.internal": ("10.0.0.2",)})
    source = DnsSource(
        settings("a.internal:8000", "b.internal:8000"), resolver=resolver, clock=clock
    )
    assert len(await source.fetch()) == 2
    del resolver.table["b.internal"]
    clock.now += 30
    got = await source.fetch()
    assert {e.address for e in got} == {"10.0.0.1:8000", "10.0.0.2:8000"}
    calls = resolver.calls
    clock.now += 1  # before retry_s: nothing is resolved again
    await source.fetch()
    assert resolver.calls == calls
    resolver.table["b.internal"] = ("10.0.0.3",)
    clock.now += 1  # retry_s after the failure: only the failed name is tried again
    got = await source.fetch()
    assert resolver.calls == calls + 1
    assert {e.address for e in got} == {"10.0.0.1:8000", "10.0.0.3:8000"}


async def test_failure_is_logged_once_with_the_host_and_the_kept_addresses(
    capsys: pytest.CaptureFixture[str],
) -> None:
    clock = Clock()
    resolver = Answers({"a.internal": ("10.0.0.1",)})
    source = DnsSource(settings("a.internal:8000"), resolver=resolver, clock=clock)
    await source.fetch()
    resolver.table.clear()
    for _ in range(3):
        clock.now += 30
        await source.fetch()
    out = capsys.readouterr().out
    assert out.count("DNS resolution failed; keeping the last good addresses") == 1
    assert "a.internal" in out
    assert "10.0.0.1" in out


async def test_names_are_resolved_again_on_the_refresh_period() -> None:
    clock = Clock()
    resolver = Answers({"a.internal": ("10.0.0.1",)})
    source = DnsSource(settings("a.internal:8000"), resolver=resolver, clock=clock)
    await source.fetch()
    resolver.table["a.internal"] = ("10.0.0.5",)
    clock.now += 29
    assert [e.host for e in await source.fetch()] == ["10.0.0.1"]
    clock.now += 1
    assert [e.host for e in await source.fetch()] == ["10.0.0.5"]


async def test_no_name_ever_resolved_is_a_discovery_error_naming_them() -> None:
    source = DnsSource(settings("nope.internal:8000"), resolver=Answers({}))
    with pytest.raises(DiscoveryError, match=r"nope\.internal: .*not known"):
        await source.fetch()


async def test_an_empty_answer_or_a_hung_resolver_counts_as_failure() -> None:
    async def hangs(host: str, port: int) -> tuple[str, ...]:
        await asyncio.sleep(10)
        return ()

    fast = DnsDiscovery(hosts=("a.internal:1",), timeout_s=0.05)
    with pytest.raises(DiscoveryError, match="timed out"):
        await DnsSource(fast, resolver=hangs).fetch()
    with pytest.raises(DiscoveryError, match="no A or AAAA"):
        await DnsSource(fast, resolver=Answers({"a.internal": ()})).fetch()
