"""The delta (incremental) state machine, request by request: subscriptions, per-resource
versions, removals, reconnects, NACKs, and a removed cluster held while a route names it."""

from __future__ import annotations

from typing import TypeAlias

from envoy.config.core.v3 import base_pb2
from envoy.config.endpoint.v3 import endpoint_pb2
from envoy.service.discovery.v3 import discovery_pb2
from google.rpc import status_pb2

from two_pools import ONLY_A, ROUTE_TABLE, snapshot
from xds_control.cache import DEFAULT_GROUP, MemorySnapshotCache
from xds_control.server import DeltaStream
from xds_control.xds import Snapshot
from xds_control.xds import type_urls as urls

Response: TypeAlias = discovery_pb2.DeltaDiscoveryResponse


class Harness:
    def __init__(self, first: Snapshot) -> None:
        self.current = first
        self.cache = MemorySnapshotCache()
        self.cache.set_snapshot(DEFAULT_GROUP, first)
        self.stream = DeltaStream(
            stream_id=1, snapshot_of=self.cache.snapshot, changed_names=self.cache.changed_names
        )

    def request(
        self,
        type_url: str,
        *,
        subscribe: tuple[str, ...] = (),
        unsubscribe: tuple[str, ...] = (),
        initial: dict[str, str] | None = None,
        nonce: str = "",
        error: str | None = None,
    ) -> list[Response]:
        request = discovery_pb2.DeltaDiscoveryRequest(
            node=base_pb2.Node(id="envoy-1"),
            type_url=type_url,
            resource_names_subscribe=subscribe,
            resource_names_unsubscribe=unsubscribe,
            initial_resource_versions=initial or {},
            response_nonce=nonce,
        )
        if error is not None:
            request.error_detail.CopyFrom(status_pb2.Status(code=3, message=error))
        return [
            Response.FromString(b)
            for b in self.stream.on_request(request, group=DEFAULT_GROUP, now=1.0)
        ]

    def ack(self, response: Response) -> list[Response]:
        return self.request(response.type_url, nonce=response.nonce)

    def publish(self, new: Snapshot) -> list[Response]:
        self.current = new
        self.cache.set_snapshot(DEFAULT_GROUP, new)
        return [Response.FromString(b) for b in self.stream.on_snapshot(now=1.0)]

    def connect(self) -> None:
        """Envoy's start: wildcard CDS and LDS, EDS and RDS by name; everything ACKed."""
        assert self.ack(self.request(urls.CLUSTER)[0]) == []
        assert self.ack(self.request(urls.ENDPOINT, subscribe=("a", "b"))[0]) == []
        assert self.ack(self.request(urls.LISTENER)[0]) == []
        assert self.ack(self.request(urls.ROUTE, subscribe=(ROUTE_TABLE,))[0]) == []


def names(response: Response) -> list[str]:
    return [r.name for r in response.resources]


def test_wildcard_and_named_subscriptions_get_resources_with_their_digests() -> None:
    first = snapshot()
    h = Harness(first)
    [cds] = h.request(urls.CLUSTER)
    assert names(cds) == ["a", "b"]
    assert [r.version for r in cds.resources] == [
        first.clusters.resources[n].digest for n in ("a", "b")
    ]
    assert cds.system_version_info == first.clusters.version
    [eds] = h.request(urls.ENDPOINT, subscribe=("a",))
    assert names(eds) == ["a"]
    assert h.ack(eds) == []
    assert h.stream.types[urls.ENDPOINT].acked_version == first.load_assignments.version


def test_one_pool_weight_change_sends_exactly_one_resource() -> None:
    h = Harness(snapshot(a=10, b=10))
    h.connect()
    [eds] = h.publish(snapshot(a=20, b=10))
    assert eds.type_url == urls.ENDPOINT
    assert names(eds) == ["a"]
    cla = endpoint_pb2.ClusterLoadAssignment()
    eds.resources[0].resource.Unpack(cla)
    assert cla.endpoints[0].lb_endpoints[0].load_balancing_weight.value == 20
    assert h.publish(snapshot(a=20, b=10)) == []


def test_unsubscribed_name_is_not_pushed_and_is_sent_again_on_resubscribe() -> None:
    h = Harness(snapshot())
    h.connect()
    assert h.request(urls.ENDPOINT, unsubscribe=("b",)) == []
    assert h.publish(snapshot(a=10, b=30)) == []  # b changed, but nobody wants it
    [again] = h.request(urls.ENDPOINT, subscribe=("b",))
    assert names(again) == ["b"]
    assert h.ack(again) == []
    assert h.request(urls.ENDPOINT, unsubscribe=("b",)) == []
    [unchanged] = h.request(urls.ENDPOINT, subscribe=("b",))
    assert names(unchanged) == ["b"]  # the same content: sent again all the same


def test_removed_pool_waits_for_the_route_table_that_no_longer_names_it() -> None:
    h = Harness(snapshot())
    h.connect()
    pushed = h.publish(snapshot(text=ONLY_A))
    # The route table changes; cluster b stays while Envoy's ACKed routes still name it.
    assert [p.type_url for p in pushed] == [urls.ROUTE]
    assert h.stream.held_clusters(h.current) == {"b"}
    [cds] = h.ack(pushed[0])
    assert cds.type_url == urls.CLUSTER
    assert list(cds.removed_resources) == ["b"]
    assert list(cds.resources) == []
    assert h.ack(cds) == []
    # Envoy drops the cluster's assignment by unsubscribing; nothing is removed under it.
    assert h.request(urls.ENDPOINT, unsubscribe=("b",)) == []


