"""End-to-end fixtures: everything real, on loopback."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from component.discovery.fake_kube_api import FakeKubeApi
from e2e.stack import EchoStack, echo_stack
from xds_lab.harness.envoy import find_envoy

# Every test here is marked `e2e` by tests/conftest.py (a pytestmark in a conftest marks nothing).


@pytest.fixture(scope="session", autouse=True)
def _envoy_installed() -> None:
    # No skip: `make test` installs Envoy, and a silent skip would hide a broken set-up.
    find_envoy()


@pytest.fixture
async def stack(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[EchoStack]:
    """A fresh stack of two echo backends; tests start it with the weights they need. Its
    Envoys speak state-of-the-world ADS unless the test asks for ``delta`` (``BOTH_PROTOCOLS``)."""
    stack = echo_stack(tmp_path, ads=getattr(request, "param", "sotw"))
    try:
        yield stack
    finally:
        await stack.close()


@pytest.fixture
async def api() -> AsyncIterator[FakeKubeApi]:
    """The local Kubernetes list/watch API server (tests/component/discovery/fake_kube_api.py),
    started; the Kubernetes and InferencePool tests' control planes reach it by kubeconfig."""
    server = FakeKubeApi(bookmark_s=0.5)
    await server.start()
    yield server
    await server.stop()
