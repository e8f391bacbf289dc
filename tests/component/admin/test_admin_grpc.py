"""The gRPC admin API against a real control plane on loopback: a real ADS client connects,
ListStreams shows it SYNCED, then NACKED with its words; snapshot, weights, events; the
generated code matches protos/; off loopback a token is required."""

from __future__ import annotations

import asyncio
import filecmp
import importlib.util
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import grpc
import pytest
from envoy.config.core.v3 import base_pb2
from envoy.service.discovery.v3 import ads_pb2_grpc, discovery_pb2
from google.rpc import status_pb2

from xds_control.admin import AdminServer, AdminViews
from xds_control.admin.v1 import admin_pb2 as pb
from xds_control.admin.v1 import admin_pb2_grpc
from xds_control.cache import MemorySnapshotCache
from xds_control.config import load_config
from xds_control.control import ControlLoop
from xds_control.errors import ServeError
from xds_control.server import StreamRegistry, XdsServer
from xds_control.xds import type_urls as urls
from xds_lab.harness.ports import free_port

ROOT = Path(__file__).resolve().parents[3]
CONFIG = """\
pools:
  - name: chat
    endpoints: [{address: 127.0.0.1:8001, weight: 10}, {address: 127.0.0.1:8002, weight: 30}]
listeners:
  - name: gateway
    address: 127.0.0.1:10000
    routes: [{name: chat, pool: chat}]
"""


def test_generated_code_matches_the_protos(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("generate", ROOT / "protos" / "generate.py")
    assert spec is not None
    assert spec.loader is not None
    generate = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generate)
    generate.generate(tmp_path)
    fresh = tmp_path / "xds_control" / "admin" / "v1"
    names = sorted(p.name for p in fresh.iterdir())
    assert names, "protoc wrote nothing"
    _, mismatch, missing = filecmp.cmpfiles(
        fresh, ROOT / "xds_control" / "admin" / "v1", names, shallow=False
    )
    assert mismatch + missing == [], "stale generated code: make protos"


class Plane:
    def __init__(self, admin: AdminServer, xds_port: int, registry: StreamRegistry) -> None:
        self.admin = admin
        self.xds_port = xds_port
        self.registry = registry


@pytest.fixture
async def plane(tmp_path: Path) -> AsyncIterator[Plane]:
    path = tmp_path / "config.yaml"
    path.write_text(CONFIG, encoding="utf-8")
    cache = MemorySnapshotCache()
    registry = StreamRegistry()
    loop = ControlLoop(config=load_config(path), config_path=path, cache=cache)
    await loop.step()
    xds = XdsServer(cache=cache, registry=registry, address="127.0.0.1:0")
    await xds.start()
    admin = AdminServer(
        address=f"127.0.0.1:{free_port()}",
        views=AdminViews(state=loop.state, cache=cache, registry=registry),
        grpc_address=f"127.0.0.1:{free_port()}",
    )
    await admin.start()
    try:
        yield Plane(admin, xds.port, registry)
    finally:
        await admin.stop()
        await xds.stop(0)


async def streams(stub: admin_pb2_grpc.AdminAsyncStub) -> list[pb.Stream]:
    return list((await stub.ListStreams(pb.ListStreamsRequest())).streams)


async def until_cds(stub: admin_pb2_grpc.AdminAsyncStub, sync: str) -> pb.TypeStatus:
    for _ in range(500):
        found = await streams(stub)
        cds = [t for s in found for t in s.types if t.type == "CDS"]
        if cds and cds[0].sync == sync:
            return cds[0]
        await asyncio.sleep(0.02)
    raise AssertionError(f"CDS never became {sync}: {found}")


async def cds_of(stub: admin_pb2_grpc.AdminAsyncStub, node_id: str, sync: str) -> pb.TypeStatus:
    found: list[pb.Stream] = []
    for _ in range(500):
        found = list((await stub.ListStreams(pb.ListStreamsRequest())).streams)
        cds = [t for s in found if s.node_id == node_id for t in s.types if t.type == "CDS"]
        if cds and cds[0].sync == sync:
            return cds[0]
        await asyncio.sleep(0.02)
    raise AssertionError(f"{node_id}: CDS never became {sync}: {found}")


async def answer_first_cds(xds: grpc.aio.Channel, node_id: str, *, nack: str | None) -> str:
    """Subscribe to CDS as ``node_id``, then ACK or NACK (with ``nack``) the first response."""
    node = base_pb2.Node(id=node_id, cluster="gateway")
    requests: asyncio.Queue[discovery_pb2.DiscoveryRequest] = asyncio.Queue()

    async def outgoing() -> AsyncIterator[discovery_pb2.DiscoveryRequest]:
        while True:
            yield await requests.get()

    call = ads_pb2_grpc.AggregatedDiscoveryServiceStub(xds).StreamAggregatedResources(outgoing())
    await requests.put(discovery_pb2.DiscoveryRequest(node=node, type_url=urls.CLUSTER))
    first = await call.read()
    error = status_pb2.Status(code=3, message=nack) if nack else None
    await requests.put(
        discovery_pb2.DiscoveryRequest(
            type_url=urls.CLUSTER,
            version_info="" if nack else first.version_info,
            response_nonce=first.nonce,
            error_detail=error,
        )
    )
    return str(first.version_info)


