"""The responses a stream writes are assembled from prepared bytes (the snapshot's framed
resources, a header per version, the stream's nonce): they must read back as exactly the
message the protobuf library would build from the same resources."""

from __future__ import annotations

from envoy.config.core.v3 import base_pb2
from envoy.service.discovery.v3 import discovery_pb2
from google.protobuf import any_pb2

from xds_control import __version__
from xds_control.cache import DEFAULT_GROUP, MemorySnapshotCache
from xds_control.config import parse_config
from xds_control.control import ReconcileInputs, reconcile_once
from xds_control.discovery import to_endpoints
from xds_control.server import AdsStream
from xds_control.server.delta import DeltaStream
from xds_control.xds import EndpointWeight, Snapshot
from xds_control.xds import type_urls as urls

CONFIG = parse_config(
    text="""
pools:
  - {name: a, endpoints: [{address: 127.0.0.1:8001}, {address: 127.0.0.1:8003}]}
  - {name: b, endpoints: [{address: 127.0.0.1:8002}]}
listeners:
  - name: gw
    address: 127.0.0.1:10000
    routes: [{name: a, pool: a, match: {prefix: /a}}, {name: b, pool: b}]
"""
)
ENDPOINTS = {pool.name: to_endpoints(pool.endpoints) for pool in CONFIG.pools}
CONTROL_PLANE = base_pb2.ControlPlane(identifier=f"xds-control/{__version__}")


def _snapshot(weight: int) -> Snapshot:
    weights = {"127.0.0.1:8003": EndpointWeight(weight)}
    return reconcile_once(ReconcileInputs(config=CONFIG, endpoints=ENDPOINTS, weights=weights))


def _packed(snapshot: Snapshot, type_url: str, names: list[str]) -> list[any_pb2.Any]:
    resources = snapshot.resource_set(type_url).resources
    packed = []
    for name in names:
        wrapper = any_pb2.Any()
        wrapper.Pack(resources[name].message)
        packed.append(wrapper)
    return packed


def test_sotw_responses_read_back_as_protobuf_builds_them() -> None:
    current = _snapshot(10)
    cache = MemorySnapshotCache()
    cache.set_snapshot(DEFAULT_GROUP, current)
    stream = AdsStream(stream_id=1, snapshot_of=cache.snapshot, changed_names=cache.changed_names)
    node = base_pb2.Node(id="envoy-1")
    for type_url, names in ((urls.CLUSTER, []), (urls.ENDPOINT, ["a", "b"])):
        request = discovery_pb2.DiscoveryRequest(node=node, type_url=type_url, resource_names=names)
        [raw] = stream.on_request(request, group=DEFAULT_GROUP, now=1.0)
        resources = current.resource_set(type_url)
        expected = discovery_pb2.DiscoveryResponse(
            version_info=resources.version,
            type_url=type_url,
            resources=_packed(current, type_url, sorted(resources.resources)),
            nonce=stream.types[type_url].nonce,
            control_plane=CONTROL_PLANE,
        )
        assert discovery_pb2.DiscoveryResponse.FromString(raw) == expected
    current = _snapshot(30)  # a push carries the one changed assignment, a new nonce
    cache.set_snapshot(DEFAULT_GROUP, current)
    [pushed] = stream.on_snapshot(now=1.0)
    expected = discovery_pb2.DiscoveryResponse(
        version_info=current.resource_set(urls.ENDPOINT).version,
        type_url=urls.ENDPOINT,
        resources=_packed(current, urls.ENDPOINT, ["a"]),
        nonce=stream.types[urls.ENDPOINT].nonce,
        control_plane=CONTROL_PLANE,
    )
    assert discovery_pb2.DiscoveryResponse.FromString(pushed) == expected


def test_delta_responses_read_back_as_protobuf_builds_them() -> None:
    current = _snapshot(10)
    cache = MemorySnapshotCache()
    cache.set_snapshot(DEFAULT_GROUP, current)
    stream = DeltaStream(stream_id=1, snapshot_of=cache.snapshot, changed_names=cache.changed_names)
    request = discovery_pb2.DeltaDiscoveryRequest(
        node=base_pb2.Node(id="envoy-1"),
        type_url=urls.ENDPOINT,
        resource_names_subscribe=["a", "b"],
    )
    [raw] = stream.on_request(request, group=DEFAULT_GROUP, now=1.0)
    assignments = current.resource_set(urls.ENDPOINT)
    expected = discovery_pb2.DeltaDiscoveryResponse(
        system_version_info=assignments.version,
        type_url=urls.ENDPOINT,
        nonce=stream.types[urls.ENDPOINT].nonce,
        control_plane=CONTROL_PLANE,
    )
    for name, packed in zip(["a", "b"], _packed(current, urls.ENDPOINT, ["a", "b"]), strict=True):
        expected.resources.add(
            name=name, version=assignments.resources[name].digest, resource=packed
        )
    assert discovery_pb2.DeltaDiscoveryResponse.FromString(raw) == expected
