"""Make-before-break in the state of the world: a removed pool's cluster stays in CDS until the
route table that no longer names it is ACKed; unknown EDS names are answered; a name asked for
again is sent again."""

from __future__ import annotations

from typing import TypeAlias

from envoy.config.cluster.v3 import cluster_pb2
from envoy.config.core.v3 import base_pb2
from envoy.config.endpoint.v3 import endpoint_pb2
from envoy.service.discovery.v3 import discovery_pb2

from two_pools import ONLY_A, ROUTE_TABLE, snapshot
from xds_control.cache import DEFAULT_GROUP, MemorySnapshotCache
from xds_control.server import AdsStream
from xds_control.xds import Snapshot
from xds_control.xds import type_urls as urls

Response: TypeAlias = discovery_pb2.DiscoveryResponse


class Harness:
    def __init__(self, first: Snapshot) -> None:
        self.current = first
        self.cache = MemorySnapshotCache()
        self.cache.set_snapshot(DEFAULT_GROUP, first)
        self.stream = AdsStream(
            stream_id=1, snapshot_of=self.cache.snapshot, changed_names=self.cache.changed_names
        )
        self.names: dict[str, tuple[str, ...]] = {}

    def request(
        self, type_url: str, *, names: tuple[str, ...] | None = None, ack: Response | None = None
    ) -> list[Response]:
        if names is not None:
            self.names[type_url] = names
        request = discovery_pb2.DiscoveryRequest(
            node=base_pb2.Node(id="envoy-1"),
            type_url=type_url,
            resource_names=self.names.get(type_url, ()),
            version_info=ack.version_info if ack is not None else "",
            response_nonce=ack.nonce if ack is not None else "",
        )
        return [
            Response.FromString(b)
            for b in self.stream.on_request(request, group=DEFAULT_GROUP, now=1.0)
        ]

    def ack(self, response: Response) -> list[Response]:
        return self.request(response.type_url, ack=response)

    def publish(self, new: Snapshot) -> list[Response]:
        self.current = new
        self.cache.set_snapshot(DEFAULT_GROUP, new)
        return [Response.FromString(b) for b in self.stream.on_snapshot(now=1.0)]

    def connect(self) -> None:
        assert self.ack(self.request(urls.CLUSTER)[0]) == []
        assert self.ack(self.request(urls.ENDPOINT, names=("a", "b"))[0]) == []
        assert self.ack(self.request(urls.LISTENER)[0]) == []
        assert self.ack(self.request(urls.ROUTE, names=(ROUTE_TABLE,))[0]) == []


def cluster_names(response: Response) -> list[str]:
    out = []
    for packed in response.resources:
        cluster = cluster_pb2.Cluster()
        packed.Unpack(cluster)
        out.append(cluster.name)
    return out


def test_removed_pool_stays_in_cds_until_the_new_route_table_is_acked() -> None:
    h = Harness(snapshot())
    h.connect()
    pushed = h.publish(snapshot(text=ONLY_A))
    # CDS with b kept is what Envoy has already: nothing to send but the new route table.
    assert [p.type_url for p in pushed] == [urls.ROUTE]
    [cds] = h.ack(pushed[0])
    assert cds.type_url == urls.CLUSTER
    assert cluster_names(cds) == ["a"]
    assert cds.version_info == h.current.clusters.version
    assert h.ack(cds) == []


def test_weight_change_and_removal_in_one_edit() -> None:
    h = Harness(snapshot())
    h.connect()
    # A weight change and the removal at once: the EDS change goes out, CDS keeps b.
    pushed = h.publish(snapshot(a=40, text=ONLY_A))
    assert [p.type_url for p in pushed] == [urls.ENDPOINT, urls.ROUTE]
    [cds] = h.ack(pushed[1])
    assert cluster_names(cds) == ["a"]


def test_unknown_cluster_gets_an_empty_assignment() -> None:
    h = Harness(snapshot())
    [eds] = h.request(urls.ENDPOINT, names=("a", "ghost"))
    assert len(eds.resources) == 2
    ghost = endpoint_pb2.ClusterLoadAssignment()
    eds.resources[1].Unpack(ghost)
    assert ghost.cluster_name == "ghost"
    assert not ghost.endpoints
    assert h.ack(eds) == []


def test_name_asked_for_again_is_sent_again() -> None:
    h = Harness(snapshot())
    h.connect()
    assert h.request(urls.ENDPOINT, names=("a",)) == []
    [again] = h.request(urls.ENDPOINT, names=("a", "b"))
    assert len(again.resources) == 1
    cla = endpoint_pb2.ClusterLoadAssignment()
    again.resources[0].Unpack(cla)
    assert cla.cluster_name == "b"


def test_route_to_a_new_pool_waits_until_its_cluster_has_endpoints() -> None:
    h = Harness(snapshot(text=ONLY_A))
    assert h.ack(h.request(urls.CLUSTER)[0]) == []
    assert h.ack(h.request(urls.ENDPOINT, names=("a",))[0]) == []
    assert h.ack(h.request(urls.LISTENER)[0]) == []
    assert h.ack(h.request(urls.ROUTE, names=(ROUTE_TABLE,))[0]) == []
    [cds] = h.publish(snapshot())
    assert cluster_names(cds) == ["a", "b"]
    assert h.ack(cds) == []
    [eds] = h.request(urls.ENDPOINT, names=("a", "b"))
    assert len(eds.resources) == 1
    [rds] = h.ack(eds)
    assert rds.type_url == urls.ROUTE
