"""Pools made and removed at run time from InferencePool objects (``inference_pools``): the
config has no pool, only routes naming InferencePools. An InferencePool created on the local
list/watch API server becomes a cluster in a real Envoy's ``/clusters`` with its pods and takes
its route's requests; deleted, the cluster goes and the route answers 503, the InferencePool
beside it untouched. A bad object is left out and changes nothing else. Each change arrives
through the watches (the reconcile period is 30 s)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from component.discovery.fake_kube_api import FakeKubeApi, inference_pool
from e2e.inference_pools import add_pool, envoy_serves, pods_stack, post, start_gateway
from e2e.stack import EchoStack

ROUTES = [
    {"name": "llama", "match": {"prefix": "/llama"}, "pool": "llama"},
    {"name": "qwen", "match": {"prefix": "/qwen"}, "pool": "qwen"},
]


@pytest.fixture
async def stack(tmp_path: Path) -> AsyncIterator[EchoStack]:
    made = pods_stack(tmp_path, pods=4)
    try:
        yield made
    finally:
        await made.close()


async def served(stack: EchoStack, path: str, count: int = 10) -> set[str]:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session:
        return {await post(session, f"{stack.url}{path}") for _ in range(count)}


async def test_an_inference_pool_added_is_served_and_removed_is_gone(
    stack: EchoStack, api: FakeKubeApi
) -> None:
    backends = stack.backends
    await add_pool(api, stack, "llama", pods=[0, 1])
    await start_gateway(stack, api, routes=ROUTES)
    await envoy_serves(stack, "llama", [0, 1], what="the InferencePool there at start")
    assert await served(stack, "/qwen") == {"status:503"}  # no such pool yet: no cluster

    await add_pool(api, stack, "qwen", pods=[2, 3])
    await envoy_serves(stack, "qwen", [2, 3], what="an InferencePool created at run time")
    assert await served(stack, "/qwen") <= {backends.address(2), backends.address(3)}

    # A bad object (no selector) is left out; nothing else moves.
    bad = inference_pool("broken", selector={}, ports=[backends.ports[0]])
    bad["spec"]["selector"] = {}
    await api.apply_inference_pool(bad)
    await api.delete_inference_pool("llama")  # after it: once this shows, the bad one was seen
    await envoy_serves(stack, "llama", [], what="a deleted InferencePool's cluster gone")
    await envoy_serves(stack, "broken", [], what="no cluster for the bad InferencePool")
    await envoy_serves(stack, "qwen", [2, 3], what="the other InferencePool untouched")
    assert await served(stack, "/llama") == {"status:503"}
    assert await served(stack, "/qwen") <= {backends.address(2), backends.address(3)}
    status = await stack.control_plane.get_json("/v1/status")
    assert "llama" not in status.get("discovery_errors", {}), status
