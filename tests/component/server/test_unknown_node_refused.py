"""Node groups over real gRPC: a node that matches no group is refused with PERMISSION_DENIED
naming it, or given the configured default group; a known node gets its own group's listeners."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import grpc
import pytest
import structlog
from envoy.config.core.v3 import base_pb2
from envoy.config.listener.v3 import listener_pb2
from envoy.service.discovery.v3 import ads_pb2_grpc, discovery_pb2

from xds_control.cache import MemorySnapshotCache, NodeRouting
from xds_control.config import Config, parse_config
from xds_control.control import ReconcileInputs, reconcile_groups
from xds_control.discovery import to_endpoints
from xds_control.server import StreamRegistry, XdsServer
from xds_control.xds import type_urls as urls

CONFIG = """
pools:
  - {name: chat, endpoints: [{address: 127.0.0.1:8001}]}
  - {name: code, endpoints: [{address: 127.0.0.1:8002}]}
listeners:
  - {name: edge, address: 127.0.0.1:10000, routes: [{name: chat, pool: chat}]}
  - {name: team, address: 127.0.0.1:10001, routes: [{name: code, pool: code}]}
node_groups:
  - {name: edge, match: {cluster: gateway}, listeners: [edge]}
  - {name: team, match: {cluster: team}, listeners: [team]}
"""


async def serve(config: Config) -> XdsServer:
    cache = MemorySnapshotCache(routing=NodeRouting.of(config))
    endpoints = {pool.name: to_endpoints(pool.endpoints) for pool in config.pools}
    for group, snapshot in reconcile_groups(
        ReconcileInputs(config=config, endpoints=endpoints)
    ).items():
        cache.set_snapshot(group, snapshot)
    server = XdsServer(cache=cache, registry=StreamRegistry(), address="127.0.0.1:0")
    await server.start()
    return server


async def first_response(port: int, node: base_pb2.Node) -> discovery_pb2.DiscoveryResponse:
    async def outgoing() -> AsyncIterator[discovery_pb2.DiscoveryRequest]:
        yield discovery_pb2.DiscoveryRequest(node=node, type_url=urls.LISTENER)
        await asyncio.sleep(10)

    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = ads_pb2_grpc.AggregatedDiscoveryServiceStub(channel)
        call = stub.StreamAggregatedResources(outgoing())
        try:
            response = await asyncio.wait_for(call.read(), 10)
        finally:
            call.cancel()
    assert isinstance(response, discovery_pb2.DiscoveryResponse)
    return response


def listener_names(response: discovery_pb2.DiscoveryResponse) -> list[str]:
    out = []
    for resource in response.resources:
        listener = listener_pb2.Listener()
        resource.Unpack(listener)
        out.append(listener.name)
    return out


async def test_unknown_node_is_refused_with_its_id_and_cluster() -> None:
    server = await serve(parse_config(text=CONFIG))
    try:
        with (
            structlog.testing.capture_logs() as logs,
            pytest.raises(grpc.aio.AioRpcError) as info,
        ):
            await first_response(server.port, base_pb2.Node(id="stray-7", cluster="lab"))
        assert info.value.code() == grpc.StatusCode.PERMISSION_DENIED
        assert "'stray-7'" in (info.value.details() or "")
        assert "'lab'" in (info.value.details() or "")
        refusals = [e for e in logs if e["event"] == "node matches no node group; refused"]
        assert [(e["node_id"], e["node_cluster"]) for e in refusals] == [("stray-7", "lab")]
    finally:
        await server.stop(grace=0.5)


async def test_known_nodes_get_their_groups_listeners() -> None:
    server = await serve(parse_config(text=CONFIG))
    try:
        edge = await first_response(server.port, base_pb2.Node(id="gw-1", cluster="gateway"))
        team = await first_response(server.port, base_pb2.Node(id="t-1", cluster="team"))
        assert listener_names(edge) == ["edge"]
        assert listener_names(team) == ["team"]
    finally:
        await server.stop(grace=0.5)


async def test_unknown_node_gets_the_default_group_when_configured() -> None:
    server = await serve(parse_config(text=CONFIG + "unknown_nodes: {group: team}\n"))
    try:
        with structlog.testing.capture_logs() as logs:
            response = await first_response(server.port, base_pb2.Node(id="stray-7", cluster="x"))
        assert listener_names(response) == ["team"]
        assert any(
            e["event"] == "node matches no node group; given the default group"
            and e["group"] == "team"
            for e in logs
        )
    finally:
        await server.stop(grace=0.5)
