"""One fleet of real vLLM servers (the CPU build, the lab's tiny model) for the whole test run:
started once, in the one pytest process ``make test``'s vLLM lane runs (marker ``vllm``, set
on every test here by tests/conftest.py; never under xdist, where each worker would start its
own), lent to each test's stack. A test that restarts a server waits for it to be healthy
again before it returns, so the next test finds the fleet as it was.

Where vLLM's CPU build is not installed (a machine with no registry), every test here skips
and says why; ``make test`` installs it (``make vllm``)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from xds_lab.real_engine.install import VllmInstall, VllmMissing, find_vllm
from xds_lab.real_engine.server import VllmFleet, VllmServer

SERVERS = ("v0", "v1")
"""Two servers: each takes about 50 s of one core to start and 3 GB of memory."""


@pytest.fixture(scope="session")
def vllm_install() -> VllmInstall:
    """The install, or a skip naming why there is none."""
    try:
        return find_vllm()
    except VllmMissing as exc:
        pytest.skip(str(exc))


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def vllm_fleet(
    vllm_install: VllmInstall, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[VllmFleet]:
    """The run's servers, healthy."""
    workdir: Path = tmp_path_factory.mktemp("vllm")
    fleet = VllmFleet([VllmServer(name=n, install=vllm_install, workdir=workdir) for n in SERVERS])
    await fleet.start()
    try:
        yield fleet
    finally:
        await fleet.stop()
