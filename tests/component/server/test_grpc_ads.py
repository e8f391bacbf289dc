"""ADS over real gRPC on loopback: prepared bytes arrive as valid responses; health works; a
stream whose requests cannot be read ends with a status; a taken port is a ServeError."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator

import grpc
import pytest
import structlog
from envoy.config.core.v3 import base_pb2
from envoy.service.discovery.v3 import ads_pb2_grpc, discovery_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc

from xds_control.cache import DEFAULT_GROUP, MemorySnapshotCache
from xds_control.config import parse_config
from xds_control.control import ReconcileInputs, reconcile_once
from xds_control.discovery import to_endpoints
from xds_control.errors import ServeError
from xds_control.server import StreamRegistry, XdsServer
from xds_control.xds import EndpointWeight
from xds_control.xds import type_urls as urls

CONFIG = parse_config(
    text="""
pools: [{name: a, endpoints: [{address: 127.0.0.1:8001}, {address: 127.0.0.1:8002}]}]
listeners: [{name: gw, address: 127.0.0.1:10000, routes: [{name: a, pool: a}]}]
"""
)
ENDPOINTS = {"a": to_endpoints(CONFIG.pools[0].endpoints)}


async def test_stream_receives_pushes_and_health_serves() -> None:
    cache = MemorySnapshotCache()
    registry = StreamRegistry()
    server = XdsServer(cache=cache, registry=registry, address="127.0.0.1:0")
    await server.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel:
            health = health_pb2_grpc.HealthStub(channel)
            check = await health.Check(health_pb2.HealthCheckRequest(service=urls.ADS_SERVICE))
            assert check.status == health_pb2.HealthCheckResponse.NOT_SERVING
            cache.set_snapshot(
                DEFAULT_GROUP, reconcile_once(ReconcileInputs(config=CONFIG, endpoints=ENDPOINTS))
            )
            await server.mark_serving()
            check = await health.Check(health_pb2.HealthCheckRequest(service=urls.ADS_SERVICE))
            assert check.status == health_pb2.HealthCheckResponse.SERVING

            requests: asyncio.Queue[discovery_pb2.DiscoveryRequest] = asyncio.Queue()

            async def outgoing() -> AsyncIterator[discovery_pb2.DiscoveryRequest]:
                while True:
                    yield await requests.get()

            call = ads_pb2_grpc.AggregatedDiscoveryServiceStub(channel).StreamAggregatedResources(
                outgoing()
            )
            node = base_pb2.Node(id="client-1")
            await requests.put(
                discovery_pb2.DiscoveryRequest(
                    node=node, type_url=urls.ENDPOINT, resource_names=["a"]
                )
            )
            first = await asyncio.wait_for(call.read(), 10)
            assert first.type_url == urls.ENDPOINT
            await requests.put(
                discovery_pb2.DiscoveryRequest(
                    type_url=urls.ENDPOINT,
                    resource_names=["a"],
                    version_info=first.version_info,
                    response_nonce=first.nonce,
                )
            )
            weights = {"127.0.0.1:8001": EndpointWeight(42)}
            cache.set_snapshot(
                DEFAULT_GROUP,
                reconcile_once(
                    ReconcileInputs(config=CONFIG, endpoints=ENDPOINTS, weights=weights)
                ),
            )
            pushed = await asyncio.wait_for(call.read(), 10)
            assert pushed.version_info != first.version_info
            assert int(pushed.nonce) > int(first.nonce)
            assert b"\x08\x2a" in pushed.resources[0].value  # UInt32Value{value: 42}
            assert [s["node_id"] for s in registry.describe()] == ["client-1"]
            call.cancel()
    finally:
        await server.stop(grace=0.5)


async def test_first_request_without_node_is_refused() -> None:
    cache = MemorySnapshotCache()
    server = XdsServer(cache=cache, registry=StreamRegistry(), address="127.0.0.1:0")
    await server.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel:

            async def outgoing() -> AsyncIterator[discovery_pb2.DiscoveryRequest]:
                yield discovery_pb2.DiscoveryRequest(type_url=urls.CLUSTER)
                await asyncio.sleep(5)

            call = ads_pb2_grpc.AggregatedDiscoveryServiceStub(channel).StreamAggregatedResources(
                outgoing()
            )
            with pytest.raises(grpc.aio.AioRpcError) as info:
                await asyncio.wait_for(call.read(), 10)
            assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    finally:
        await server.stop(grace=0.5)


async def test_bytes_that_are_no_request_end_the_stream_with_invalid_argument() -> None:
    registry = StreamRegistry()
    server = XdsServer(cache=MemorySnapshotCache(), registry=registry, address="127.0.0.1:0")
    await server.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel:
            call = channel.stream_stream(
                urls.ADS_METHOD,
                request_serializer=None,  # raw bytes: not a DiscoveryRequest
                response_deserializer=discovery_pb2.DiscoveryResponse.FromString,
            )(None)  # no request iterator: the test writes the stream itself
            with structlog.testing.capture_logs() as logs:
                await call.write(b"\xff\xff\xff")
                with pytest.raises(grpc.aio.AioRpcError) as info:
                    await asyncio.wait_for(call.read(), 10)
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "not a DiscoveryRequest" in (info.value.details() or "")
        # A refusal, not a crash: one warning naming the peer, no traceback.
        loud = [e for e in logs if e["log_level"] in ("warning", "error")]
        assert [e["event"] for e in loud] == ["stream refused"]
        assert loud[0]["peer"].startswith("ipv4:127.0.0.1:")
        assert "exc_info" not in loud[0]
        assert registry.describe() == []
    finally:
        await server.stop(grace=0.5)


async def test_a_taken_port_is_a_serve_error() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        address = f"127.0.0.1:{taken.getsockname()[1]}"
        with pytest.raises(ServeError, match=f"cannot listen on {address}"):
            XdsServer(cache=MemorySnapshotCache(), registry=StreamRegistry(), address=address)
