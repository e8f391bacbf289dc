"""The SotW state machine, request by request: ACK, NACK, stale nonces, partial EDS."""

from __future__ import annotations

from envoy.config.core.v3 import base_pb2
from envoy.config.endpoint.v3 import endpoint_pb2
from envoy.service.discovery.v3 import discovery_pb2
from google.rpc import status_pb2

from xds_control.cache import DEFAULT_GROUP, MemorySnapshotCache
from xds_control.config import parse_config
from xds_control.control import ReconcileInputs, reconcile_once
from xds_control.discovery import to_endpoints
from xds_control.server import AdsStream
from xds_control.xds import EndpointWeight, Snapshot
from xds_control.xds import type_urls as urls

CONFIG = parse_config(
    text="""
pools:
  - {name: a, endpoints: [{address: 127.0.0.1:8001}]}
  - {name: b, endpoints: [{address: 127.0.0.1:8002}]}
listeners:
  - name: gw
    address: 127.0.0.1:10000
    routes: [{name: a, pool: a, match: {prefix: /a}}, {name: b, pool: b}]
"""
)
ENDPOINTS = {pool.name: to_endpoints(pool.endpoints) for pool in CONFIG.pools}


def snapshot(**weights: int) -> Snapshot:
    by_address = {
        f"127.0.0.1:{8001 if k == 'a' else 8002}": EndpointWeight(w) for k, w in weights.items()
    }
    return reconcile_once(ReconcileInputs(config=CONFIG, endpoints=ENDPOINTS, weights=by_address))


class Harness:
    def __init__(self, first: Snapshot) -> None:
        self.cache = MemorySnapshotCache()
        self.cache.set_snapshot(DEFAULT_GROUP, first)
        self.stream = AdsStream(
            stream_id=1, snapshot_of=self.cache.snapshot, changed_names=self.cache.changed_names
        )

    def request(
        self,
        type_url: str,
        *,
        names: tuple[str, ...] = (),
        version: str = "",
        nonce: str = "",
        error: str | None = None,
    ) -> list[discovery_pb2.DiscoveryResponse]:
        request = discovery_pb2.DiscoveryRequest(
            node=base_pb2.Node(id="envoy-1"),
            type_url=type_url,
            resource_names=names,
            version_info=version,
            response_nonce=nonce,
        )
        if error is not None:
            request.error_detail.CopyFrom(status_pb2.Status(code=3, message=error))
        raw = self.stream.on_request(request, group=DEFAULT_GROUP, now=1.0)
        return [discovery_pb2.DiscoveryResponse.FromString(b) for b in raw]

    def publish(self, new: Snapshot) -> list[discovery_pb2.DiscoveryResponse]:
        self.cache.set_snapshot(DEFAULT_GROUP, new)
        return [
            discovery_pb2.DiscoveryResponse.FromString(b) for b in self.stream.on_snapshot(now=1.0)
        ]

    def ack(self, response: discovery_pb2.DiscoveryResponse, names: tuple[str, ...] = ()) -> None:
        assert (
            self.request(
                response.type_url, names=names, version=response.version_info, nonce=response.nonce
            )
            == []
        )


def test_initial_requests_get_everything_and_acks_get_nothing() -> None:
    h = Harness(snapshot(a=10, b=10))
    [cds] = h.request(urls.CLUSTER)
    assert len(cds.resources) == 2
    h.ack(cds)
    [eds] = h.request(urls.ENDPOINT, names=("a", "b"))
    assert len(eds.resources) == 2
    h.ack(eds, ("a", "b"))
    assert h.stream.types[urls.ENDPOINT].acked_version == eds.version_info


def test_weight_change_pushes_only_the_changed_assignment() -> None:
    h = Harness(snapshot(a=10, b=10))
    h.ack(h.request(urls.CLUSTER)[0])
    h.ack(h.request(urls.ENDPOINT, names=("a", "b"))[0], ("a", "b"))
    h.ack(h.request(urls.LISTENER)[0])
    h.ack(h.request(urls.ROUTE, names=("gw",))[0], ("gw",))
    pushed = h.publish(snapshot(a=20, b=10))
    assert [p.type_url for p in pushed] == [urls.ENDPOINT]  # CDS/LDS/RDS did not change
    assert len(pushed[0].resources) == 1  # only "a"
    assert h.publish(snapshot(a=20, b=10)) == []  # same content: nothing


