"""ADS on a Unix socket: the socket file keeps other users out, a client on the socket gets
responses, and addresses that are not IP:PORT or unix:///absolute/path are refused."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import grpc
import pytest
from envoy.config.core.v3 import base_pb2
from envoy.service.discovery.v3 import ads_pb2_grpc, discovery_pb2
from pydantic import ValidationError

from xds_control.cache import DEFAULT_GROUP, MemorySnapshotCache
from xds_control.config import parse_config
from xds_control.config.serving import GrpcConfig
from xds_control.control import ReconcileInputs, reconcile_once
from xds_control.discovery import to_endpoints
from xds_control.server import StreamRegistry, XdsServer
from xds_control.xds import type_urls as urls

TEXT = """
pools: [{name: a, endpoints: [{address: 127.0.0.1:8001}]}]
listeners: [{name: gw, address: 127.0.0.1:10000, routes: [{name: a, pool: a}]}]
"""
CONFIG = parse_config(text=TEXT)


@pytest.mark.parametrize("mode", [0o600, 0o660])
async def test_socket_file_has_the_mode_and_serves_ads(tmp_path: Path, mode: int) -> None:
    path = tmp_path / "ads.sock"
    cache = MemorySnapshotCache()
    endpoints = {"a": to_endpoints(CONFIG.pools[0].endpoints)}
    cache.set_snapshot(
        DEFAULT_GROUP, reconcile_once(ReconcileInputs(config=CONFIG, endpoints=endpoints))
    )
    server = XdsServer(
        cache=cache,
        registry=StreamRegistry(),
        address=f"unix://{path}",
        settings=GrpcConfig(socket_mode=mode),
    )
    await server.start()
    try:
        info = path.stat()
        assert stat.S_ISSOCK(info.st_mode)
        assert stat.S_IMODE(info.st_mode) == mode
        assert not info.st_mode & stat.S_IWOTH  # no other user can connect
        async with grpc.aio.insecure_channel(f"unix:{path}") as channel:
            stub = ads_pb2_grpc.AggregatedDiscoveryServiceStub(channel)
            request = discovery_pb2.DiscoveryRequest(
                node=base_pb2.Node(id="sidecar"), type_url=urls.CLUSTER
            )
            call = stub.StreamAggregatedResources(iter([request]))
            response = await call.read()
            assert isinstance(response, discovery_pb2.DiscoveryResponse)
            assert response.type_url == urls.CLUSTER
            assert len(response.resources) == 1
            call.cancel()
    finally:
        await server.stop(grace=0)
    assert not path.exists()  # removed on stop: a restart binds again


def test_a_world_writable_socket_mode_is_refused() -> None:
    with pytest.raises(ValidationError, match="world-writable"):
        GrpcConfig(socket_mode=0o666)


@pytest.mark.parametrize(
    ("address", "ok"),
    [
        ("unix:///run/xds/ads.sock", True),
        ("127.0.0.1:18000", True),
        ("unix:ads.sock", False),
        ("unix://relative/ads.sock", False),
        ("localhost:18000", False),
    ],
)
def test_xds_address_in_config(address: str, ok: bool) -> None:
    text = f"xds_address: {address!r}\n{TEXT}"
    if ok:
        assert parse_config(text=text).xds_address == address
    else:
        with pytest.raises(Exception, match="xds_address"):
            parse_config(text=text)


def test_serve_names_a_bad_socket_flag(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(TEXT)
    argv = ["serve", "--config", str(config), "--xds-address", "unix:ads.sock"]
    result = subprocess.run(
        [sys.executable, "-m", "xds_control", *argv],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2
    assert "--xds-address: 'unix:ads.sock' is not unix:///absolute/path" in result.stderr


async def test_umask_of_the_process_is_left_as_it_was(tmp_path: Path) -> None:
    before = os.umask(0o022)
    os.umask(before)
    server = XdsServer(
        cache=MemorySnapshotCache(),
        registry=StreamRegistry(),
        address=f"unix://{tmp_path / 'x.sock'}",
    )
    after = os.umask(before)
    assert after == before
    (tmp_path / "file").write_text("")
    assert stat.S_IMODE((tmp_path / "file").stat().st_mode) == 0o666 & ~before
    await server.stop(grace=0)
