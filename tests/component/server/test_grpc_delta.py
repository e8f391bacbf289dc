"""Delta ADS over real gRPC on loopback: the prepared delta bytes arrive as valid
DeltaDiscoveryResponses, a push carries only the changed resource, and the stream is listed."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import grpc
from envoy.config.core.v3 import base_pb2
from envoy.config.endpoint.v3 import endpoint_pb2
from envoy.service.discovery.v3 import ads_pb2_grpc, discovery_pb2

from two_pools import snapshot
from xds_control.cache import DEFAULT_GROUP, MemorySnapshotCache
from xds_control.server import StreamRegistry, XdsServer
from xds_control.xds import type_urls as urls


async def test_delta_stream_subscribes_and_receives_only_changes() -> None:
    cache = MemorySnapshotCache()
    cache.set_snapshot(DEFAULT_GROUP, snapshot(a=10, b=10))
    registry = StreamRegistry()
    server = XdsServer(cache=cache, registry=registry, address="127.0.0.1:0")
    await server.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel:
            requests: asyncio.Queue[discovery_pb2.DeltaDiscoveryRequest] = asyncio.Queue()

            async def outgoing() -> AsyncIterator[discovery_pb2.DeltaDiscoveryRequest]:
                while True:
                    yield await requests.get()

            stub = ads_pb2_grpc.AggregatedDiscoveryServiceStub(channel)
            call = stub.DeltaAggregatedResources(outgoing())
            await requests.put(
                discovery_pb2.DeltaDiscoveryRequest(
                    node=base_pb2.Node(id="client-1"),
                    type_url=urls.ENDPOINT,
                    resource_names_subscribe=["a", "b"],
                )
            )
            first = await asyncio.wait_for(call.read(), 10)
            assert [r.name for r in first.resources] == ["a", "b"]
            await requests.put(
                discovery_pb2.DeltaDiscoveryRequest(
                    type_url=urls.ENDPOINT, response_nonce=first.nonce
                )
            )
            cache.set_snapshot(DEFAULT_GROUP, snapshot(a=42, b=10))
            pushed = await asyncio.wait_for(call.read(), 10)
            assert [r.name for r in pushed.resources] == ["a"]
            cla = endpoint_pb2.ClusterLoadAssignment()
            pushed.resources[0].resource.Unpack(cla)
            assert cla.endpoints[0].lb_endpoints[0].load_balancing_weight.value == 42
            assert pushed.resources[0].version != first.resources[0].version
            [view] = registry.describe()
            assert (view["node_id"], view["ads"]) == ("client-1", "delta")
            call.cancel()
    finally:
        await server.stop(grace=0.5)
