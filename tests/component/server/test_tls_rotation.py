"""Certificates renewed on disk (as cert-manager renews them) with real gRPC clients: new
connections get the new certificate at once, a stream opened before keeps being served, and
a bad new file is refused with a clear error while the last good certificate stays."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
import structlog
from envoy.config.core.v3 import base_pb2
from envoy.service.discovery.v3 import ads_pb2_grpc, discovery_pb2

from component.server.test_tls_ads import credentials, first_cds
from e2e.tls_ca import Issued, TestCa
from xds_control.cache import DEFAULT_GROUP, MemorySnapshotCache
from xds_control.config import parse_config
from xds_control.config.serving import TlsConfig
from xds_control.control import ReconcileInputs, reconcile_once
from xds_control.discovery import to_endpoints
from xds_control.server import StreamRegistry, XdsServer
from xds_control.xds import type_urls as urls

NEW_CONNECTION = [("grpc.use_local_subchannel_pool", 1)]
"""Each channel its own connection (a handshake), not one shared with an earlier channel."""


def publish(cache: MemorySnapshotCache, *, timeout_s: float) -> None:
    config = parse_config(
        text=f"""
pools: [{{name: a, connect_timeout_s: {timeout_s}, endpoints: [{{address: 127.0.0.1:8001}}]}}]
listeners: [{{name: gw, address: 127.0.0.1:10000, routes: [{{name: a, pool: a}}]}}]
"""
    )
    endpoints = {"a": to_endpoints(config.pools[0].endpoints)}
    snapshot = reconcile_once(ReconcileInputs(config=config, endpoints=endpoints))
    cache.set_snapshot(DEFAULT_GROUP, snapshot)


def replace(path: Path, data: bytes) -> None:
    """Swap a file in as a certificate volume does: written beside, renamed over."""
    scratch = path.with_name(f".{path.name}.new")
    scratch.write_bytes(data)
    os.replace(scratch, path)


async def connects(server: XdsServer, trusting: TestCa, client: Issued) -> bool:
    """Whether a new connection that trusts only ``trusting`` gets its clusters."""
    async with grpc.aio.secure_channel(
        f"localhost:{server.port}", credentials(trusting, client), options=NEW_CONNECTION
    ) as channel:
        try:
            await first_cds(channel, "envoy-0")
        except grpc.aio.AioRpcError:
            return False
        return True


@pytest.fixture
async def served(
    tmp_path: Path,
) -> AsyncIterator[tuple[XdsServer, MemorySnapshotCache, TestCa, Issued]]:
    """A server on mutual TLS with a certificate of ``old``; its cache; the CA; its files."""
    old = TestCa(tmp_path / "old")
    files = old.server()
    cache = MemorySnapshotCache()
    publish(cache, timeout_s=1)
    tls = TlsConfig(cert_file=files.cert_file, key_file=files.key_file, client_ca_file=old.ca_file)
    server = XdsServer(cache=cache, registry=StreamRegistry(), address="127.0.0.1:0", tls=tls)
    await server.start()
    yield server, cache, old, files
    await server.stop(grace=0)


async def test_new_connections_get_the_renewed_certificate_open_streams_keep_going(
    served: tuple[XdsServer, MemorySnapshotCache, TestCa, Issued], tmp_path: Path
) -> None:
    server, cache, old, files = served
    client = old.issue("envoy-0")
    async with grpc.aio.secure_channel(
        f"localhost:{server.port}", credentials(old, client), options=NEW_CONNECTION
    ) as channel:
        call = ads_pb2_grpc.AggregatedDiscoveryServiceStub(channel).StreamAggregatedResources()
        await call.write(
            discovery_pb2.DiscoveryRequest(node=base_pb2.Node(id="envoy-0"), type_url=urls.CLUSTER)
        )
        first = await call.read()
        ack = discovery_pb2.DiscoveryRequest(
            type_url=urls.CLUSTER, version_info=first.version_info, response_nonce=first.nonce
        )
        await call.write(ack)

        new = TestCa(tmp_path / "new", name="renewing CA")
        renewed = new.server()
        replace(files.key_file, renewed.key_file.read_bytes())
        replace(files.cert_file, renewed.cert_file.read_bytes())
        assert await connects(server, new, client)
        assert not await connects(server, old, client)

        publish(cache, timeout_s=2)  # the stream opened on the old certificate gets it
        second = await call.read()
        assert second.version_info != first.version_info
        call.cancel()


@pytest.mark.parametrize("bad", ["garbage", "another key"])
async def test_a_bad_renewal_keeps_the_last_good_certificate_and_says_why(
    served: tuple[XdsServer, MemorySnapshotCache, TestCa, Issued], tmp_path: Path, bad: str
) -> None:
    server, _, old, files = served
    client = old.issue("envoy-0")
    if bad == "garbage":
        replace(files.cert_file, b"-----BEGIN CERTIFICATE-----\nnot base64\n")
    else:  # a renewal caught halfway: the new key beside the old certificate
        replace(files.key_file, TestCa(tmp_path / "other").server().key_file.read_bytes())
    with structlog.testing.capture_logs() as logs:
        assert await connects(server, old, client)
        assert await connects(server, old, client)
    [error] = [e for e in logs if e["log_level"] == "error"]  # once, not per connection
    assert error["event"] == "tls certificates on disk rejected; serving the last good ones"
    assert str(files.cert_file) in error["error"]
