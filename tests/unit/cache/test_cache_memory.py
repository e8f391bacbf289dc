"""MemorySnapshotCache: one snapshot per group, and a wake-up per change of version only."""

from __future__ import annotations

from envoy.config.core.v3 import base_pb2

from xds_control.cache import DEFAULT_GROUP, MemorySnapshotCache, Unsubscribe
from xds_control.config import parse_config
from xds_control.control import ReconcileInputs, reconcile_once
from xds_control.discovery import to_endpoints
from xds_control.xds import EndpointWeight, Snapshot

CONFIG = parse_config(
    text="""
pools: [{name: chat, endpoints: [{address: 127.0.0.1:8001, weight: 10}]}]
listeners: [{name: gw, address: 127.0.0.1:10000, routes: [{name: all, pool: chat}]}]
"""
)
ENDPOINTS = {"chat": to_endpoints(CONFIG.pools[0].endpoints)}


def snapshot(weight: int = 10) -> Snapshot:
    """A fresh snapshot object; equal weights give equal content and so an equal version."""
    weights = {"127.0.0.1:8001": EndpointWeight(weight)}
    return reconcile_once(ReconcileInputs(config=CONFIG, endpoints=ENDPOINTS, weights=weights))


class Wakes:
    """A subscriber that counts its wake-ups."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self) -> None:
        self.count += 1


def test_nothing_before_the_first_publication() -> None:
    cache = MemorySnapshotCache()
    assert cache.snapshot(DEFAULT_GROUP) is None


def test_groups_hold_their_own_snapshots() -> None:
    cache = MemorySnapshotCache()
    one, two = snapshot(10), snapshot(20)
    assert cache.set_snapshot("one", one)
    assert cache.set_snapshot("two", two)
    assert cache.snapshot("one") is one
    assert cache.snapshot("two") is two
    assert cache.snapshot(DEFAULT_GROUP) is None


def test_every_node_gets_the_default_group() -> None:
    cache = MemorySnapshotCache()
    for node in (base_pb2.Node(), base_pb2.Node(id="envoy-1", cluster="edge")):
        assert cache.group_of(node) == DEFAULT_GROUP


def test_a_new_version_wakes_the_groups_subscribers_only() -> None:
    cache = MemorySnapshotCache()
    mine, other = Wakes(), Wakes()
    cache.subscribe(DEFAULT_GROUP, mine)
    cache.subscribe("other", other)
    assert cache.set_snapshot(DEFAULT_GROUP, snapshot(10))
    assert cache.set_snapshot(DEFAULT_GROUP, snapshot(20))
    assert (mine.count, other.count) == (2, 0)
    current = cache.snapshot(DEFAULT_GROUP)
    assert current is not None
    assert current.version == snapshot(20).version


def test_an_equal_snapshot_is_not_published_and_wakes_nobody() -> None:
    cache = MemorySnapshotCache()
    wakes = Wakes()
    cache.subscribe(DEFAULT_GROUP, wakes)
    first = snapshot(10)
    assert cache.set_snapshot(DEFAULT_GROUP, first)
    again = snapshot(10)
    assert again is not first
    assert again.version == first.version
    assert not cache.set_snapshot(DEFAULT_GROUP, again)
    assert wakes.count == 1
    assert cache.snapshot(DEFAULT_GROUP) is first


def test_unsubscribed_callbacks_are_not_called() -> None:
    cache = MemorySnapshotCache()
    gone, staying = Wakes(), Wakes()
    unsubscribe = cache.subscribe(DEFAULT_GROUP, gone)
    cache.subscribe(DEFAULT_GROUP, staying)
    cache.set_snapshot(DEFAULT_GROUP, snapshot(10))
    unsubscribe()
    unsubscribe()  # a stream that closes twice must not break the cache
    cache.set_snapshot(DEFAULT_GROUP, snapshot(20))
    assert (gone.count, staying.count) == (1, 2)


def test_a_subscriber_may_unsubscribe_while_being_woken() -> None:
    # A stream that ends while a publication is being announced must not stop the others
    # hearing of it.
    cache = MemorySnapshotCache()
    woken: list[str] = []
    unsubscribes: dict[str, Unsubscribe] = {}
    for name in ("a", "b", "c"):

        def wake(name: str = name) -> None:
            woken.append(name)
            unsubscribes[name]()

        unsubscribes[name] = cache.subscribe(DEFAULT_GROUP, wake)
    cache.set_snapshot(DEFAULT_GROUP, snapshot(10))
    assert sorted(woken) == ["a", "b", "c"]
    cache.set_snapshot(DEFAULT_GROUP, snapshot(20))
    assert sorted(woken) == ["a", "b", "c"]
