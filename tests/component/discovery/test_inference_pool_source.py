"""InferencePoolSource against the local API server (fake_kube_api.py), which lists and watches
InferencePools and pods with payloads shaped like the real API's. The source reaches it through
a kubeconfig with a bearer token, as it would a real cluster: the pods an InferencePool selects
become the pool's endpoints on its target port, and follow the pool and its pods as they
change."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import structlog

from component.discovery.fake_kube_api import FakeKubeApi, inference_pool, pod
from component.discovery.polling import until, until_error
from xds_control.config import Pool
from xds_control.config.discovery import InferencePoolDiscovery
from xds_control.discovery import (
    Endpoint,
    EndpointSource,
    carry_over,
    close_sources,
    endpoint_source,
)
from xds_control.discovery.kubernetes.inference_pool_source import InferencePoolSource
from xds_control.errors import DiscoveryError

PORT = 8000
LLAMA = {"app": "vllm-llama3"}


@pytest.fixture
async def source(api: FakeKubeApi, tmp_path: Path) -> AsyncIterator[InferencePoolSource]:
    settings = InferencePoolDiscovery(
        namespace="llm",
        name="llama",
        weight=7,
        kubeconfig=api.write_kubeconfig(tmp_path / "kubeconfig"),
        watch_timeout_s=1,
        relist_backoff_s=0.05,
        first_list_timeout_s=5,
    )
    made = InferencePoolSource(settings, pool="chat", wake=lambda: None)
    yield made
    await made.close()


def addresses(endpoints: tuple[Endpoint, ...]) -> list[str]:
    return [e.address for e in endpoints]


def llama(ip: str, **kwargs: object) -> dict[str, object]:
    labels = {**LLAMA, **kwargs.pop("labels", {})}  # type: ignore[dict-item]
    return pod(ip, labels=labels, **kwargs)  # type: ignore[arg-type]


async def test_ready_selected_pods_are_the_pools_endpoints_with_their_facts(
    api: FakeKubeApi, source: InferencePoolSource
) -> None:
    facts = {
        "xds-control.io/engine": "vllm",
        "xds-control.io/gpu-class": "h100-80gb",
        "xds-control.io/model": "llama-3-8b",
        "xds-control.io/batch-slots": "64",
    }
    await api.apply_inference_pool(inference_pool("llama", selector=LLAMA, ports=[PORT]))
    await api.apply_pod(
        llama("10.0.0.1", labels=facts, annotations={"xds-control.io/gpu-uuid": "GPU-a"})
    )
    await api.apply_pod(llama("10.0.0.2", ready=False))
    await api.apply_pod(llama("10.0.0.3", terminating=True))
    await api.apply_pod(pod("10.0.0.4", labels={"app": "other"}))
    got = await source.fetch()
    assert addresses(got) == ["10.0.0.1:8000"]
    (first,) = got
    assert (first.engine, first.gpu_class, first.model, first.batch_slots, first.weight) == (
        "vllm",
        "h100-80gb",
        "llama-3-8b",
        64,
        7,
    )
    assert first.device is not None
    assert first.device.gpu_uuid == "GPU-a"
    (pods_list,) = [p for p in api.list_pages if p["kind"] == "Pod"]
    assert pods_list["labelSelector"] == "app=vllm-llama3"  # the API server selects the pods
    assert source.spec is not None
    assert source.spec.picker is not None
    assert source.spec.picker.failure_mode == "FailClose"  # the API's default


async def test_pods_that_turn_ready_are_added_and_deleted_ones_go(
    api: FakeKubeApi, source: InferencePoolSource
) -> None:
    await api.apply_inference_pool(inference_pool("llama", selector=LLAMA, ports=[PORT]))
    await api.apply_pod(llama("10.0.0.1"))
    await api.apply_pod(llama("10.0.0.2", ready=False))
    assert addresses(await source.fetch()) == ["10.0.0.1:8000"]
    await api.apply_pod(llama("10.0.0.2"))
    await until(source, lambda e: addresses(e) == ["10.0.0.1:8000", "10.0.0.2:8000"])
    await api.apply_pod(llama("10.0.0.3"))
    await api.delete_pod("vllm-10-0-0-1")
    await until(source, lambda e: addresses(e) == ["10.0.0.2:8000", "10.0.0.3:8000"])
    await api.apply_pod(llama("10.0.0.2", terminating=True))
    await until(source, lambda e: addresses(e) == ["10.0.0.3:8000"])
    assert api.lists_of == {"InferencePool": 1, "Pod": 1}  # all of it through the watches


async def test_a_selector_change_selects_the_new_pods(
    api: FakeKubeApi, source: InferencePoolSource
) -> None:
    await api.apply_inference_pool(inference_pool("llama", selector=LLAMA, ports=[PORT]))
    await api.apply_pod(llama("10.0.0.1"))
    await api.apply_pod(pod("10.0.0.2", labels={"app": "vllm-llama3-canary"}))
    assert addresses(await source.fetch()) == ["10.0.0.1:8000"]
    canary = {"app": "vllm-llama3-canary"}
    await api.apply_inference_pool(inference_pool("llama", selector=canary, ports=[9000]))
    await until(source, lambda e: addresses(e) == ["10.0.0.2:9000"])
    pod_lists = [p["labelSelector"] for p in api.list_pages if p["kind"] == "Pod"]
    assert pod_lists == ["app=vllm-llama3", "app=vllm-llama3-canary"]
    # Several target ports: one endpoint per port.
    await api.apply_inference_pool(inference_pool("llama", selector=canary, ports=[9000, 9001]))
    await until(source, lambda e: addresses(e) == ["10.0.0.2:9000", "10.0.0.2:9001"])


async def test_a_pod_relabelled_out_of_the_selector_leaves_the_pool(
    api: FakeKubeApi, source: InferencePoolSource
) -> None:
    await api.apply_inference_pool(inference_pool("llama", selector=LLAMA, ports=[PORT]))
    await api.apply_pod(llama("10.0.0.1"))
    await api.apply_pod(llama("10.0.0.2"))
    assert len(await source.fetch()) == 2
    await api.apply_pod(pod("10.0.0.2", labels={"app": "debugging"}))
    await until(source, lambda e: addresses(e) == ["10.0.0.1:8000"])


@pytest.mark.parametrize("as_http", [False, True], ids=["error-event", "http-410"])
async def test_410_gone_on_the_pod_watch_lists_again_and_loses_no_pod(
    api: FakeKubeApi, source: InferencePoolSource, as_http: bool
) -> None:
    api.gone_as_http = as_http
    await api.apply_inference_pool(inference_pool("llama", selector=LLAMA, ports=[PORT]))
    await api.apply_pod(llama("10.0.0.1"))
    await source.fetch()
    await api.apply_pod(llama("10.0.0.9"))
    await api.expire()  # the change is compacted away before any watch streams it
    await until(source, lambda e: addresses(e) == ["10.0.0.1:8000", "10.0.0.9:8000"])
    assert api.lists_of["Pod"] >= 2
    # The pool's own watch is past the compaction too: it lists again, in its own time.
    for _ in range(250):  # 5 s at the most
        if api.lists_of["InferencePool"] >= 2:
            break
        await asyncio.sleep(0.02)
    assert api.lists_of["InferencePool"] >= 2


async def test_an_inference_pool_not_created_yet_is_waited_for_and_logged(
    api: FakeKubeApi, source: InferencePoolSource
) -> None:
    await api.apply_pod(llama("10.0.0.1"))
    with (
        structlog.testing.capture_logs() as logs,
        pytest.raises(DiscoveryError, match="llm/llama does not exist"),
    ):
        await source.fetch()
    assert any("InferencePool not found" in entry["event"] for entry in logs)
    await api.apply_inference_pool(inference_pool("llama", selector=LLAMA, ports=[PORT]))
    await until(source, lambda e: addresses(e) == ["10.0.0.1:8000"])
    await api.delete_inference_pool("llama")
    assert "llm/llama does not exist" in await until_error(source)


async def test_an_unusable_inference_pool_keeps_the_last_good_spec_and_says_why(
    api: FakeKubeApi, source: InferencePoolSource
) -> None:
    await api.apply_inference_pool(inference_pool("llama", selector=LLAMA, ports=[PORT]))
    await api.apply_pod(llama("10.0.0.1"))
    assert len(await source.fetch()) == 1
    await api.apply_inference_pool(inference_pool("llama", selector={}, ports=[PORT]))
    assert "has no selector" in await until_error(source)
    assert source.spec is not None
    assert source.spec.selector == (("app", "vllm-llama3"),)


async def test_the_api_down_is_an_error_and_a_pod_added_meanwhile_arrives(
    api: FakeKubeApi, source: InferencePoolSource
) -> None:
    await api.apply_inference_pool(
        inference_pool("llama", selector=LLAMA, ports=[PORT], failure_mode="FailOpen")
    )
    await api.apply_pod(llama("10.0.0.1"))
    await source.fetch()
    assert source.spec is not None
    assert source.spec.picker is not None
    assert source.spec.picker.failure_mode == "FailOpen"
    api.outage(True)
    await api.apply_pod(llama("10.0.0.2"))
    await api.expire()
    assert "503" in await until_error(source)
    api.outage(False)
    await until(source, lambda e: addresses(e) == ["10.0.0.1:8000", "10.0.0.2:8000"])


async def test_a_reload_keeps_the_watch_unless_the_inference_pool_settings_change(
    tmp_path: Path,
) -> None:
    def source_of(name: str) -> EndpointSource:
        pool = Pool.model_validate(
            {"name": "chat", "inference_pool": {"namespace": "llm", "name": name}}
        )
        return endpoint_source(pool, base=tmp_path)

    old = {"chat": source_of("llama")}
    assert carry_over(old=old, new={"chat": source_of("llama")})["chat"] is old["chat"]
    changed = carry_over(old=old, new={"chat": source_of("mistral")})["chat"]
    assert isinstance(changed, InferencePoolSource)
    assert changed.settings.name == "mistral"
    await close_sources([changed])
