"""EndpointSlice events reach a real Envoy as EDS changes, pushed by the watch (the reconcile
period is 30 s, longer than any wait here), a watch that breaks or is told 410 Gone lists
again without losing the change made meanwhile, and a single-device pool refuses a pod whose
GPU annotation names another GPU, keeping the last good set in Envoy.

The real control-plane process reaches, through a kubeconfig with a bearer token, a local HTTP
server that speaks the Kubernetes API's EndpointSlice list/watch protocol with payloads shaped
exactly like the real API's (EndpointSliceList with metadata.resourceVersion; a watch stream of
newline-delimited {"type": "ADDED|MODIFIED|DELETED|BOOKMARK|ERROR", "object": ...}; 410 Gone as
an ERROR Status object with code 410 and as HTTP 410; v1 Pods by GET):
tests/component/discovery/fake_kube_api.py.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from component.discovery.fake_kube_api import FakeKubeApi, endpoint, endpoint_slice, pod
from e2e.stack import EchoStack, echo_stack, envoy_holds, eventually, start_one_pool, traffic

WAIT_S = 5.0
"""Each change must reach Envoy well within this, far below the 30 s reconcile period."""


def backend_slice(
    stack: EchoStack, index: int, *, pod_name: str | None = None, **conditions: Any
) -> dict[str, Any]:
    """Slice ``vllm-<index>`` holding backend ``index`` served by pod ``pod_name`` (default
    ``vllm-<index>``): each backend listens on its own port, and the controller puts endpoints
    with different ports in different slices."""
    host, port = stack.backends.address(index).rsplit(":", 1)
    return endpoint_slice(
        f"vllm-{index}",
        service="vllm",
        port=int(port),
        endpoints=[endpoint(host, pod=pod_name or f"vllm-{index}", **conditions)],
        labels={"xds-control.io/batch-slots": "16"},
    )


async def start(stack: EchoStack, api: FakeKubeApi, **pool: Any) -> None:
    kubeconfig = api.write_kubeconfig(stack.workdir / "kubeconfig")
    watch = {
        "namespace": "llm",
        "service": "vllm",
        "port": "http",
        "kubeconfig": str(kubeconfig),
        "relist_backoff_s": 0.1,
    }
    await start_one_pool(stack, {"kubernetes": watch, **pool})


async def envoy_sees(stack: EchoStack, want: dict[int, str], *, what: str) -> None:
    """Wait until Envoy's cluster holds exactly backends ``want`` with those EDS healths."""
    expected = {stack.backends.address(i): health for i, health in want.items()}
    await envoy_holds(stack, expected, what=what, timeout=WAIT_S)


async def test_add_not_ready_terminating_and_delete_reach_envoy(
    stack: EchoStack, api: FakeKubeApi
) -> None:
    await api.apply(backend_slice(stack, 0))
    await start(stack, api)
    await envoy_sees(stack, {0: "HEALTHY"}, what="the listed slice")

    await api.apply(backend_slice(stack, 1))
    await envoy_sees(stack, {0: "HEALTHY", 1: "HEALTHY"}, what="an added slice")

    await api.apply(backend_slice(stack, 1, ready=False))
    await envoy_sees(stack, {0: "HEALTHY", 1: "UNHEALTHY"}, what="a not-ready endpoint")

    await api.apply(backend_slice(stack, 1))
    await api.apply(backend_slice(stack, 0, ready=False, serving=True, terminating=True))
    await envoy_sees(stack, {0: "DRAINING", 1: "HEALTHY"}, what="a terminating endpoint")
    answered = await traffic(stack, count=20)
    assert answered == {stack.backends.address(1): 20}  # a draining pod gets no new request

    await api.delete("vllm-0")
    await envoy_sees(stack, {1: "HEALTHY"}, what="a deleted slice")
    assert api.lists == 1  # all of it through the watch


