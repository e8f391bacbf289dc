"""`serve` in process: a critical task that dies fails readiness and ends the process with a
non-zero exit, so a supervisor restarts it instead of it serving a frozen snapshot."""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiohttp
import pytest

from configs import ONE_POOL
from xds_control.admin import AdminServer, AdminViews
from xds_control.cache import MemorySnapshotCache
from xds_control.cli.serve import EXIT_CRASHED, serve
from xds_control.config import load_config
from xds_control.control import ControlLoop
from xds_control.server import StreamRegistry
from xds_lab.harness.ports import free_port


async def readyz(port: int) -> tuple[int, str]:
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"http://127.0.0.1:{port}/readyz") as response,
    ):
        return response.status, await response.text()


async def test_a_dead_critical_task_ends_serve_with_a_nonzero_exit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(ONE_POOL)
    crash = asyncio.Event()

    async def scraper_with_a_bug(self: ControlLoop) -> None:
        await crash.wait()
        raise RuntimeError("a bug in the scraper")

    monkeypatch.setattr(ControlLoop, "scrape_forever", scraper_with_a_bug)
    admin_port = free_port()
    served = asyncio.create_task(
        serve(
            config=load_config(path),
            config_path=path,
            xds_address="127.0.0.1:0",
            admin_address=f"127.0.0.1:{admin_port}",
        )
    )
    for _ in range(100):
        try:
            if (await readyz(admin_port))[0] == 200:
                break
        except aiohttp.ClientError:
            pass
        await asyncio.sleep(0.05)
    else:
        pytest.fail("serve never became ready")
    crash.set()
    assert await asyncio.wait_for(served, timeout=10) == EXIT_CRASHED


async def test_readyz_fails_once_a_critical_task_died(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(ONE_POOL)
    cache = MemorySnapshotCache()
    loop = ControlLoop(config=load_config(path), config_path=path, cache=cache)
    await loop.step()
    failure: list[str] = []
    port = free_port()
    admin = AdminServer(
        address=f"127.0.0.1:{port}",
        views=AdminViews(
            state=loop.state,
            cache=cache,
            registry=StreamRegistry(),
            failure=lambda: failure[0] if failure else None,
        ),
    )
    await admin.start()
    try:
        assert await readyz(port) == (200, "ready\n")
        failure.append("control-loop crashed: RuntimeError: boom")
        assert await readyz(port) == (503, "control-loop crashed: RuntimeError: boom\n")
    finally:
        await admin.stop()
