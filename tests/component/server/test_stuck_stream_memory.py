"""A client that never reads responses but keeps sending requests holds bounded memory on the
server: once a write is stuck in flow control, the server stops reading (each request is
answered before the next is read) and the client's sends block."""

from __future__ import annotations

import asyncio
import time

import grpc
import yaml
from envoy.config.core.v3 import base_pb2
from envoy.service.discovery.v3 import ads_pb2_grpc, discovery_pb2

from xds_control.cache import DEFAULT_GROUP, MemorySnapshotCache
from xds_control.config import parse_config
from xds_control.control import ReconcileInputs, reconcile_once
from xds_control.discovery import to_endpoints
from xds_control.server import StreamRegistry, XdsServer
from xds_control.xds import type_urls as urls

ENDPOINTS = 3000  # one EDS response of ~90 kB: more than the client's stream window
SEND_FOR_S = 3.0
REQUEST_NAMES = [f"pool-{i:04d}-{'x' * 40}" for i in range(200)]  # ~10 kB per request


def config_text() -> str:
    addresses = [f"127.0.{1 + i // 250}.{1 + i % 250}:8000" for i in range(ENDPOINTS)]
    data = {
        "pools": [{"name": "a", "endpoints": [{"address": a} for a in addresses]}],
        "listeners": [
            {"name": "gw", "address": "127.0.0.1:10000", "routes": [{"name": "a", "pool": "a"}]}
        ],
    }
    return yaml.safe_dump(data)


async def test_a_flooding_client_that_never_reads_is_held_back() -> None:
    config = parse_config(text=config_text())
    cache = MemorySnapshotCache()
    endpoints = {"a": to_endpoints(config.pools[0].endpoints)}
    cache.set_snapshot(
        DEFAULT_GROUP, reconcile_once(ReconcileInputs(config=config, endpoints=endpoints))
    )
    server = XdsServer(cache=cache, registry=StreamRegistry(), address="127.0.0.1:0")
    await server.start()
    options = [("grpc.http2.bdp_probe", 0), ("grpc.http2.lookahead_bytes", 1024)]
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}", options=options) as ch:
            call = ads_pb2_grpc.AggregatedDiscoveryServiceStub(ch).StreamAggregatedResources()
            node = base_pb2.Node(id="flood")
            await call.write(
                discovery_pb2.DiscoveryRequest(
                    node=node, type_url=urls.ENDPOINT, resource_names=["a"]
                )
            )
            flood = discovery_pb2.DiscoveryRequest(
                type_url=urls.ENDPOINT, resource_names=REQUEST_NAMES
            )
            sent = 0

            async def send_forever() -> None:
                nonlocal sent
                while True:
                    await call.write(flood)
                    sent += 1

            started = time.monotonic()
            sender = asyncio.create_task(send_forever())
            await asyncio.sleep(SEND_FOR_S)
            stalled_at = sent
            await asyncio.sleep(1.0)
            elapsed = time.monotonic() - started
            sender.cancel()
            call.cancel()
        # Unbounded, the server would read every request it is sent: tens of thousands in
        # these seconds. Bounded, the sends stop once the HTTP/2 windows fill.
        assert sent == stalled_at, f"still sending after {elapsed:.1f} s: {stalled_at} -> {sent}"
        assert sent < 1000, sent
    finally:
        await server.stop(grace=0.5)
