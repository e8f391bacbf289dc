"""`xdsctl proxy-status` and `xdsctl endpoints` against a real control plane on loopback (ADS
server, admin API, one Envoy-like ADS client), run as the installed command."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest
import yaml
from envoy.config.core.v3 import base_pb2
from envoy.service.discovery.v3 import ads_pb2_grpc, discovery_pb2
from google.rpc import status_pb2

from component.cli.xdsctl_plane import Plane, until, xdsctl
from xds_control.server import StreamRegistry
from xds_control.xds import type_urls as urls
from xds_lab.harness.ports import free_port

SERVED = {
    "batch": [{"address": "127.0.0.1:8003", "weight": 10, "health": "HEALTHY"}],
    "chat": [
        {"address": "127.0.0.1:8001", "weight": 10, "health": "HEALTHY"},
        {"address": "127.0.0.1:8002", "weight": 30, "health": "HEALTHY"},
    ],
}


def type_states(registry: StreamRegistry) -> dict[str, dict[str, Any]]:
    streams = registry.describe()
    return {t["type"]: t for t in streams[0]["types"]} if streams else {}


async def test_endpoints_json_is_what_eds_serves(plane: Plane) -> None:
    result = await xdsctl("-o", "json", "endpoints", admin=plane.admin)
    assert result.code == 0, result.stderr
    assert json.loads(result.stdout) == SERVED


async def test_endpoints_of_one_pool_and_yaml(plane: Plane) -> None:
    result = await xdsctl("-o", "yaml", "endpoints", "chat", admin=plane.admin)
    assert result.code == 0, result.stderr
    assert yaml.safe_load(result.stdout) == {"chat": SERVED["chat"]}


async def test_endpoints_table_has_a_row_per_endpoint(plane: Plane) -> None:
    result = await xdsctl("endpoints", admin=plane.admin)
    assert result.code == 0, result.stderr
    lines = [line.split() for line in result.stdout.splitlines() if line.strip()]
    assert lines == [
        ["POOL", "ENDPOINT", "WEIGHT", "HEALTH"],
        ["batch", "127.0.0.1:8003", "10", "HEALTHY"],
        ["chat", "127.0.0.1:8001", "10", "HEALTHY"],
        ["chat", "127.0.0.1:8002", "30", "HEALTHY"],
    ]


async def test_endpoints_of_an_unknown_pool_names_the_known_ones(plane: Plane) -> None:
    result = await xdsctl("endpoints", "gpu", admin=plane.admin)
    assert result.code == 1
    assert result.stdout == ""
    assert result.stderr.strip() == "no pool named 'gpu' (pools: batch, chat)"


async def test_the_admin_url_comes_from_the_environment(plane: Plane) -> None:
    result = await xdsctl(
        "-o", "json", "endpoints", admin=None, env={"XDSCTL_ADMIN_URL": plane.admin}
    )
    assert result.code == 0, result.stderr
    assert json.loads(result.stdout) == SERVED


async def test_proxy_status_with_no_envoy_is_an_empty_list(plane: Plane) -> None:
    result = await xdsctl("-o", "json", "proxy-status", admin=plane.admin)
    assert result.code == 0, result.stderr
    assert json.loads(result.stdout) == []


async def test_proxy_status_shows_synced_stale_nacked_and_not_sent(plane: Plane) -> None:
    requests: asyncio.Queue[discovery_pb2.DiscoveryRequest] = asyncio.Queue()

    async def outgoing() -> AsyncIterator[discovery_pb2.DiscoveryRequest]:
        while True:
            yield await requests.get()

    node = base_pb2.Node(id="envoy-1", cluster="edge")
    async with grpc.aio.insecure_channel(f"127.0.0.1:{plane.ads_port}") as channel:
        stub = ads_pb2_grpc.AggregatedDiscoveryServiceStub(channel)
        call = stub.StreamAggregatedResources(outgoing())
        # CDS: received and ACKed -> SYNCED.
        await requests.put(discovery_pb2.DiscoveryRequest(node=node, type_url=urls.CLUSTER))
        cds = await asyncio.wait_for(call.read(), 10)
        await requests.put(
            discovery_pb2.DiscoveryRequest(
                type_url=urls.CLUSTER, version_info=cds.version_info, response_nonce=cds.nonce
            )
        )
        # EDS: received, not yet answered -> STALE.
        await requests.put(
            discovery_pb2.DiscoveryRequest(type_url=urls.ENDPOINT, resource_names=["chat"])
        )
        await asyncio.wait_for(call.read(), 10)
        # LDS: received and rejected -> NACKED.
        await requests.put(discovery_pb2.DiscoveryRequest(type_url=urls.LISTENER))
        lds = await asyncio.wait_for(call.read(), 10)
        await requests.put(
            discovery_pb2.DiscoveryRequest(
                type_url=urls.LISTENER,
                response_nonce=lds.nonce,
                error_detail=status_pb2.Status(code=3, message="bad listener"),
            )
        )
        await until(
            lambda: (
                type_states(plane.registry).get("CDS", {}).get("acked_version") == cds.version_info
                and type_states(plane.registry).get("LDS", {}).get("nacks") == 1
            )
        )

        result = await xdsctl("-o", "json", "proxy-status", admin=plane.admin)
        assert result.code == 0, result.stderr
        assert json.loads(result.stdout) == [
            {
                "name": "envoy-1",
                "cluster": "edge",
                "group": "default",
                "CDS": "SYNCED",
                "LDS": "NACKED",
                "EDS": "STALE",
                "RDS": "NOT SENT",
                "nack": "LDS: bad listener",
            }
        ]
        table = await xdsctl("proxy-status", admin=plane.admin)
        assert table.code == 0, table.stderr
        header, row = [line for line in table.stdout.splitlines() if line.strip()]
        assert header.split() == ["NAME", "CLUSTER", "GROUP", "CDS", "LDS", "EDS", "RDS", "NACK"]
        expected = ["envoy-1", "edge", "default", "SYNCED", "NACKED", "STALE", "NOT", "SENT"]
        assert row.split() == [*expected, "LDS:", "bad", "listener"]
        call.cancel()


@pytest.mark.parametrize(
    "command", [("proxy-status",), ("endpoints",), ("-o", "json", "endpoints")]
)
async def test_a_control_plane_that_is_down_is_one_line_and_exit_1(
    command: tuple[str, ...],
) -> None:
    down = f"http://127.0.0.1:{free_port()}"
    result = await xdsctl(*command, admin=down)
    assert result.code == 1
    assert result.stdout == ""
    assert "Traceback" not in result.stderr
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"xdsctl: cannot reach the control plane: {down}/v1/")
    assert "Connection refused" in line


async def test_an_admin_url_that_is_not_the_admin_api_is_one_line_and_exit_1(
    plane: Plane,
) -> None:
    result = await xdsctl("endpoints", admin=plane.admin + "/wrong")
    assert result.code == 1
    assert "Traceback" not in result.stderr
    (line,) = result.stderr.splitlines()
    assert line.startswith("xdsctl: cannot reach the control plane:")
    assert "404" in line
