"""KubernetesSource against a local HTTP server that speaks the API server's EndpointSlice
list/watch protocol with payloads shaped exactly like the real API's (EndpointSliceList with
metadata.resourceVersion; a watch stream of newline-delimited {"type": "ADDED|MODIFIED|
DELETED|BOOKMARK|ERROR", "object": ...}; 410 Gone as an ERROR Status object with code 410 and
as HTTP 410): see fake_kube_api.py. The source reaches it through a kubeconfig with a bearer
token, as it would a real cluster."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from component.discovery.fake_kube_api import FakeKubeApi, endpoint, endpoint_slice
from component.discovery.polling import until, until_error
from xds_control.config.discovery import KubernetesDiscovery
from xds_control.discovery import Endpoint, Health
from xds_control.discovery.kubernetes.slice_source import KubernetesSource
from xds_control.errors import DiscoveryError

PORT = 8000


@pytest.fixture
async def source(api: FakeKubeApi, tmp_path: Path) -> AsyncIterator[KubernetesSource]:
    settings = KubernetesDiscovery(
        namespace="llm",
        service="vllm",
        port="http",
        kubeconfig=api.write_kubeconfig(tmp_path / "kubeconfig"),
        watch_timeout_s=1,
        relist_backoff_s=0.05,
        first_list_timeout_s=5,
    )
    made = KubernetesSource(settings, pool="chat", wake=lambda: None)
    yield made
    await made.close()


def health(endpoints: tuple[Endpoint, ...]) -> dict[str, Health]:
    return {e.address: e.health for e in endpoints}


def slice_a(*endpoints: dict[str, object]) -> dict[str, object]:
    return endpoint_slice("vllm-a", service="vllm", endpoints=endpoints, port=PORT)


async def test_first_fetch_lists_with_conditions_and_service_labels(
    api: FakeKubeApi, source: KubernetesSource
) -> None:
    labels = {
        "xds-control.io/engine": "vllm",
        "xds-control.io/gpu-class": "a100-80gb",
        "xds-control.io/model": "llama-3-8b",
        "xds-control.io/batch-slots": "64",
    }
    await api.apply(
        endpoint_slice(
            "vllm-a",
            service="vllm",
            port=PORT,
            labels=labels,
            endpoints=[
                endpoint("10.0.0.1"),
                endpoint("10.0.0.2", ready=False),
                endpoint("10.0.0.3", ready=False, serving=True, terminating=True),
            ],
        )
    )
    await api.apply(endpoint_slice("other", service="other", endpoints=[], port=PORT))
    got = await source.fetch()
    assert health(got) == {
        "10.0.0.1:8000": Health.HEALTHY,
        "10.0.0.2:8000": Health.UNHEALTHY,
        "10.0.0.3:8000": Health.DRAINING,
    }
    first = got[0]
    assert (first.engine, first.gpu_class, first.model, first.batch_slots) == (
        "vllm",
        "a100-80gb",
        "llama-3-8b",
        64,
    )


async def test_watch_events_change_the_endpoints_and_wake_the_loop(
    api: FakeKubeApi, tmp_path: Path
) -> None:
    await api.apply(slice_a(endpoint("10.0.0.1")))
    woken = asyncio.Event()
    settings = KubernetesDiscovery(
        namespace="llm",
        service="vllm",
        kubeconfig=api.write_kubeconfig(tmp_path / "kubeconfig"),
        relist_backoff_s=0.05,
    )
    source = KubernetesSource(settings, pool="chat", wake=woken.set)
    try:
        assert health(await source.fetch()) == {"10.0.0.1:8000": Health.HEALTHY}
        woken.clear()
        await api.apply(slice_a(endpoint("10.0.0.1"), endpoint("10.0.0.2")))
        await asyncio.wait_for(woken.wait(), 5)
        assert len(await source.fetch()) == 2
        await api.apply(slice_a(endpoint("10.0.0.1", terminating=True), endpoint("10.0.0.2")))
        await until(source, lambda e: health(e)["10.0.0.1:8000"] is Health.DRAINING)
        await api.delete("vllm-a")
        await until(source, lambda e: e == ())
    finally:
        await source.close()
    assert api.lists == 1  # every change came through the one watch
    watch = api.watches[0]
    assert watch["allowWatchBookmarks"].lower() == "true"
    assert watch["resourceVersion"] == "101"  # the list's version


async def test_a_renewed_watch_starts_from_the_last_bookmark(
    api: FakeKubeApi, source: KubernetesSource
) -> None:
    await api.apply(slice_a(endpoint("10.0.0.1")))
    await source.fetch()
    await api.apply(endpoint_slice("unrelated", service="other", endpoints=[], port=PORT))
    watches = await api.wait_watches(2)
    # The other Service's change moved the version; the bookmark carried it to this watch.
    assert [w["resourceVersion"] for w in watches] == ["101", "102"]
    assert api.lists == 1


@pytest.mark.parametrize("as_http", [False, True], ids=["error-event", "http-410"])
async def test_410_gone_lists_again_and_loses_no_event(
    api: FakeKubeApi, source: KubernetesSource, as_http: bool
) -> None:
    api.gone_as_http = as_http
    await api.apply(slice_a(endpoint("10.0.0.1")))
    await source.fetch()
    await api.apply_unseen(slice_a(endpoint("10.0.0.1"), endpoint("10.0.0.9")))
    got = await until(source, lambda e: "10.0.0.9:8000" in health(e))
    assert len(got) == 2
    assert api.lists == 2


async def test_a_broken_watch_lists_again_and_an_event_during_the_break_arrives(
    api: FakeKubeApi, source: KubernetesSource
) -> None:
    await api.apply(slice_a(endpoint("10.0.0.1"), endpoint("10.0.0.2")))
    await source.fetch()
    api.outage(True)  # the watch is cut and the server answers 503 for a while
    await api.apply_unseen(slice_a(endpoint("10.0.0.2"), endpoint("10.0.0.3", ready=False)))
    message = await until_error(source)
    assert "503" in message
    api.outage(False)
    got = await until(source, lambda e: "10.0.0.3:8000" in health(e))
    assert health(got) == {"10.0.0.2:8000": Health.HEALTHY, "10.0.0.3:8000": Health.UNHEALTHY}
    assert api.lists >= 2


async def test_a_missing_kubeconfig_is_an_error_naming_it(tmp_path: Path) -> None:
    settings = KubernetesDiscovery(
        namespace="llm",
        service="vllm",
        kubeconfig=tmp_path / "nope",
        first_list_timeout_s=0.5,
    )
    source = KubernetesSource(settings, pool="chat", wake=lambda: None)
    try:
        with pytest.raises(DiscoveryError, match="nope"):
            await source.fetch()
    finally:
        await source.close()