async def test_a_broken_watch_or_410_lists_again_and_loses_no_event(
    stack: EchoStack, api: FakeKubeApi
) -> None:
    await api.apply(backend_slice(stack, 0))
    await start(stack, api)
    await envoy_sees(stack, {0: "HEALTHY"}, what="the listed slice")

    # 410 as an ERROR event on the open watch: the change itself is never streamed.
    await api.apply_unseen(backend_slice(stack, 1))
    await envoy_sees(stack, {0: "HEALTHY", 1: "HEALTHY"}, what="the change behind a 410 event")

    # 410 as the HTTP status of the renewed watch.
    api.gone_as_http = True
    await api.apply_unseen(backend_slice(stack, 1, ready=False))
    await envoy_sees(stack, {0: "HEALTHY", 1: "UNHEALTHY"}, what="the change behind an HTTP 410")

    # The watch is cut and the API server is down while the endpoint turns ready again.
    api.outage(True)
    await api.apply_unseen(backend_slice(stack, 1))

    async def error_shown() -> bool:
        status = await stack.control_plane.get_json("/v1/status")
        return "chat" in status.get("discovery_errors", {})

    await eventually(error_shown, timeout=WAIT_S, what="the outage in /v1/status")
    hosts = await stack.envoy_hosts()
    assert hosts[stack.backends.address(1)].health == "UNHEALTHY"  # the last good set is served
    api.outage(False)
    await envoy_sees(stack, {0: "HEALTHY", 1: "HEALTHY"}, what="the change during the outage")
    assert api.lists >= 4


@pytest.fixture
async def stack3(tmp_path: Path) -> AsyncIterator[EchoStack]:
    """Three echo backends: two MIG slices of one GPU and a stray."""
    made = echo_stack(tmp_path, backends=3)
    try:
        yield made
    finally:
        await made.close()


def on_gpu(name: str, uuid: str, instance: str) -> dict[str, Any]:
    """Pod ``name`` with its device annotations, valued as the DCGM exporter labels them."""
    annotations = {"xds-control.io/gpu-uuid": uuid, "xds-control.io/mig-instance": instance}
    return pod("127.0.0.1", name=name, annotations=annotations)


async def test_a_single_device_pool_refuses_a_pod_on_another_gpu_and_keeps_serving(
    stack3: EchoStack, api: FakeKubeApi
) -> None:
    stack = stack3
    for name, uuid, instance in [
        ("vllm-0", "GPU-a", "1"),
        ("vllm-1", "GPU-a", "2"),
        ("vllm-2", "GPU-b", "1"),
        ("vllm-2-moved", "GPU-a", "3"),
    ]:
        api.put_pod(on_gpu(name, uuid, instance))
    await api.apply(backend_slice(stack, 0))
    await api.apply(backend_slice(stack, 1))
    await start(stack, api, single_device=True)
    await envoy_sees(stack, {0: "HEALTHY", 1: "HEALTHY"}, what="two slices of GPU-a")

    await api.apply(backend_slice(stack, 2))  # a pod on GPU-b joins the Service
    address = stack.backends.address
    named = f"GPU-a: {', '.join(sorted([address(0), address(1)]))}; GPU-b: {address(2)}"

    async def refused() -> bool:
        status = await stack.control_plane.get_json("/v1/status")
        return named in status.get("discovery_errors", {}).get("chat", "")

    await eventually(refused, timeout=WAIT_S, what="the mixed GPUs named in /v1/status")
    await envoy_sees(stack, {0: "HEALTHY", 1: "HEALTHY"}, what="the last good set kept")

    await api.delete("vllm-2")  # the stray goes; a pod on GPU-a takes its place
    await api.apply(backend_slice(stack, 2, pod_name="vllm-2-moved"))
    await envoy_sees(stack, {0: "HEALTHY", 1: "HEALTHY", 2: "HEALTHY"}, what="updates again")
    status = await stack.control_plane.get_json("/v1/status")
    assert "chat" not in status.get("discovery_errors", {})
