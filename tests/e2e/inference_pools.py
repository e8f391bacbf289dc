"""A gateway that xds-control configures from InferencePools: the local list/watch API server
(tests/component/discovery/fake_kube_api.py) holds the InferencePools and their pods, the
config names each InferencePool as a pool (``inference_pool``) or takes every one there is
(``inference_pools``), always with the control plane's picker, and holds the routes to them;
one real Envoy serves them.

Each pod is an echo backend on a loopback address of its own (127.0.0.2 and up), all on one
target port, so the backend that answers names the pod that served.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import aiohttp

from component.discovery.fake_kube_api import FakeKubeApi, inference_pool, pod
from e2e.stack import EchoStack, eventually
from xds_lab.harness.backends import BACKEND_HEADER, EchoBackends
from xds_lab.harness.ports import free_port
from xds_lab.harness.stack import Stack

WAIT_S = 10.0
"""Each change must reach Envoy well within this (the reconcile period is 30 s)."""
BODY = b'{"model": "conformance-fake-model", "prompt": "Write as if you were a critic: SF"}'


def pod_hosts(count: int) -> list[str]:
    """The loopback addresses of ``count`` pods."""
    return [f"127.0.0.{2 + i}" for i in range(count)]


def pods_stack(workdir: Path, *, pods: int) -> EchoStack:
    """``pods`` echo backends, one per pod address, all on one port (the target port)."""
    port = free_port()
    return Stack(workdir=workdir, backends=EchoBackends(ports=[port] * pods, hosts=pod_hosts(pods)))


async def start_gateway(
    stack: EchoStack,
    api: FakeKubeApi,
    *,
    routes: Sequence[Mapping[str, Any]],
    pools: Sequence[str] | None = None,
) -> None:
    """The control plane over ``api``'s namespace and a listener with ``routes``; one Envoy.
    Its pools are the InferencePools named in ``pools``, each a pool of the config
    (``inference_pool``), or with ``pools`` unset every InferencePool there is
    (``inference_pools``). Every pool asks the control plane's picker, whose answers are
    waited for a second: a loaded machine must not fail open by accident."""
    kubeconfig = str(api.write_kubeconfig(stack.workdir / "kubeconfig"))
    watch = {"namespace": api.namespace, "kubeconfig": kubeconfig, "relist_backoff_s": 0.1}
    picker = {"address": f"127.0.0.1:{free_port()}", "message_timeout_ms": 1000}
    config: dict[str, Any] = {
        "listeners": [
            {
                "name": "gateway",
                "address": f"127.0.0.1:{stack.listener_port}",
                "routes": [dict(r) for r in routes],
            }
        ],
        "signals": {"reconcile_period_s": 30},
    }
    if pools is None:
        config["inference_pools"] = {**watch, "picker": picker}
    else:
        config["pools"] = [
            {"name": name, "inference_pool": {**watch, "name": name}, "picker": picker}
            for name in pools
        ]
    await stack.start(config)


async def add_pool(
    api: FakeKubeApi,
    stack: EchoStack,
    name: str,
    *,
    pods: Sequence[int],
    failure_mode: str | None = None,
) -> None:
    """InferencePool ``name`` selecting ``app: name``, and a Ready pod of it on each of
    backends ``pods``."""
    port = stack.backends.ports[0]
    labels = {"app": name}
    pool = inference_pool(name, selector=labels, ports=[port], failure_mode=failure_mode)
    await api.apply_inference_pool(pool)
    for index in pods:
        host = stack.backends.hosts[index]
        await api.apply_pod(pod(host, name=f"{name}-{index}", labels=labels))


async def envoy_serves(stack: EchoStack, pool: str, want: Sequence[int], *, what: str) -> None:
    """Wait until Envoy has cluster ``pool`` with exactly backends ``want``, all HEALTHY
    (``want`` empty: until it has no such cluster)."""
    expected = {stack.backends.address(i): "HEALTHY" for i in want}

    async def check() -> bool:
        clusters = await stack.envoy.admin_get("/clusters")
        if not want:
            return not any(line.startswith(f"{pool}::") for line in clusters.splitlines())
        hosts = await stack.envoy_hosts(pool=pool)
        return {name: host.health for name, host in hosts.items()} == expected

    await eventually(check, timeout=WAIT_S, what=what)


async def post(
    session: aiohttp.ClientSession, url: str, *, headers: Mapping[str, str] | None = None
) -> str:
    """The backend that served ``BODY`` posted to ``url``, or ``status:N`` when not 200."""
    async with session.post(url, data=BODY, headers=dict(headers or {})) as response:
        await response.read()
        if response.status != 200:
            return f"status:{response.status}"
        return response.headers[BACKEND_HEADER]