def test_nack_keeps_last_good_and_is_not_resent() -> None:
    h = Harness(snapshot(a=10, b=10))
    [eds] = h.request(urls.ENDPOINT, names=("a", "b"))
    h.ack(eds, ("a", "b"))
    [bad] = h.publish(snapshot(a=99, b=10))
    rejected = h.request(
        urls.ENDPOINT,
        names=("a", "b"),
        version=eds.version_info,
        nonce=bad.nonce,
        error="weight too heavy",
    )
    assert rejected == []
    state = h.stream.types[urls.ENDPOINT]
    assert state.nacks == 1
    assert state.last_error == "weight too heavy"
    assert state.acked_version == eds.version_info
    # The same (rejected) content again: not sent; a new version: sent, with "a" in it.
    assert h.publish(snapshot(a=99, b=10)) == []
    [fixed] = h.publish(snapshot(a=30, b=10))
    assert len(fixed.resources) == 1


def test_stale_nonce_is_ignored() -> None:
    h = Harness(snapshot(a=10, b=10))
    [first] = h.request(urls.ENDPOINT, names=("a", "b"))
    [second] = h.publish(snapshot(a=11, b=10))
    assert first.nonce != second.nonce
    stale = h.request(
        urls.ENDPOINT, names=("a", "b"), nonce=first.nonce, error="late complaint about old"
    )
    assert stale == []
    assert h.stream.types[urls.ENDPOINT].nacks == 0


def test_new_subscription_is_answered_even_at_the_same_version() -> None:
    h = Harness(snapshot(a=10, b=10))
    [only_a] = h.request(urls.ENDPOINT, names=("a",))
    assert len(only_a.resources) == 1
    [b] = h.request(
        urls.ENDPOINT, names=("a", "b"), version=only_a.version_info, nonce=only_a.nonce
    )
    assert b.version_info == only_a.version_info
    assert len(b.resources) == 1  # "b" only; Envoy already has "a"


def test_reconnect_with_current_versions_sends_nothing() -> None:
    first = snapshot(a=10, b=10)
    h = Harness(first)
    versions = {t: first.resource_set(t).version for t in urls.ORDER}
    assert h.request(urls.CLUSTER, version=versions[urls.CLUSTER]) == []
    assert h.request(urls.ENDPOINT, names=("a", "b"), version=versions[urls.ENDPOINT]) == []
    # ...but a later change still reaches it.
    [eds] = h.publish(snapshot(a=10, b=12))
    assert len(eds.resources) == 1


def test_reconnect_with_an_old_version_gets_the_current_one() -> None:
    h = Harness(snapshot(a=10, b=10))
    [cds] = h.request(urls.CLUSTER, version="some-old-version")
    assert cds.version_info == snapshot(a=10, b=10).resource_set(urls.CLUSTER).version


def test_a_name_dropped_and_asked_for_again_is_sent_again() -> None:
    # Envoy repeats its names in every ACK; the stream takes a repeat for "no change" without
    # looking, so a drop and a re-subscription must still each be seen.
    h = Harness(snapshot(a=10, b=10))
    [eds] = h.request(urls.ENDPOINT, names=("a", "b"))
    h.ack(eds, ("a", "b"))
    assert h.request(urls.ENDPOINT, names=("a",), version=eds.version_info, nonce=eds.nonce) == []
    h.ack(eds, ("a",))  # the same shorter list again: still only "a"
    [again] = h.request(urls.ENDPOINT, names=("a", "b"), version=eds.version_info, nonce=eds.nonce)
    assert [_cla_name(r.value) for r in again.resources] == ["b"]
    h.ack(again, ("a", "b"))
    [pushed] = h.publish(snapshot(a=10, b=20))
    assert [_cla_name(r.value) for r in pushed.resources] == ["b"]


def _cla_name(value: bytes) -> str:
    return str(endpoint_pb2.ClusterLoadAssignment.FromString(value).cluster_name)
