"""A bug in pushing a snapshot change ends the stream with a status (the Envoy reconnects), and
is logged, instead of leaving a stream that silently never pushes again."""

from __future__ import annotations

import asyncio

import grpc
import pytest
import structlog
from envoy.config.core.v3 import base_pb2
from envoy.service.discovery.v3 import ads_pb2_grpc, discovery_pb2

from xds_control.cache import DEFAULT_GROUP, MemorySnapshotCache
from xds_control.config import parse_config
from xds_control.control import ReconcileInputs, reconcile_once
from xds_control.discovery import to_endpoints
from xds_control.server import AdsStream, StreamRegistry, XdsServer
from xds_control.xds import EndpointWeight
from xds_control.xds import type_urls as urls

CONFIG = parse_config(
    text="""
pools: [{name: a, endpoints: [{address: 127.0.0.1:8001}]}]
listeners: [{name: gw, address: 127.0.0.1:10000, routes: [{name: a, pool: a}]}]
"""
)
ENDPOINTS = {"a": to_endpoints(CONFIG.pools[0].endpoints)}


async def test_a_crashing_push_ends_the_stream(monkeypatch: pytest.MonkeyPatch) -> None:
    cache = MemorySnapshotCache()
    cache.set_snapshot(
        DEFAULT_GROUP, reconcile_once(ReconcileInputs(config=CONFIG, endpoints=ENDPOINTS))
    )
    server = XdsServer(cache=cache, registry=StreamRegistry(), address="127.0.0.1:0")
    await server.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel:
            call = ads_pb2_grpc.AggregatedDiscoveryServiceStub(channel).StreamAggregatedResources()
            await call.write(
                discovery_pb2.DiscoveryRequest(
                    node=base_pb2.Node(id="envoy-1"), type_url=urls.ENDPOINT, resource_names=["a"]
                )
            )
            await asyncio.wait_for(call.read(), 10)

            def broken(self: AdsStream, *, now: float) -> list[bytes]:
                raise RuntimeError("a bug")

            monkeypatch.setattr(AdsStream, "on_snapshot", broken)
            with structlog.testing.capture_logs() as logs:
                weights = {"127.0.0.1:8001": EndpointWeight(42)}
                cache.set_snapshot(
                    DEFAULT_GROUP,
                    reconcile_once(
                        ReconcileInputs(config=CONFIG, endpoints=ENDPOINTS, weights=weights)
                    ),
                )
                with pytest.raises(grpc.aio.AioRpcError) as ended:
                    await asyncio.wait_for(call.read(), 10)
            assert ended.value.code() is grpc.StatusCode.INTERNAL
            assert "pushing a snapshot change failed: RuntimeError" in str(ended.value.details())
            assert any(e["event"] == "pushing a snapshot change failed" for e in logs)
    finally:
        await server.stop(grace=0.5)