async def test_streams_show_synced_and_nacked_with_envoys_words(plane: Plane) -> None:
    async with (
        grpc.aio.insecure_channel(f"127.0.0.1:{plane.xds_port}") as xds,
        grpc.aio.insecure_channel(f"127.0.0.1:{plane.admin.grpc_port}") as channel,
    ):
        stub = admin_pb2_grpc.AdminStub(channel)
        version = await answer_first_cds(xds, "good", nack=None)
        synced = await cds_of(stub, "good", "SYNCED")
        assert synced.acked_version == synced.served_version == version
        await answer_first_cds(xds, "bad", nack="cluster chat: bad thing")
        nacked = await cds_of(stub, "bad", "NACKED")
        assert (nacked.last_error, nacked.nacked_version, nacked.nacks) == (
            "cluster chat: bad thing",
            version,
            1,
        )
        [stream] = [
            s
            for s in (await stub.ListStreams(pb.ListStreamsRequest())).streams
            if s.node_id == "good"
        ]
        assert (stream.node_cluster, stream.ads, stream.group) == ("gateway", "sotw", "default")
        assert stream.peer
        assert stream.connected_at > 0
        events = (await stub.ListEvents(pb.ListEventsRequest())).events
    seen = {(e.kind, e.node_id) for e in events}
    assert {("connect", "good"), ("push", "good"), ("ack", "good"), ("nack", "bad")} <= seen
    [nack] = [e for e in events if e.kind == "nack"]
    assert nack.message == "cluster chat: bad thing"


async def test_snapshot_and_weights(plane: Plane) -> None:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{plane.admin.grpc_port}") as channel:
        stub = admin_pb2_grpc.AdminStub(channel)
        snapshot = await stub.GetSnapshot(pb.GetSnapshotRequest(resources=True))
        eds = {t.type: t for t in snapshot.types}["EDS"]
        assert list(eds.names) == ["chat"]
        assert len(eds.resources) == 1
        weights = await stub.ListWeights(pb.ListWeightsRequest(pool="chat"))
        assert not weights.engine
        assert [(e.address, e.weight) for e in weights.pools[0].endpoints] == [
            ("127.0.0.1:8001", 10),
            ("127.0.0.1:8002", 30),
        ]
        with pytest.raises(grpc.aio.AioRpcError) as unknown:
            await stub.ListWeights(pb.ListWeightsRequest(pool="nope"))
        assert unknown.value.code() is grpc.StatusCode.NOT_FOUND
        watch = stub.WatchWeights(pb.ListWeightsRequest())
        first = await watch.read()
        assert isinstance(first, pb.ListWeightsResponse), first  # not the stream's end
        assert [p.pool for p in first.pools] == ["chat"]
        watch.cancel()


async def test_off_loopback_needs_a_token(plane: Plane, tmp_path: Path) -> None:
    with pytest.raises(ServeError, match="admin_token_file"):
        AdminServer(
            address=f"0.0.0.0:{free_port()}",
            views=AdminViews(
                state=plane.admin._state, cache=plane.admin._cache, registry=plane.registry
            ),
        )


async def test_a_token_is_required_when_set(plane: Plane) -> None:
    admin = AdminServer(
        address=f"127.0.0.1:{free_port()}",
        views=AdminViews(
            state=plane.admin._state, cache=plane.admin._cache, registry=plane.registry
        ),
        grpc_address=f"127.0.0.1:{free_port()}",
        token="s3cret",
    )
    await admin.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{admin.grpc_port}") as channel:
            stub = admin_pb2_grpc.AdminStub(channel)
            with pytest.raises(grpc.aio.AioRpcError) as denied:
                await stub.ListStreams(pb.ListStreamsRequest())
            assert denied.value.code() is grpc.StatusCode.UNAUTHENTICATED
            with pytest.raises(grpc.aio.AioRpcError) as wrong:
                await stub.ListStreams(
                    pb.ListStreamsRequest(), metadata=(("authorization", "Bearer nope"),)
                )
            assert wrong.value.code() is grpc.StatusCode.UNAUTHENTICATED
            ok = await stub.ListStreams(
                pb.ListStreamsRequest(), metadata=(("authorization", "Bearer s3cret"),)
            )
            assert isinstance(ok, pb.ListStreamsResponse)
        async with aiohttp.ClientSession() as http:
            base = f"http://127.0.0.1:{admin.port}"
            async with http.get(f"{base}/v1/streams") as response:
                assert response.status == 401
            headers = {"Authorization": "Bearer s3cret"}
            async with http.get(f"{base}/v1/streams", headers=headers) as response:
                assert response.status == 200
            async with http.get(f"{base}/healthz") as response:
                assert response.status == 200
    finally:
        await admin.stop()
