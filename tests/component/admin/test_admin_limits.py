"""Rate-limit budgets through the admin surface of a real control plane on loopback: the gRPC
ListLimits rows (fleet rate, Envoys sharing it, each one's bucket, the P99 and target behind
it, the last action), its filters and errors, and the same numbers as series on /metrics."""

from __future__ import annotations

import math
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import grpc
import pytest
from prometheus_client.parser import text_string_to_metric_families

from xds_control.admin import AdminServer, AdminViews
from xds_control.admin.v1 import admin_pb2 as pb
from xds_control.admin.v1 import admin_pb2_grpc
from xds_control.cache import MemorySnapshotCache
from xds_control.config import load_config
from xds_control.config.flow import TokenBudget
from xds_control.control import ControlLoop
from xds_control.flow import Band
from xds_control.flow.budgets import TokenBudgets
from xds_control.limits import Latency, Limiter
from xds_control.server import StreamRegistry
from xds_lab.harness.ports import free_port

CONFIG = """\
pools:
  - name: chat
    endpoints: [{address: 127.0.0.1:8001}, {address: 127.0.0.1:8002}]
listeners:
  - name: budgeted
    address: 127.0.0.1:10000
    limits:
      unit: tokens
      classes: {high: {rate_per_s: 20}, medium: {rate_per_s: 30}}
      adapt: {ttft_p99_target_s: 2.0, tpot_p99_target_s: 0.1}
    routes: [{name: chat, pool: chat}]
"""


@pytest.fixture
async def admin(tmp_path: Path) -> AsyncIterator[AdminServer]:
    path = tmp_path / "config.yaml"
    path.write_text(CONFIG, encoding="utf-8")
    cache = MemorySnapshotCache()
    limiter = Limiter()
    # TTFT P99 1.5x its target: the rule lowers Medium first, by gain 0.5 x the 50% excess.
    limiter.observe({"chat": Latency(ttft_p99_s=3.0)})
    loop = ControlLoop(
        config=load_config(path),
        config_path=path,
        cache=cache,
        limiter=limiter,
        envoys=lambda: {"default": 2},
    )
    await loop.step()
    server = AdminServer(
        address=f"127.0.0.1:{free_port()}",
        views=AdminViews(state=loop.state, cache=cache, registry=StreamRegistry(), limiter=limiter),
        grpc_address=f"127.0.0.1:{free_port()}",
    )
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


async def test_list_limits_shows_each_class_budget_and_where_it_came_from(
    admin: AdminServer,
) -> None:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{admin.grpc_port}") as channel:
        stub = admin_pb2_grpc.AdminStub(channel)
        got = await stub.ListLimits(pb.ListLimitsRequest())
        assert got.enabled
        assert got.cycle == 1
        rows = {b.priority: b for b in got.budgets}
        assert set(rows) == {"high", "medium"}
        medium, high = rows["medium"], rows["high"]
        assert (medium.group, medium.listener, medium.route) == ("default", "budgeted", "chat")
        assert (medium.envoy_route, medium.unit, list(medium.pools)) == (
            "chat/medium",
            "tokens",
            ["chat"],
        )
        assert (medium.fleet_rps, medium.envoys, medium.share) == (22.5, 2, 0.5)
        assert (medium.envoy_rps, high.fleet_rps, high.envoy_rps) == (11.25, 20.0, 10.0)
        assert medium.bucket.max_tokens == 12  # one second of 11.25/s, whole tokens
        fill = medium.bucket.tokens_per_fill / medium.bucket.fill_interval_s
        assert math.isclose(fill, 11.25, rel_tol=1e-4)
        assert medium.p99["chat"].ttft_s == 3.0
        assert not medium.p99["chat"].HasField("tpot_s")  # not measured
        assert (medium.target.ttft_s, medium.target.tpot_s) == (2.0, 0.1)
        assert medium.HasField("pressure")
        assert (medium.pressure, medium.action) == (1.5, "lowered medium")

        one = await stub.ListLimits(pb.ListLimitsRequest(route="budgeted/chat", group="default"))
        assert len(one.budgets) == 2
        with pytest.raises(grpc.aio.AioRpcError) as route:
            await stub.ListLimits(pb.ListLimitsRequest(route="budgeted/nope"))
        assert route.value.code() is grpc.StatusCode.NOT_FOUND
        assert route.value.details() == "no limited route 'budgeted/nope' (routes: budgeted/chat)"
        with pytest.raises(grpc.aio.AioRpcError) as group:
            await stub.ListLimits(pb.ListLimitsRequest(group="nope"))
        assert group.value.code() is grpc.StatusCode.NOT_FOUND