def test_reconnect_with_current_versions_sends_nothing_and_later_changes_still_arrive() -> None:
    first = snapshot()
    h = Harness(first)
    have = {
        t: {n: p.digest for n, p in first.resource_set(t).resources.items()} for t in urls.ORDER
    }
    assert h.request(urls.CLUSTER, initial=have[urls.CLUSTER]) == []
    assert h.request(urls.ENDPOINT, subscribe=("a", "b"), initial=have[urls.ENDPOINT]) == []
    assert h.request(urls.LISTENER, initial=have[urls.LISTENER]) == []
    assert h.request(urls.ROUTE, subscribe=(ROUTE_TABLE,), initial=have[urls.ROUTE]) == []
    [eds] = h.publish(snapshot(a=10, b=12))
    assert names(eds) == ["b"]


def test_reconnect_after_a_config_change_sends_only_the_difference() -> None:
    old = snapshot()
    h = Harness(snapshot(a=50, b=10, text=ONLY_A))
    have = {n: p.digest for n, p in old.clusters.resources.items()}
    # "a" is the same cluster: not sent. "b" is gone, but Envoy's routes may still name it:
    # it is removed only once this stream knows the route tables Envoy runs.
    assert h.request(urls.CLUSTER, initial=have) == []
    eds = h.request(urls.ENDPOINT, subscribe=("a", "b"), initial=dict.fromkeys(("a", "b"), "old"))
    assert [names(r) for r in eds] == [["a"]]  # "b" keeps its endpoints: no empty assignment
    h.ack(eds[0])
    [lds] = h.request(urls.LISTENER)
    h.ack(lds)
    [rds] = h.request(urls.ROUTE, subscribe=(ROUTE_TABLE,), initial={ROUTE_TABLE: "old"})
    [cds] = h.ack(rds)
    assert list(cds.removed_resources) == ["b"]


def test_unknown_cluster_gets_an_empty_assignment_so_it_does_not_warm_for_ever() -> None:
    h = Harness(snapshot())
    [eds] = h.request(urls.ENDPOINT, subscribe=("a", "ghost"))
    assert names(eds) == ["a", "ghost"]
    ghost = endpoint_pb2.ClusterLoadAssignment()
    eds.resources[1].resource.Unpack(ghost)
    assert ghost.cluster_name == "ghost"
    assert not ghost.endpoints
    assert h.ack(eds) == []
    assert h.publish(snapshot(a=10, b=12)) == []  # ghost still unknown: not sent again


def test_nack_is_counted_and_the_rejected_content_is_not_resent() -> None:
    h = Harness(snapshot())
    h.connect()
    good = h.stream.types[urls.ENDPOINT].acked_version
    [bad] = h.publish(snapshot(a=99, b=10))
    assert h.request(urls.ENDPOINT, nonce=bad.nonce, error="weight too heavy") == []
    state = h.stream.types[urls.ENDPOINT]
    assert (state.nacks, state.last_error, state.acked_version) == (1, "weight too heavy", good)
    assert h.publish(snapshot(a=99, b=10)) == []
    [fixed] = h.publish(snapshot(a=30, b=10))
    assert names(fixed) == ["a"]


def test_acks_may_arrive_for_any_response_in_flight() -> None:
    h = Harness(snapshot())
    h.connect()
    [first] = h.publish(snapshot(a=11))
    [second] = h.publish(snapshot(a=12))
    assert h.ack(first) == []
    assert h.ack(second) == []
    assert h.stream.types[urls.ENDPOINT].acked_version == snapshot(a=12).load_assignments.version
    assert h.request(urls.ENDPOINT, nonce="no-such-nonce", error="late") == []
    assert h.stream.types[urls.ENDPOINT].nacks == 0
    assert h.stream.describe()["ads"] == "delta"


def test_route_to_a_new_pool_waits_until_its_cluster_has_endpoints() -> None:
    h = Harness(snapshot(text=ONLY_A))
    assert h.ack(h.request(urls.CLUSTER)[0]) == []
    assert h.ack(h.request(urls.ENDPOINT, subscribe=("a",))[0]) == []
    assert h.ack(h.request(urls.LISTENER)[0]) == []
    assert h.ack(h.request(urls.ROUTE, subscribe=(ROUTE_TABLE,))[0]) == []
    # Pool b and a route to it: the cluster goes out, the route table waits.
    [cds] = h.publish(snapshot())
    assert cds.type_url == urls.CLUSTER
    assert names(cds) == ["b"]
    assert h.ack(cds) == []  # accepted, but Envoy has not asked for b's endpoints yet
    [eds] = h.request(urls.ENDPOINT, subscribe=("b",))
    assert names(eds) == ["b"]
    [rds] = h.ack(eds)  # b is warm: now the route to it
    assert rds.type_url == urls.ROUTE


def test_a_rejected_new_cluster_does_not_hold_the_route_table_for_ever() -> None:
    h = Harness(snapshot(text=ONLY_A))
    h.ack(h.request(urls.CLUSTER)[0])
    h.ack(h.request(urls.ENDPOINT, subscribe=("a",))[0])
    h.ack(h.request(urls.LISTENER)[0])
    h.ack(h.request(urls.ROUTE, subscribe=(ROUTE_TABLE,))[0])
    [cds] = h.publish(snapshot())
    [rds] = h.request(urls.CLUSTER, nonce=cds.nonce, error="bad cluster b")
    assert rds.type_url == urls.ROUTE
