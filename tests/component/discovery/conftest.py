"""The local list/watch API server the Kubernetes discovery tests run against."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from component.discovery.fake_kube_api import FakeKubeApi


@pytest.fixture
async def api() -> AsyncIterator[FakeKubeApi]:
    """A started ``FakeKubeApi`` with no slices; bookmarks every 0.1 s keep watches short."""
    server = FakeKubeApi(bookmark_s=0.1)
    await server.start()
    yield server
    await server.stop()
