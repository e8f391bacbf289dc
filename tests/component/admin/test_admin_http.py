"""The admin HTTP API on loopback, as operators, probes and xdsctl read it."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from configs import CHAT_AND_BATCH
from xds_control.admin import AdminServer, AdminViews
from xds_control.cache import DEFAULT_GROUP, MemorySnapshotCache
from xds_control.config import load_config
from xds_control.control import ControlLoop
from xds_control.server import StreamRegistry
from xds_lab.harness.ports import free_port

CONFIG = CHAT_AND_BATCH


def write(path: Path, text: str) -> None:
    """Replace the file atomically and make sure its mtime moves, even within one clock tick."""
    before = path.stat().st_mtime_ns if path.exists() else 0
    scratch = path.with_suffix(".tmp")
    scratch.write_text(text, encoding="utf-8")
    os.replace(scratch, path)
    later = max(path.stat().st_mtime_ns, before + 1_000_000_000)
    os.utime(path, ns=(later, later))


@dataclass
class Admin:
    loop: ControlLoop
    cache: MemorySnapshotCache
    session: aiohttp.ClientSession
    base: str

    async def get(self, path: str, *, status: int = 200) -> aiohttp.ClientResponse:
        response = await self.session.get(self.base + path)
        assert response.status == status, await response.text()
        return response

    async def json(self, path: str) -> Any:
        response = await self.get(path)
        assert response.content_type == "application/json"
        return await response.json()


@pytest.fixture
async def admin(tmp_path: Path) -> AsyncIterator[Admin]:
    path = tmp_path / "config.yaml"
    write(path, CONFIG)
    cache = MemorySnapshotCache()
    loop = ControlLoop(config=load_config(path), config_path=path, cache=cache)
    # AdminServer does not take port 0 (its address must be a valid IP:PORT): pick a free one.
    port = free_port()
    server = AdminServer(
        address=f"127.0.0.1:{port}",
        views=AdminViews(state=loop.state, cache=cache, registry=StreamRegistry()),
    )
    await server.start()
    assert server.port == port
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session:
            yield Admin(loop, cache, session, f"http://127.0.0.1:{server.port}")
    finally:
        await server.stop()


async def test_healthz_answers_before_anything_is_published(admin: Admin) -> None:
    response = await admin.get("/healthz")
    assert await response.text() == "ok\n"


async def test_readyz_is_503_until_the_first_snapshot(admin: Admin) -> None:
    response = await admin.get("/readyz", status=503)
    assert "no snapshot" in await response.text()
    await admin.loop.step()
    response = await admin.get("/readyz")
    assert await response.text() == "ready\n"


async def test_before_a_snapshot_the_views_are_empty_not_errors(admin: Admin) -> None:
    assert await admin.json("/v1/snapshot") == {"version": None, "types": []}
    assert await admin.json("/v1/endpoints") == {}
    assert await admin.json("/v1/streams") == []
    status = await admin.json("/v1/status")
    assert status["version"] == ""


async def test_status_shows_the_served_version_and_a_rejected_edit(admin: Admin) -> None:
    await admin.loop.step()
    version = admin.loop.state.version
    status = await admin.json("/v1/status")
    assert status["version"] == version != ""
    assert status["config_error"] is None
    assert status["config_path"] == str(admin.loop.state.config_path)
    assert status["discovery_errors"] == {}
    assert (status["pools"], status["listeners"], status["routes"]) == (2, 1, 2)

    write(admin.loop.state.config_path, CONFIG.replace("weight: 30", "weight: 0"))
    await admin.loop.step()
    status = await admin.json("/v1/status")
    assert "pools[0].endpoints[1].weight" in status["config_error"]
    assert status["version"] == version  # still serving the last good config


async def test_snapshot_lists_each_type_with_its_names(admin: Admin) -> None:
    await admin.loop.step()
    view = await admin.json("/v1/snapshot")
    assert view["version"] == admin.loop.state.version
    names = {entry["type"]: entry["names"] for entry in view["types"]}
    assert names == {
        "CDS": ["batch", "chat"],
        "EDS": ["batch", "chat"],
        "LDS": ["gateway"],
        "RDS": ["gateway"],  # the listener's route table, by the listener's name
    }
    assert all("resources" not in entry for entry in view["types"])


async def test_snapshot_with_resources_shows_what_envoy_gets(admin: Admin) -> None:
    await admin.loop.step()
    view = await admin.json("/v1/snapshot?resources=1")
    by_type = {entry["type"]: entry for entry in view["types"]}
    clusters = by_type["CDS"]["resources"]
    assert [c["name"] for c in clusters] == ["batch", "chat"]
    assert all(c["type"] == "EDS" for c in clusters)
    (listener,) = by_type["LDS"]["resources"]
    assert listener["address"]["socketAddress"]["portValue"] == 10000


async def test_endpoints_show_the_weights_being_served(admin: Admin) -> None:
    await admin.loop.step()
    assert await admin.json("/v1/endpoints") == {
        "batch": [{"address": "127.0.0.1:8003", "weight": 10, "health": "HEALTHY"}],
        "chat": [
            {"address": "127.0.0.1:8001", "weight": 10, "health": "HEALTHY"},
            {"address": "127.0.0.1:8002", "weight": 30, "health": "HEALTHY"},
        ],
    }


async def test_weights_without_an_engine_are_the_static_ones(admin: Admin) -> None:
    await admin.loop.step()
    view = await admin.json("/v1/weights")
    assert view["engine"] is False
    chat = view["pools"]["chat"]
    assert [(row["address"], row["weight"]) for row in chat] == [
        ("127.0.0.1:8001", 10),
        ("127.0.0.1:8002", 30),
    ]
    assert all(row["reason"].startswith("static") for row in chat)
    assert await admin.json("/v1/weights?explain=1") == view


async def test_metrics_carry_the_served_version(admin: Admin) -> None:
    await admin.loop.step()
    snapshot = admin.cache.snapshot(DEFAULT_GROUP)
    assert snapshot is not None
    response = await admin.get("/metrics")
    text = await response.text()
    assert response.content_type == "text/plain"
    assert f'xds_control_snapshot_info{{version="{snapshot.version}"}} 1.0' in text
    assert "xds_control_snapshots_published_total" in text


async def test_an_unknown_path_is_404(admin: Admin) -> None:
    await admin.get("/v1/nothing", status=404)
