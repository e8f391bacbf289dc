"""KubernetesSource reads the pod behind each EndpointSlice endpoint from a local HTTP server
that speaks the API's protocol with payloads shaped exactly like the real API's (a v1 Pod for
GET /api/v1/namespaces/{ns}/pods/{name}; 403 Forbidden and 404 NotFound as Status bodies): see
fake_kube_api.py. Pod labels override the Service's, pod annotations give the GPU, a 403 keeps
the Service's labels and the watch, and a single-device pool refuses a pod on another GPU."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

import structlog

from component.discovery.fake_kube_api import FakeKubeApi, endpoint, endpoint_slice, pod
from xds_control.cache import MemorySnapshotCache
from xds_control.config import load_config
from xds_control.config.devices import Device
from xds_control.config.discovery import KubernetesDiscovery
from xds_control.control import ControlLoop
from xds_control.discovery import Endpoint, close_sources
from xds_control.discovery.kubernetes.slice_source import KubernetesSource

PORT = 8000
SERVICE_LABELS = {"xds-control.io/gpu-class": "a100-80gb", "xds-control.io/batch-slots": "64"}


def gpu(uuid: str, instance: str) -> dict[str, str]:
    """A pod's device annotations, valued as the DCGM exporter labels its series."""
    return {
        "xds-control.io/gpu-uuid": uuid,
        "xds-control.io/mig-instance": instance,
        "xds-control.io/mig-profile": "3g.40gb",
    }


def the_slice(*ips: str) -> dict[str, object]:
    return endpoint_slice(
        "vllm-a",
        service="vllm",
        port=PORT,
        labels=SERVICE_LABELS,
        endpoints=[endpoint(ip) for ip in ips],
    )


def settings(api: FakeKubeApi, tmp_path: Path) -> KubernetesDiscovery:
    return KubernetesDiscovery(
        namespace="llm",
        service="vllm",
        kubeconfig=api.write_kubeconfig(tmp_path / "kubeconfig"),
        watch_timeout_s=1,
        relist_backoff_s=0.05,
    )


async def until(
    fetch: Callable[[], object], check: Callable[[tuple[Endpoint, ...]], bool]
) -> tuple[Endpoint, ...]:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        got = await fetch()  # type: ignore[misc]
        if check(got):
            return got  # type: ignore[no-any-return]
        await asyncio.sleep(0.02)
    raise AssertionError(f"timed out; the source has {got}")


async def test_pod_labels_override_the_service_and_annotations_give_the_device(
    api: FakeKubeApi, tmp_path: Path
) -> None:
    api.put_pod(
        pod("10.0.0.1", labels={"xds-control.io/batch-slots": "32"}, annotations=gpu("GPU-a", "1"))
    )
    api.put_pod(pod("10.0.0.2", labels={"xds-control.io/model": "llama-3-8b"}))
    await api.apply(the_slice("10.0.0.1", "10.0.0.2"))
    source = KubernetesSource(settings(api, tmp_path), pool="chat", wake=lambda: None)
    try:
        first, second = await source.fetch()
        assert (first.batch_slots, first.gpu_class, first.device) == (
            32,  # the pod's label wins
            "a100-80gb",  # the Service's, where the pod says nothing
            Device(gpu_uuid="GPU-a", mig_instance="1", mig_profile="3g.40gb"),
        )
        assert (second.batch_slots, second.model, second.device) == (64, "llama-3-8b", None)

        api.put_pod(pod("10.0.0.3", annotations=gpu("GPU-a", "2")))
        await api.apply(the_slice("10.0.0.1", "10.0.0.2", "10.0.0.3"))
        got = await until(source.fetch, lambda e: len(e) == 3)
        assert got[2].device == Device(gpu_uuid="GPU-a", mig_instance="2", mig_profile="3g.40gb")
    finally:
        await source.close()
    assert sorted(api.pod_reads) == ["vllm-10-0-0-1", "vllm-10-0-0-2", "vllm-10-0-0-3"]


