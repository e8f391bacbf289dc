"""InferencePoolCatalog against the local API server (fake_kube_api.py): the usable
InferencePools of a namespace, listed and then followed by one watch, as they are created and
deleted; a bad object is left out with one log line naming its field, and a bad edit of one
already served keeps it (its own source keeps its last good spec)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import structlog

from component.discovery.fake_kube_api import FakeKubeApi, inference_pool
from component.discovery.polling import until
from xds_control.config.inference_pools import InferencePoolsDiscovery
from xds_control.discovery import InferencePoolCatalog


@pytest.fixture
async def catalog(api: FakeKubeApi, tmp_path: Path) -> AsyncIterator[InferencePoolCatalog]:
    settings = InferencePoolsDiscovery(
        namespace="llm",
        kubeconfig=api.write_kubeconfig(tmp_path / "kubeconfig"),
        watch_timeout_s=1,
        relist_backoff_s=0.05,
    )
    made = InferencePoolCatalog(settings, wake=lambda: None)
    yield made
    await made.close()


def pool(name: str, **spec: Any) -> dict[str, Any]:
    made = inference_pool(name, selector={"app": name}, ports=[8000])
    made["spec"].update(spec)
    return made


async def test_pools_created_and_deleted_are_followed_by_one_watch(
    api: FakeKubeApi, catalog: InferencePoolCatalog
) -> None:
    await api.apply_inference_pool(pool("llama"))
    assert await catalog.fetch() == ("llama",)
    await api.apply_inference_pool(pool("qwen"))
    await until(catalog, lambda n: n == ("llama", "qwen"))
    await api.delete_inference_pool("llama")
    await until(catalog, lambda n: n == ("qwen",))
    assert api.lists_of == {"InferencePool": 1}


async def test_a_bad_object_is_left_out_with_one_line_naming_its_field(
    api: FakeKubeApi, catalog: InferencePoolCatalog
) -> None:
    await api.apply_inference_pool(pool("llama"))
    await api.apply_inference_pool(pool("no-selector", selector={}))
    with structlog.testing.capture_logs() as logs:
        assert await catalog.fetch() == ("llama",)
        await api.apply_inference_pool(pool("qwen"))  # events after it: still one line
        await until(catalog, lambda n: n == ("llama", "qwen"))
    [line] = [entry for entry in logs if entry["event"] == "InferencePool left out"]
    assert line["inference_pool"] == "no-selector"
    assert "selector.matchLabels" in line["error"]


async def test_a_bad_edit_of_a_served_pool_keeps_it(
    api: FakeKubeApi, catalog: InferencePoolCatalog
) -> None:
    await api.apply_inference_pool(pool("llama"))
    assert await catalog.fetch() == ("llama",)
    await api.apply_inference_pool(pool("llama", targetPorts=[]))
    await api.apply_inference_pool(pool("qwen"))  # once this shows, the edit was seen
    assert await until(catalog, lambda n: "qwen" in n) == ("llama", "qwen")


async def test_a_name_that_cannot_name_a_pool_is_left_out(
    api: FakeKubeApi, catalog: InferencePoolCatalog
) -> None:
    long = "a" * 64
    await api.apply_inference_pool(pool(long))
    await api.apply_inference_pool(pool("llama"))
    with structlog.testing.capture_logs() as logs:
        assert await catalog.fetch() == ("llama",)
    [line] = [entry for entry in logs if entry["event"] == "InferencePool left out"]
    assert line["error"].startswith("metadata.name")
