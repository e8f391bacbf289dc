"""Which servers of a cluster every Envoy has taken: its ACKed ClusterLoadAssignment on every
stream that asks for it (what flow control dispatches to when a pool scales from zero)."""

from __future__ import annotations

from envoy.config.core.v3 import base_pb2
from envoy.service.discovery.v3 import discovery_pb2

from xds_control.cache import DEFAULT_GROUP, MemorySnapshotCache
from xds_control.config import parse_config
from xds_control.control import ReconcileInputs, reconcile_once
from xds_control.discovery import to_endpoints
from xds_control.server import AdsStream, StreamRegistry
from xds_control.xds import type_urls as urls

CONFIG = parse_config(
    text="""
pools:
  - {name: chat, endpoints: [{address: 127.0.0.1:8001}, {address: 127.0.0.1:8002}]}
listeners:
  - {name: gw, address: 127.0.0.1:10000, routes: [{name: chat, pool: chat}]}
"""
)


def _eds(node: str, *, version: str = "", nonce: str = "") -> discovery_pb2.DiscoveryRequest:
    return discovery_pb2.DiscoveryRequest(
        node=base_pb2.Node(id=node),
        type_url=urls.ENDPOINT,
        resource_names=["chat"],
        version_info=version,
        response_nonce=nonce,
    )


def test_only_servers_every_asking_envoy_acked_count() -> None:
    cache = MemorySnapshotCache()
    endpoints = {pool.name: to_endpoints(pool.endpoints) for pool in CONFIG.pools}
    cache.set_snapshot(
        DEFAULT_GROUP, reconcile_once(ReconcileInputs(config=CONFIG, endpoints=endpoints))
    )
    registry = StreamRegistry()
    assert registry.endpoints_everywhere("chat") is None  # no Envoy asks

    def connect(stream_id: int) -> AdsStream:
        stream = AdsStream(
            stream_id=stream_id,
            snapshot_of=cache.snapshot,
            changed_names=cache.changed_names,
            events=registry,
        )
        registry.add(stream)
        return stream

    def send(stream: AdsStream, request: discovery_pb2.DiscoveryRequest) -> list[str]:
        out = stream.on_request(request, group=DEFAULT_GROUP, now=1.0)
        return [discovery_pb2.DiscoveryResponse.FromString(raw).nonce for raw in out]

    first = connect(1)
    [nonce] = send(first, _eds("a"))
    assert registry.endpoints_everywhere("chat") == frozenset()  # sent, not yet ACKed
    version = cache.snapshot(DEFAULT_GROUP).load_assignments.version  # type: ignore[union-attr]
    send(first, _eds("a", version=version, nonce=nonce))
    both = frozenset({"127.0.0.1:8001", "127.0.0.1:8002"})
    assert registry.endpoints_everywhere("chat") == both
    assert registry.endpoints_everywhere("other") is None

    second = connect(2)
    [nonce] = send(second, _eds("b"))
    assert registry.endpoints_everywhere("chat") == frozenset()  # b has not taken them yet
    send(second, _eds("b", version=version, nonce=nonce))
    assert registry.endpoints_everywhere("chat") == both
    registry.remove(second)
    assert registry.endpoints_everywhere("chat") == both