async def test_a_403_on_pods_is_logged_naming_the_verb_and_the_slices_still_flow(
    api: FakeKubeApi, tmp_path: Path
) -> None:
    api.forbid_pods = True
    api.put_pod(pod("10.0.0.1", annotations=gpu("GPU-a", "1")))
    await api.apply(the_slice("10.0.0.1"))
    source = KubernetesSource(settings(api, tmp_path), pool="chat", wake=lambda: None)
    try:
        with structlog.testing.capture_logs() as logs:
            (only,) = await source.fetch()
        assert (only.batch_slots, only.device) == (64, None)
        (refused,) = [e for e in logs if "cannot read pods" in e["event"]]
        assert "verb 'get' on resource 'pods'" in refused["event"]
        assert 'cannot get resource "pods"' in refused["error"]

        await api.apply(the_slice("10.0.0.1", "10.0.0.2"))
        await until(source.fetch, lambda e: len(e) == 2)  # the watch goes on
    finally:
        await source.close()
    assert api.pod_reads == ["vllm-10-0-0-1"]  # paused after the 403, not asked per event


CONFIG = """\
pools:
  - name: mig
    single_device: true
    kubernetes: {{namespace: llm, service: vllm, kubeconfig: {kubeconfig}, relist_backoff_s: 0.05}}
listeners:
  - name: gw
    address: 127.0.0.1:10000
    routes: [{{name: all, pool: mig}}]
"""


async def test_a_single_device_pool_refuses_a_pod_on_another_gpu_naming_the_endpoints(
    api: FakeKubeApi, tmp_path: Path
) -> None:
    api.put_pod(pod("10.0.0.1", annotations=gpu("GPU-a", "1")))
    api.put_pod(pod("10.0.0.2", annotations=gpu("GPU-a", "2")))
    api.put_pod(pod("10.0.0.3", annotations=gpu("GPU-b", "1")))
    await api.apply(the_slice("10.0.0.1", "10.0.0.2"))
    path = tmp_path / "config.yaml"
    path.write_text(CONFIG.format(kubeconfig=api.write_kubeconfig(tmp_path / "kubeconfig")))
    loop = ControlLoop(config=load_config(path), config_path=path, cache=MemorySnapshotCache())
    try:
        await loop.step()
        good = [e.address for e in loop.state.endpoints["mig"]]
        assert good == ["10.0.0.1:8000", "10.0.0.2:8000"]

        await api.apply(the_slice("10.0.0.1", "10.0.0.2", "10.0.0.3"))
        await until_error(loop)
        assert [e.address for e in loop.state.endpoints["mig"]] == good  # the last good set
        error = loop.state.discovery_errors["mig"]
        assert "GPU-a: 10.0.0.1:8000, 10.0.0.2:8000; GPU-b: 10.0.0.3:8000" in error

        await api.apply(the_slice("10.0.0.1", "10.0.0.2"))
        deadline = time.monotonic() + 5
        while "mig" in loop.state.discovery_errors and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
            await loop.step()
        assert "mig" not in loop.state.discovery_errors
    finally:
        await close_sources(loop._sources.values())


async def until_error(loop: ControlLoop) -> None:
    deadline = time.monotonic() + 5
    while "mig" not in loop.state.discovery_errors:
        assert time.monotonic() < deadline, "the mixed set was never refused"
        await asyncio.sleep(0.02)
        await loop.step()


async def test_a_pod_not_read_is_tried_again_when_the_watch_is_renewed(
    api: FakeKubeApi, tmp_path: Path
) -> None:
    await api.apply(the_slice("10.0.0.1"))  # its pod cannot be read yet (404)
    source = KubernetesSource(settings(api, tmp_path), pool="chat", wake=lambda: None)
    try:
        (only,) = await source.fetch()
        assert only.device is None
        api.put_pod(pod("10.0.0.1", annotations=gpu("GPU-a", "1")))
        # No slice event: the renewed watch (every second here) reads it.
        await until(source.fetch, lambda e: e[0].device is not None)
    finally:
        await source.close()
    assert api.pod_reads.count("vllm-10-0-0-1") >= 2