async def test_budgets_are_series_on_metrics(admin: AdminServer) -> None:
    async with (
        aiohttp.ClientSession() as http,
        http.get(f"http://127.0.0.1:{admin.port}/metrics") as response,
    ):
        text = await response.text()
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name.startswith("xds_control_limit_")
    }

    def value(name: str, **labels: str) -> float:
        return samples[(name, tuple(sorted(labels.items())))]

    medium = {
        "group": "default",
        "listener": "budgeted",
        "route": "chat",
        "class": "medium",
        "unit": "tokens",
    }
    route = {"listener": "budgeted", "route": "chat"}
    assert value("xds_control_limit_fill_rate", **medium) == 22.5
    assert value("xds_control_limit_envoy_fill_rate", **medium) == 11.25
    assert value("xds_control_limit_bucket_tokens", **medium) == 12
    assert value("xds_control_limit_fill_rate", **{**medium, "class": "high"}) == 20
    assert value("xds_control_limit_envoys", group="default") == 2
    assert value("xds_control_limit_p99_seconds", **route, pool="chat", latency="ttft") == 3.0
    assert value("xds_control_limit_p99_target_seconds", **route, latency="ttft") == 2.0
    assert value("xds_control_limit_p99_target_seconds", **route, latency="tpot") == 0.1
    assert value("xds_control_limit_pressure", **route) == 1.5
    lowered = {**route, "class": "medium", "direction": "lower"}
    assert value("xds_control_limit_adjustments_total", **lowered) >= 1
    # Not measured: no series rather than a made-up zero.
    assert not [k for k in samples if ("latency", "tpot") in k[1] and "pool" in dict(k[1])]


async def test_output_token_budgets_show_each_tenant_window_over_grpc_and_http(
    tmp_path: Path,
) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(CONFIG, encoding="utf-8")
    cache = MemorySnapshotCache()
    loop = ControlLoop(config=load_config(path), config_path=path, cache=cache)
    await loop.step()
    budgets = TokenBudgets(clock=lambda: 130.0)  # 10 s into the window [120, 180)
    rule = TokenBudget(tenant="*", output_tokens=1000, window_s=60)
    for tenant, estimate in (("a", 256), ("a", 300), ("b", 40)):
        budgets.charge(
            pool="chat", budgets=[rule], tenant=tenant, band=Band.MEDIUM, estimate=estimate
        )
    server = AdminServer(
        address=f"127.0.0.1:{free_port()}",
        views=AdminViews(
            state=loop.state, cache=cache, registry=StreamRegistry(), token_budgets=budgets.rows
        ),
        grpc_address=f"127.0.0.1:{free_port()}",
    )
    await server.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{server.grpc_port}") as channel:
            got = await admin_pb2_grpc.AdminStub(channel).ListLimits(pb.ListLimitsRequest())
        rows = [
            (t.pool, t.budget, t.tenant, t.window_s, t.output_tokens, t.charged, t.left)
            for t in got.token_budgets
        ]
        assert rows == [
            ("chat", "*/all", "a", 60.0, 1000, 556, 444),
            ("chat", "*/all", "b", 60.0, 1000, 40, 960),
        ]
        assert [t.renews_in_s for t in got.token_budgets] == [50.0, 50.0]
        async with (
            aiohttp.ClientSession() as http,
            http.get(f"http://127.0.0.1:{server.port}/v1/limits") as response,
        ):
            view = await response.json()
        assert [(t["tenant"], t["charged"], t["left"]) for t in view["token_budgets"]] == [
            ("a", 556, 444),
            ("b", 40, 960),
        ]
    finally:
        await server.stop()
