"""CSDS's per-resource status: what Envoy ACKed against what is served now."""

from __future__ import annotations

from envoy.admin.v3 import config_dump_shared_pb2 as dump
from envoy.config.endpoint.v3 import endpoint_pb2
from envoy.service.status.v3 import csds_pb2

from xds_control.server.csds import resource_status
from xds_control.server.session import TypeState
from xds_control.xds import PreparedResource
from xds_control.xds import type_urls as urls


def prepared(digest: str) -> PreparedResource[endpoint_pb2.ClusterLoadAssignment]:
    message = endpoint_pb2.ClusterLoadAssignment(cluster_name="chat")
    return PreparedResource(
        name="chat", message=message, framed=b"", delta_framed=b"", digest=digest
    )


def test_the_four_states() -> None:
    state = TypeState(type_url=urls.ENDPOINT, requested=True, names=frozenset({"chat"}))
    served = prepared("v2")
    assert resource_status(state=state, name="chat", served=served) == (
        csds_pb2.NOT_SENT,
        dump.REQUESTED,
    )
    state.sent["chat"] = "v2"  # sent, not answered yet
    assert resource_status(state=state, name="chat", served=served) == (
        csds_pb2.STALE,
        dump.REQUESTED,
    )
    state.acked["chat"] = prepared("v1")  # Envoy runs an older one
    assert resource_status(state=state, name="chat", served=served) == (
        csds_pb2.STALE,
        dump.ACKED,
    )
    state.acked["chat"] = prepared("v2")
    assert resource_status(state=state, name="chat", served=served) == (
        csds_pb2.SYNCED,
        dump.ACKED,
    )
    state.rejected.add("chat")  # the next one was NACKed: Envoy keeps v2, we are in error
    assert resource_status(state=state, name="chat", served=prepared("v3")) == (
        csds_pb2.ERROR,
        dump.NACKED,
    )


def test_a_resource_no_longer_served_is_stale_not_synced() -> None:
    state = TypeState(type_url=urls.ENDPOINT, acked={"chat": prepared("v1")})
    assert resource_status(state=state, name="chat", served=None)[0] == csds_pb2.STALE
