"""The ``plane`` fixture the xdsctl tests run against."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from component.cli.xdsctl_plane import CONFIG, Plane
from xds_control.admin import AdminServer, AdminViews
from xds_control.cache import MemorySnapshotCache
from xds_control.config import load_config
from xds_control.control import ControlLoop
from xds_control.server import StreamRegistry, XdsServer
from xds_lab.harness.ports import free_port


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
    admin_port = free_port()
    admin = AdminServer(
        address=f"127.0.0.1:{admin_port}",
        views=AdminViews(state=loop.state, cache=cache, registry=registry),
    )
    await admin.start()
    try:
        yield Plane(f"http://127.0.0.1:{admin_port}", registry, xds.port, loop.state, cache)
    finally:
        await admin.stop()
        await xds.stop(0)
