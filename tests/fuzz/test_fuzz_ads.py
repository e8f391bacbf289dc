"""The ADS handler on garbage, both variants: structured-random ``DiscoveryRequest``s and
``DeltaDiscoveryRequest``s straight into the streams' state machines, and raw random bytes
through a real grpc.aio server. The stream either
answers with valid responses, ends with a gRPC status, or keeps going; the server goes on
serving a well-behaved Envoy afterwards."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator

import grpc
import pytest
from envoy.config.core.v3 import base_pb2
from envoy.service.discovery.v3 import discovery_pb2
from google.rpc import status_pb2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from xds_control.cache import DEFAULT_GROUP, MemorySnapshotCache
from xds_control.config import parse_config
from xds_control.control import ReconcileInputs, reconcile_once
from xds_control.discovery import to_endpoints
from xds_control.server import AdsStream, DeltaStream, StreamRegistry, XdsServer
from xds_control.xds import EndpointWeight, Snapshot
from xds_control.xds import type_urls as urls

pytestmark = pytest.mark.fuzz

FUZZ = settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
CONFIG = parse_config(
    text="""
pools:
  - {name: a, endpoints: [{address: 127.0.0.1:8001}]}
  - {name: b, endpoints: [{address: 127.0.0.1:8002}]}
listeners:
  - {name: gw, address: 127.0.0.1:10000, routes: [{name: a, pool: a, match: {prefix: /a}},
                                                  {name: b, pool: b}]}
