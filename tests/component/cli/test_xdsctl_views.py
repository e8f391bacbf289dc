"""`xdsctl weights / explain / config / events / diff / validate` and the global options against a
real control plane on loopback (ADS server, admin API, one Envoy-like ADS client), run as the
installed command. The same plane as test_xdsctl_commands (conftest.py)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from aiohttp import web
from envoy.config.core.v3 import base_pb2
from envoy.service.discovery.v3 import ads_pb2_grpc, discovery_pb2

from component.cli.xdsctl_plane import CONFIG, Plane, until, xdsctl
from xds_control.admin import AdminServer, AdminViews
from xds_control.xds import type_urls as urls
from xds_lab.harness.ports import free_port


async def test_weights_json_has_the_documented_shape(plane: Plane) -> None:
    result = await xdsctl("-o", "json", "weights", "chat", admin=plane.admin)
    assert result.code == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["engine"] is False
    assert [(e["address"], e["weight"], e["health"]) for e in data["pools"]["chat"]] == [
        ("127.0.0.1:8001", 10, "HEALTHY"),
        ("127.0.0.1:8002", 30, "HEALTHY"),
    ]
    assert all(e["reason"].startswith("static") for e in data["pools"]["chat"])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("weights", "gpu"), "xdsctl: no pool named 'gpu' (pools: batch, chat)"),
        (("explain", "chat", "127.0.0.1:8001"), "xdsctl: no signal source configured"),
        (("config", "envoy-9"), "xdsctl: no Envoy with node id 'envoy-9' is connected"),
        (("diff", "envoy-9", "--envoy-admin", "http://x"), "xdsctl: no Envoy with node id"),
    ],
)
async def test_unknown_names_are_one_line_and_exit_1(
    plane: Plane, args: tuple[str, ...], message: str
) -> None:
    result = await xdsctl(*args, admin=plane.admin)
    assert result.code == 1
    assert result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert line.startswith(message)


async def test_a_bad_flag_is_exit_2_without_a_traceback(plane: Plane) -> None:
    result = await xdsctl("weights", "--explian", admin=plane.admin)
    assert result.code == 2
    assert "Traceback" not in result.stderr
    assert "--explian" in result.stderr


async def connect_and_ack(plane: Plane, node_id: str) -> grpc.aio.Channel:
    requests: asyncio.Queue[discovery_pb2.DiscoveryRequest] = asyncio.Queue()

    async def outgoing() -> AsyncIterator[discovery_pb2.DiscoveryRequest]:
        while True:
            yield await requests.get()

    channel = grpc.aio.insecure_channel(f"127.0.0.1:{plane.ads_port}")
    call = ads_pb2_grpc.AggregatedDiscoveryServiceStub(channel).StreamAggregatedResources(
        outgoing()
    )
    node = base_pb2.Node(id=node_id, cluster="edge")
    await requests.put(discovery_pb2.DiscoveryRequest(node=node, type_url=urls.CLUSTER))
    cds = await asyncio.wait_for(call.read(), 10)
    await requests.put(
        discovery_pb2.DiscoveryRequest(
            type_url=urls.CLUSTER, version_info=cds.version_info, response_nonce=cds.nonce
        )
    )
    await until(lambda: any(s["node_id"] == node_id for s in plane.registry.describe()))
    return channel


async def test_config_events_and_status_of_a_connected_envoy(plane: Plane) -> None:
    channel = await connect_and_ack(plane, "envoy-1")
    try:
        config = await xdsctl("config", "envoy-1", "--type", "eds", admin=plane.admin)
        assert config.code == 0, config.stderr
        data = json.loads(config.stdout)
        [eds] = data["types"]
        assert eds["type"] == "EDS"
        assert sorted(r["clusterName"] for r in eds["resources"]) == ["batch", "chat"]
        status = await xdsctl("-o", "json", "status", admin=plane.admin)
        assert json.loads(status.stdout)[0]["CDS"] == "SYNCED"
        await asyncio.sleep(0.5)  # the event recorder looks every 0.2 s
        events = await xdsctl("-o", "json", "events", admin=plane.admin)
        assert events.code == 0, events.stderr
        kinds = {(e["kind"], e["node_id"], e["type"]) for e in json.loads(events.stdout)}
        assert {("connect", "envoy-1", ""), ("push", "envoy-1", "CDS")} <= kinds
        assert ("ack", "envoy-1", "CDS") in kinds
        table = await xdsctl("events", admin=plane.admin)
        assert any(" ACK envoy-1 CDS " in line for line in table.stdout.splitlines())
    finally:
        await channel.close(grace=None)


async def test_diff_against_a_config_dump(plane: Plane) -> None:
    """A config dump holding the served clusters but one weight off and a stale cluster."""
    channel = await connect_and_ack(plane, "envoy-1")
    served = (await xdsctl("config", "envoy-1", admin=plane.admin)).stdout
    by_type = {t["type"]: t["resources"] for t in json.loads(served)["types"]}
    assignments = json.loads(json.dumps(by_type["EDS"]))
    assignments[1]["endpoints"][0]["lbEndpoints"][1]["loadBalancingWeight"] = 99
    dump: dict[str, Any] = {  # Envoy's /config_dump JSON
        "configs": [
            {
                "@type": "type.googleapis.com/envoy.admin.v3.ClustersConfigDump",
                "dynamic_active_clusters": [{"cluster": c} for c in by_type["CDS"]]
                + [{"cluster": {"name": "old"}}],
            },
            {
                "@type": "type.googleapis.com/envoy.admin.v3.EndpointsConfigDump",
                "dynamic_endpoint_configs": [{"endpoint_config": a} for a in assignments],
            },
            {
                "@type": "type.googleapis.com/envoy.admin.v3.ListenersConfigDump",
                "dynamic_listeners": [
                    {"name": r["name"], "active_state": {"listener": r}} for r in by_type["LDS"]
                ],
            },
            {
                "@type": "type.googleapis.com/envoy.admin.v3.RoutesConfigDump",
                "dynamic_route_configs": [{"route_config": r} for r in by_type["RDS"]],
            },
        ]
    }

    async def config_dump(request: web.Request) -> web.Response:
        return web.json_response(dump)

    app = web.Application()
    app.router.add_get("/config_dump", config_dump)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        result = await xdsctl(
            "-o",
            "json",
            "diff",
            "envoy-1",
            "--envoy-admin",
            f"http://127.0.0.1:{port}",
            admin=plane.admin,
        )
        assert result.code == 3, result.stderr
        assert json.loads(result.stdout) == [
            {"type": "CDS", "name": "old", "problem": "in Envoy, no longer served"},
            {
                "type": "EDS",
                "name": "chat",
                "problem": "weights differ: 127.0.0.1:8002: served 30, Envoy 99",
            },
        ]
        assignments[1]["endpoints"][0]["lbEndpoints"][1]["loadBalancingWeight"] = 30
        dump["configs"][0]["dynamic_active_clusters"].pop()
        same = await xdsctl(
            "diff", "envoy-1", "--envoy-admin", f"http://127.0.0.1:{port}", admin=plane.admin
        )
        assert same.code == 0, same.stdout
        assert "in sync" in same.stdout
    finally:
        await runner.cleanup()
        await channel.close(grace=None)


async def test_a_token_from_the_environment_and_a_wrong_one(plane: Plane, tmp_path: Path) -> None:
    admin_port = free_port()
    secured = AdminServer(
        address=f"127.0.0.1:{admin_port}",
        views=AdminViews(state=plane.state, cache=plane.cache, registry=plane.registry),
        token="s3cret",
    )
    await secured.start()
    url = f"http://127.0.0.1:{admin_port}"
    try:
        ok = await xdsctl("-o", "json", "weights", admin=url, env={"XDSCTL_TOKEN": "s3cret"})
        assert ok.code == 0, ok.stderr
        wrong = await xdsctl("weights", admin=url, env={"XDSCTL_TOKEN": "nope"})
        assert wrong.code == 1
        (line,) = wrong.stderr.splitlines()
        assert "refused the token" in line
        server = await xdsctl(
            "-o",
            "json",
            "weights",
            admin=None,
            env={"XDSCTL_SERVER": url, "XDSCTL_TOKEN": "s3cret"},
        )
        assert server.code == 0, server.stderr
    finally:
        await secured.stop()


async def test_validate_a_file(tmp_path: Path) -> None:
    good = tmp_path / "good.yaml"
    good.write_text(CONFIG, encoding="utf-8")
    bad = tmp_path / "bad.yaml"
    bad.write_text("pools: []\n", encoding="utf-8")
    assert (await xdsctl("validate", str(good), admin=None)).code == 0
    result = await xdsctl("validate", str(bad), admin=None)
    assert result.code == 2
    assert "pools" in result.stderr
