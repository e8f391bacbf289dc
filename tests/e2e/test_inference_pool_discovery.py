"""The pods an InferencePool selects reach a real Envoy as the pool's endpoints, pushed by the
watches (the reconcile period is 30 s, longer than any wait here): a pod that turns Ready is
added, one that is not Ready never appears, a deleted one goes, a changed selector serves the
pods it now selects, and a watch told 410 Gone lists again without losing the change made
meanwhile.

The real control-plane process reaches, through a kubeconfig with a bearer token, a local HTTP
server that speaks the Kubernetes API's list/watch protocol for InferencePools
(``inference.networking.k8s.io/v1``) and pods with payloads shaped like the real API's:
tests/component/discovery/fake_kube_api.py. The pods' IPs are loopback addresses of their own
(127.0.0.2, .3, .4) with the InferencePool's one target port, where the echo backends listen.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from component.discovery.fake_kube_api import FakeKubeApi, inference_pool, pod
from e2e import inference_pools
from e2e.stack import EchoStack, envoy_holds, start_one_pool, traffic

WAIT_S = 5.0
"""Each change must reach Envoy well within this, far below the 30 s reconcile period."""
LLAMA = {"app": "vllm-llama3"}
HOSTS = inference_pools.pod_hosts(3)


@pytest.fixture
async def pods_stack(tmp_path: Path) -> AsyncIterator[EchoStack]:
    """Three echo backends, one per pod IP, all on the InferencePool's one target port."""
    made = inference_pools.pods_stack(tmp_path, pods=len(HOSTS))
    try:
        yield made
    finally:
        await made.close()


def target_port(stack: EchoStack) -> int:
    return stack.backends.ports[0]


def model_server(index: int, **state: Any) -> dict[str, Any]:
    """Pod ``vllm-<index>`` of the pool, serving on backend ``index``'s IP."""
    return pod(HOSTS[index], name=f"vllm-{index}", labels=LLAMA, **state)


async def start(stack: EchoStack, api: FakeKubeApi) -> None:
    kubeconfig = api.write_kubeconfig(stack.workdir / "kubeconfig")
    watch = {"namespace": "llm", "name": "llama", "kubeconfig": str(kubeconfig)}
    await start_one_pool(stack, {"inference_pool": {**watch, "relist_backoff_s": 0.1}})


async def envoy_sees(stack: EchoStack, want: list[int], *, what: str) -> None:
    """Wait until Envoy's cluster holds exactly backends ``want``, all HEALTHY."""
    expected = {stack.backends.address(i): "HEALTHY" for i in want}
    await envoy_holds(stack, expected, what=what, timeout=WAIT_S)


async def test_selected_pods_reach_envoy_as_they_turn_ready_and_go(
    pods_stack: EchoStack, api: FakeKubeApi
) -> None:
    stack = pods_stack
    await api.apply_inference_pool(
        inference_pool("llama", selector=LLAMA, ports=[target_port(stack)])
    )
    await api.apply_pod(model_server(0))
    await api.apply_pod(pod("127.0.0.9", name="other", labels={"app": "other"}))
    await start(stack, api)
    await envoy_sees(stack, [0], what="the listed pod")

    await api.apply_pod(model_server(1))
    await envoy_sees(stack, [0, 1], what="an added pod")

    await api.apply_pod(model_server(2, ready=False))
    await api.delete_pod("vllm-0")  # after the not-ready pod: once this shows, that one did
    await envoy_sees(stack, [1], what="a deleted pod, and no not-ready one")
    assert await traffic(stack, count=10) == {stack.backends.address(1): 10}

    await api.apply_pod(model_server(2))
    await envoy_sees(stack, [1, 2], what="a pod that turned ready")
    assert api.lists_of == {"InferencePool": 1, "Pod": 1}  # all of it through the watches


async def test_a_selector_change_and_410s_lose_no_pod(
    pods_stack: EchoStack, api: FakeKubeApi
) -> None:
    stack = pods_stack
    port = target_port(stack)
    await api.apply_inference_pool(inference_pool("llama", selector=LLAMA, ports=[port]))
    await api.apply_pod(model_server(0))
    await api.apply_pod(pod(HOSTS[2], name="canary", labels={"app": "canary"}))
    await start(stack, api)
    await envoy_sees(stack, [0], what="the listed pod")

    # 410 as an ERROR event on the open watches: the pod is never streamed.
    await api.apply_pod(model_server(1))
    await api.expire()
    await envoy_sees(stack, [0, 1], what="the pod behind a 410 event")

    # 410 as the HTTP status of the renewed watches.
    api.gone_as_http = True
    await api.delete_pod("vllm-0")
    await api.expire()
    await envoy_sees(stack, [1], what="the deletion behind an HTTP 410")
    assert api.lists_of["Pod"] >= 3

    await api.apply_inference_pool(
        inference_pool("llama", selector={"app": "canary"}, ports=[port])
    )
    await envoy_sees(stack, [2], what="the pods of the new selector")