"""
)
ENDPOINTS = {pool.name: to_endpoints(pool.endpoints) for pool in CONFIG.pools}


def snapshot(weight: int) -> Snapshot:
    weights = {"127.0.0.1:8001": EndpointWeight(weight)}
    return reconcile_once(ReconcileInputs(config=CONFIG, endpoints=ENDPOINTS, weights=weights))


SNAPSHOTS = [snapshot(w) for w in (10, 20, 30)]
words = st.one_of(st.sampled_from(["", "*", "a", "b", "gw", "1", "2", "x"]), st.text(max_size=8))
type_urls = st.one_of(
    st.sampled_from(urls.ORDER),
    st.sampled_from(["", "x", "type.googleapis.com/google.protobuf.Any"]),
    st.text(max_size=20),
)
nodes = st.one_of(
    st.none(),
    st.builds(base_pb2.Node, id=words, cluster=words),
)
errors = st.one_of(
    st.none(), st.builds(status_pb2.Status, code=st.integers(-(2**31), 2**31 - 1), message=words)
)


@st.composite
def requests(draw: st.DrawFn) -> discovery_pb2.DiscoveryRequest:
    request = discovery_pb2.DiscoveryRequest(
        type_url=draw(type_urls),
        version_info=draw(words),
        response_nonce=draw(st.one_of(words, st.integers(0, 20).map(str))),
        resource_names=draw(st.lists(words, max_size=4)),
    )
    node = draw(nodes)
    if node is not None:
        request.node.CopyFrom(node)
    error = draw(errors)
    if error is not None:
        request.error_detail.CopyFrom(error)
    return request


@FUZZ
@given(
    steps=st.lists(
        st.one_of(requests(), st.sampled_from(range(len(SNAPSHOTS)))), min_size=1, max_size=20
    )
)
def test_stream_state_machine_on_random_requests(
    steps: list[discovery_pb2.DiscoveryRequest | int],
) -> None:
    """Requests and snapshot changes in any order: every response is a valid
    ``DiscoveryResponse`` of a requested type with a fresh nonce, and the admin view renders."""
    current = [SNAPSHOTS[0]]
    cache = MemorySnapshotCache()
    cache.set_snapshot(DEFAULT_GROUP, current[0])
    stream = AdsStream(stream_id=1, snapshot_of=cache.snapshot, changed_names=cache.changed_names)
    nonces: list[int] = []
    for step in steps:
        if isinstance(step, int):
            current[0] = SNAPSHOTS[step]
            cache.set_snapshot(DEFAULT_GROUP, current[0])
            raw = stream.on_snapshot(now=1.0)
        else:
            raw = stream.on_request(step, group=DEFAULT_GROUP, now=1.0)
        for data in raw:
            response = discovery_pb2.DiscoveryResponse.FromString(data)
            assert response.type_url in urls.ORDER
            assert stream.types[response.type_url].requested
            assert response.version_info == current[0].resource_set(response.type_url).version
            nonces.append(int(response.nonce))
        json.dumps(stream.describe())
    assert nonces == sorted(set(nonces))


@st.composite
def delta_requests(draw: st.DrawFn) -> discovery_pb2.DeltaDiscoveryRequest:
    request = discovery_pb2.DeltaDiscoveryRequest(
        type_url=draw(type_urls),
        response_nonce=draw(st.one_of(words, st.integers(0, 20).map(str))),
        resource_names_subscribe=draw(st.lists(words, max_size=4)),
        resource_names_unsubscribe=draw(st.lists(words, max_size=3)),
        initial_resource_versions=draw(st.dictionaries(words, words, max_size=3)),
    )
    node = draw(nodes)
    if node is not None:
        request.node.CopyFrom(node)
    error = draw(errors)
    if error is not None:
        request.error_detail.CopyFrom(error)
    return request


@FUZZ
@given(
    steps=st.lists(
        st.one_of(delta_requests(), st.sampled_from(range(len(SNAPSHOTS)))),
        min_size=1,
        max_size=20,
    )
)
def test_delta_stream_state_machine_on_random_requests(
    steps: list[discovery_pb2.DeltaDiscoveryRequest | int],
) -> None:
    """The same for incremental ADS: every response is a ``DeltaDiscoveryResponse`` of a type
    the stream has seen, with a fresh nonce; the admin view renders."""
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
        for data in raw:
            response = discovery_pb2.DeltaDiscoveryResponse.FromString(data)
            assert response.type_url in stream.types
            nonces.append(int(response.nonce))
        json.dumps(stream.describe())
    assert nonces == sorted(set(nonces))


def well_behaved() -> discovery_pb2.DiscoveryRequest:
    return discovery_pb2.DiscoveryRequest(node=base_pb2.Node(id="envoy-ok"), type_url=urls.CLUSTER)


@pytest.fixture(scope="module")
def ads(fuzz_loop: asyncio.AbstractEventLoop) -> Iterator[grpc.aio.Channel]:
    async def start() -> tuple[XdsServer, grpc.aio.Channel]:
        cache = MemorySnapshotCache()
        cache.set_snapshot(DEFAULT_GROUP, SNAPSHOTS[0])
        server = XdsServer(cache=cache, registry=StreamRegistry(), address="127.0.0.1:0")
        await server.start()
        return server, grpc.aio.insecure_channel(f"127.0.0.1:{server.port}")

    server, channel = fuzz_loop.run_until_complete(start())
    yield channel
    fuzz_loop.run_until_complete(channel.close(None))
    fuzz_loop.run_until_complete(server.stop(grace=0.5))


# What a stream fed garbage may end with: fine, or refused as invalid (bytes that are not a
# request at all included); never INTERNAL, which would say the server failed.
ENDINGS = {grpc.StatusCode.OK, grpc.StatusCode.INVALID_ARGUMENT}


async def exchange(
    channel: grpc.aio.Channel, messages: list[bytes], *, method: str = urls.ADS_METHOD
) -> tuple[list[bytes], grpc.StatusCode]:
    """Send ``messages`` (raw bytes) on one ADS stream, half-close, read to the end."""
    call = channel.stream_stream(method, request_serializer=None, response_deserializer=None)(
        iter(messages)
    )
    answers: list[bytes] = []
    try:
        async with asyncio.timeout(10):
            async for answer in call:
                answers.append(answer)
    except grpc.aio.AioRpcError as exc:
        return answers, exc.code()
    return answers, await call.code()


@FUZZ
@given(
    delta=st.booleans(),
    messages=st.lists(
        st.one_of(
            st.binary(max_size=200),
            requests().map(lambda r: r.SerializeToString()),
            delta_requests().map(lambda r: r.SerializeToString()),
            st.builds(lambda: well_behaved().SerializeToString()),
        ),
        min_size=1,
        max_size=4,
    ),
)
def test_grpc_server_survives_raw_bytes(
    fuzz_loop: asyncio.AbstractEventLoop,
    ads: grpc.aio.Channel,
    delta: bool,
    messages: list[bytes],
) -> None:
    method = urls.DELTA_ADS_METHOD if delta else urls.ADS_METHOD
    answers, code = fuzz_loop.run_until_complete(exchange(ads, messages, method=method))
    assert code in ENDINGS, code
    parse = discovery_pb2.DeltaDiscoveryResponse if delta else discovery_pb2.DiscoveryResponse
    for answer in answers:
        assert parse.FromString(answer).type_url
    # A well-behaved Envoy on a new stream still gets its clusters.
    answers, code = fuzz_loop.run_until_complete(
        exchange(ads, [well_behaved().SerializeToString()])
    )
    assert code == grpc.StatusCode.OK
    [cds] = [discovery_pb2.DiscoveryResponse.FromString(a) for a in answers]
    assert cds.type_url == urls.CLUSTER
    assert len(cds.resources) == 2
