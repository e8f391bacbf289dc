"""A large Service's EndpointSlices are listed in pages (limit + continue, as kubectl and
informers do) from a local HTTP server that pages exactly like the real API (items by name,
metadata.continue and remainingItemCount while more remain, every page from the first page's
snapshot and carrying its resourceVersion, 410 Expired for a compacted continue token): see
fake_kube_api.py."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from component.discovery.fake_kube_api import FakeKubeApi, endpoint, endpoint_slice
from xds_control.config.discovery import KubernetesDiscovery
from xds_control.discovery.kubernetes.slice_source import KubernetesSource

SLICES = 1001
"""Three pages of the 500 the client asks for."""


def one_slice(i: int, *extra: str) -> dict[str, object]:
    ips = [f"10.{i // 250}.{i % 250}.1", *extra]
    return endpoint_slice(
        f"vllm-{i:04d}", service="vllm", port=8000, endpoints=[endpoint(ip) for ip in ips]
    )


@pytest.fixture
async def api(api: FakeKubeApi) -> FakeKubeApi:
    """The shared server, holding the slices to page through."""
    for i in range(SLICES):
        await api.apply(one_slice(i))
    return api


@pytest.fixture
async def source(api: FakeKubeApi, tmp_path: Path) -> AsyncIterator[KubernetesSource]:
    settings = KubernetesDiscovery(
        namespace="llm",
        service="vllm",
        kubeconfig=api.write_kubeconfig(tmp_path / "kubeconfig"),
        pod_metadata=False,
        relist_backoff_s=0.05,
    )
    made = KubernetesSource(settings, pool="chat", wake=lambda: None)
    yield made
    await made.close()


async def test_a_large_service_is_listed_in_pages_and_watched_from_the_lists_version(
    api: FakeKubeApi, source: KubernetesSource
) -> None:
    listed_at = str(api.version)
    assert len(await source.fetch()) == SLICES
    pages = api.list_pages
    assert [p.get("limit") for p in pages] == ["500"] * 3
    assert ["continue" in p for p in pages] == [False, True, True]
    (watch,) = await api.wait_watches(1)
    assert watch["resourceVersion"] == listed_at


async def test_an_expired_continue_token_starts_the_list_over_and_loses_no_change(
    api: FakeKubeApi, source: KubernetesSource
) -> None:
    # Between the first and second page, slice 0 (already read) gains an endpoint and the
    # snapshot is compacted away: the second page is 410 and the list starts over.
    api.between_pages.append(one_slice(0, "10.9.9.9"))
    got = await source.fetch()
    assert "10.9.9.9:8000" in {e.address for e in got}
    assert len(got) == SLICES + 1
    assert api.lists == 2
    assert ["continue" in p for p in api.list_pages] == [False, True, False, True, True]
    (watch,) = await api.wait_watches(1)
    assert watch["resourceVersion"] == str(api.version)
