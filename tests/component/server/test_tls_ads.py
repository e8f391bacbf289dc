"""ADS over TLS and mutual TLS with real gRPC clients: a client with a certificate from the
configured CA is served; one without a certificate, with one from another CA, or speaking
plaintext is refused; with ``verify_node_id`` a node id its certificate does not name ends the
stream with PERMISSION_DENIED."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest
from envoy.config.core.v3 import base_pb2
from envoy.service.discovery.v3 import ads_pb2_grpc, discovery_pb2
from pydantic import ValidationError

from e2e.tls_ca import Issued, TestCa
from xds_control.cache import DEFAULT_GROUP, MemorySnapshotCache
from xds_control.config import parse_config
from xds_control.config.serving import TlsConfig
from xds_control.control import ReconcileInputs, reconcile_once
from xds_control.discovery import to_endpoints
from xds_control.server import StreamRegistry, XdsServer
from xds_control.server.peer import names_node
from xds_control.xds import type_urls as urls

CONFIG = parse_config(
    text="""
pools: [{name: a, endpoints: [{address: 127.0.0.1:8001}]}]
listeners: [{name: gw, address: 127.0.0.1:10000, routes: [{name: a, pool: a}]}]
"""
)


def tls_server(ca: TestCa, *, verify_node_id: bool = False, mutual: bool = True) -> XdsServer:
    cache = MemorySnapshotCache()
    endpoints = {"a": to_endpoints(CONFIG.pools[0].endpoints)}
    cache.set_snapshot(
        DEFAULT_GROUP, reconcile_once(ReconcileInputs(config=CONFIG, endpoints=endpoints))
    )
    server = ca.server()
    tls = TlsConfig(
        cert_file=server.cert_file,
        key_file=server.key_file,
        client_ca_file=ca.ca_file if mutual else None,
        verify_node_id=verify_node_id,
    )
    return XdsServer(cache=cache, registry=StreamRegistry(), address="127.0.0.1:0", tls=tls)


def credentials(ca: TestCa, client: Issued | None) -> grpc.ChannelCredentials:
    return grpc.ssl_channel_credentials(
        root_certificates=ca.ca_file.read_bytes(),
        private_key=client.key_file.read_bytes() if client else None,
        certificate_chain=client.cert_file.read_bytes() if client else None,
    )


async def first_cds(channel: grpc.aio.Channel, node_id: str) -> discovery_pb2.DiscoveryResponse:
    stub = ads_pb2_grpc.AggregatedDiscoveryServiceStub(channel)
    request = discovery_pb2.DiscoveryRequest(node=base_pb2.Node(id=node_id), type_url=urls.CLUSTER)
    call = stub.StreamAggregatedResources(iter([request]))
    try:
        response = await call.read()
        assert isinstance(response, discovery_pb2.DiscoveryResponse)
        return response
    finally:
        call.cancel()


@pytest.fixture
def ca(tmp_path: Path) -> TestCa:
    return TestCa(tmp_path / "pki")


async def test_a_client_certificate_from_the_ca_is_served(ca: TestCa) -> None:
    server = tls_server(ca, verify_node_id=True)
    await server.start()
    client = ca.issue("envoy-0", uris=("spiffe://test.local/ns/llm/envoy-0",))
    try:
        async with grpc.aio.secure_channel(
            f"localhost:{server.port}", credentials(ca, client)
        ) as channel:
            response = await first_cds(channel, "envoy-0")
            assert response.type_url == urls.CLUSTER
            assert len(response.resources) == 1
    finally:
        await server.stop(grace=0)


@pytest.mark.parametrize("who", ["no certificate", "another CA", "plaintext"])
async def test_a_client_without_a_good_certificate_is_refused(
    ca: TestCa, tmp_path: Path, who: str
) -> None:
    server = tls_server(ca)
    await server.start()
    target = f"localhost:{server.port}"
    if who == "plaintext":
        channel = grpc.aio.insecure_channel(target)
    elif who == "no certificate":
        channel = grpc.aio.secure_channel(target, credentials(ca, None))
    else:
        other = TestCa(tmp_path / "other", name="someone else's CA")
        client = other.issue("envoy-0", uris=("spiffe://test.local/envoy-0",))
        creds = grpc.ssl_channel_credentials(
            root_certificates=ca.ca_file.read_bytes(),
            private_key=client.key_file.read_bytes(),
            certificate_chain=client.cert_file.read_bytes(),
        )
        channel = grpc.aio.secure_channel(target, creds)
    try:
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await first_cds(channel, "envoy-0")
        assert info.value.code() == grpc.StatusCode.UNAVAILABLE
    finally:
        await channel.close(grace=None)
        await server.stop(grace=0)


@pytest.mark.parametrize(
    ("sans", "node_id"),
    [
        ({"uris": ("spiffe://test.local/ns/llm/envoy-0",)}, "envoy-1"),
        ({"dns": ("envoy-0",)}, "envoy-1"),
        ({}, "envoy-0"),  # no SAN at all: nothing names any node
    ],
)
async def test_a_node_id_the_certificate_does_not_name_is_permission_denied(
    ca: TestCa, sans: dict[str, tuple[str, ...]], node_id: str
) -> None:
    server = tls_server(ca, verify_node_id=True)
    await server.start()
    client = ca.issue("client", dns=sans.get("dns", ()), uris=sans.get("uris", ()))
    try:
        async with grpc.aio.secure_channel(
            f"localhost:{server.port}", credentials(ca, client)
        ) as channel:
            with pytest.raises(grpc.aio.AioRpcError) as info:
                await first_cds(channel, node_id)
            assert info.value.code() == grpc.StatusCode.PERMISSION_DENIED
            assert repr(node_id) in (info.value.details() or "")
    finally:
        await server.stop(grace=0)


async def test_server_only_tls_serves_a_client_without_a_certificate(ca: TestCa) -> None:
    server = tls_server(ca, mutual=False)
    await server.start()
    try:
        async with grpc.aio.secure_channel(
            f"localhost:{server.port}", credentials(ca, None)
        ) as channel:
            assert len((await first_cds(channel, "anyone")).resources) == 1
    finally:
        await server.stop(grace=0)


@pytest.mark.parametrize(
    ("names", "node_id", "named"),
    [
        ({"spiffe://x/ns/a/envoy-0"}, "envoy-0", True),
        ({"envoy-0"}, "envoy-0", True),
        ({"spiffe://x/ns/a/envoy-0"}, "0", False),  # a suffix is a whole segment
        ({"spiffe://x/envoy-0x"}, "envoy-0", False),
        ({"xenvoy-0"}, "envoy-0", False),
    ],
)
def test_the_naming_rule(names: set[str], node_id: str, named: bool) -> None:
    assert names_node(names, node_id) is named


def test_verify_node_id_needs_client_certificates(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="client_ca_file"):
        TlsConfig(cert_file=tmp_path / "c", key_file=tmp_path / "k", verify_node_id=True)
