"""The delta state machine on structured-random requests and snapshot changes (pools removed
and added back included): it never crashes, every response parses with a fresh nonce, and a
cluster is never removed while a route table this Envoy ACKed still names it."""

from __future__ import annotations

import json

from envoy.config.core.v3 import base_pb2
from envoy.service.discovery.v3 import discovery_pb2
from google.rpc import status_pb2
from hypothesis import given, settings
from hypothesis import strategies as st

from two_pools import ONLY_A, snapshot
from xds_control.cache import DEFAULT_GROUP, MemorySnapshotCache
from xds_control.server import DeltaStream
from xds_control.xds import type_urls as urls

SNAPSHOTS = [snapshot(a=10), snapshot(a=20), snapshot(a=30, text=ONLY_A)]
words = st.one_of(
    st.sampled_from(["", "*", "a", "b", "gw", "1", "2", "ghost"]), st.text(max_size=6)
)
type_urls = st.one_of(st.sampled_from(urls.ORDER), st.text(max_size=12))


@st.composite
def requests(draw: st.DrawFn) -> discovery_pb2.DeltaDiscoveryRequest:
    request = discovery_pb2.DeltaDiscoveryRequest(
        node=base_pb2.Node(id=draw(words)),
        type_url=draw(type_urls),
        response_nonce=draw(st.one_of(words, st.integers(0, 20).map(str))),
        resource_names_subscribe=draw(st.lists(words, max_size=3)),
        resource_names_unsubscribe=draw(st.lists(words, max_size=2)),
        initial_resource_versions=draw(st.dictionaries(words, words, max_size=3)),
    )
    if draw(st.booleans()):
        request.error_detail.CopyFrom(status_pb2.Status(code=3, message=draw(words)))
    return request


@settings(max_examples=150, deadline=None)
@given(
    steps=st.lists(
        st.one_of(requests(), st.sampled_from(range(len(SNAPSHOTS)))), min_size=1, max_size=25
    )
)
def test_delta_stream_on_random_requests(
    steps: list[discovery_pb2.DeltaDiscoveryRequest | int],
) -> None:
    current = [SNAPSHOTS[0]]
    cache = MemorySnapshotCache()
    cache.set_snapshot(DEFAULT_GROUP, current[0])
    stream = DeltaStream(stream_id=1, snapshot_of=cache.snapshot, changed_names=cache.changed_names)
    nonces: list[int] = []
    for step in steps:
        if isinstance(step, int):
            current[0] = SNAPSHOTS[step]
            cache.set_snapshot(DEFAULT_GROUP, current[0])
            raw = stream.on_snapshot(now=1.0)
        else:
            raw = stream.on_request(step, group=DEFAULT_GROUP, now=1.0)
        routes = stream.types.get(urls.ROUTE)
        routed = {c for p in routes.acked.values() for c in p.references} if routes else set()
        for data in raw:
            response = discovery_pb2.DeltaDiscoveryResponse.FromString(data)
            assert response.type_url in urls.ORDER
            names = {r.name for r in response.resources}
            assert not names & set(response.removed_resources)
            if response.type_url == urls.CLUSTER:
                assert not routed & set(response.removed_resources)
            nonces.append(int(response.nonce))
        json.dumps(stream.describe())
    assert nonces == sorted(set(nonces))
