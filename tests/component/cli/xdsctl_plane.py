"""A real control plane on loopback for the xdsctl tests (ADS server, admin API, the loop's
state), its config, and ``xdsctl`` run as the installed command."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from configs import CHAT_AND_BATCH
from xds_control.cache import MemorySnapshotCache
from xds_control.control import LoopState
from xds_control.server import StreamRegistry

__all__ = ["CONFIG", "Plane", "Result", "until", "xdsctl"]

XDSCTL = Path(sys.executable).with_name("xdsctl")
CONFIG = CHAT_AND_BATCH


@dataclass
class Result:
    """What one ``xdsctl`` run left: its exit code and both streams."""

    code: int
    stdout: str
    stderr: str


async def xdsctl(*args: str, admin: str | None, env: dict[str, str] | None = None) -> Result:
    """Run the installed ``xdsctl`` without blocking the loop that serves the admin API."""
    options = ["--admin", admin] if admin is not None else []
    process = await asyncio.create_subprocess_exec(
        str(XDSCTL),
        *options,
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "COLUMNS": "200", **(env or {})},
    )
    stdout, stderr = await asyncio.wait_for(process.communicate(), 30)
    assert process.returncode is not None
    return Result(process.returncode, stdout.decode(), stderr.decode())


@dataclass
class Plane:
    """The running plane: the admin API's URL, the ADS server's registry and port, the loop's
    state and its cache."""

    admin: str
    registry: StreamRegistry
    ads_port: int
    state: LoopState
    cache: MemorySnapshotCache


async def until(condition: Callable[[], bool]) -> None:
    """Wait (up to 10 s) for the server to have handled what the client sent."""
    for _ in range(1000):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the ADS server did not take in the requests within 10 s")
