"""Cases of the Gateway API Inference Extension's conformance suite (``conformance/tests``)
that need no cluster, each named after the case it follows.

GatewayFollowingEPPRouting and GatewayDestinationEndpointServed run against a real Envoy
configured as such a gateway (``xds_lab.harness.gie_gateway``) with the suite's test picker
(``xds_lab.harness.header_picker``: it names the endpoints a request lists in
``test-epp-endpoint-selection`` and says in ``x-conformance-test-served-endpoint`` which
endpoint the gateway reported as served). EppUnAvailableFailOpen is ``test_gie_gateway.py``'s
strict expected failure (Envoy 1.40 does not fail open in full duplex).

GatewayDestinationEndpointServed again and GatewayWeightedAcrossTwoInferencePools run against
Envoy as xds-control configures it from InferencePools (``e2e.inference_pools``: the pools made
by ``inference_pools``, the suite's HTTPRoutes as config routes, our own picker, which counts
where each request served); so does EppUnAvailableFailClose, a case of our own: a FailClose
pool refusing while its picker is gone."""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import pytest

from component.discovery.fake_kube_api import FakeKubeApi
from e2e.inference_pools import add_pool, envoy_serves, pods_stack, post, start_gateway
from e2e.stack import EchoStack
from e2e.test_picker_served import served_count
from xds_control.xds.picker import SERVED_KEY
from xds_lab.harness.backends import BACKEND_HEADER, PICKED_HEADER, EchoBackends
from xds_lab.harness.gie_gateway import gie_gateway_envoy
from xds_lab.harness.header_picker import SELECTION_HEADER, SERVED_RESULT_HEADER, HeaderPicker
from xds_lab.harness.ports import free_port

BODY = b'{"model": "conformance-fake-model", "prompt": "What are the advantages of tea?"}'
PODS = 3
FAIL_CLOSED_STATUS = 500
"""What Envoy 1.40 answers for a FailClose pool whose picker is gone (measured)."""
POOL_PODS = {"fail-close": [0, 1], "fail-open": [2, 3]}


@dataclass
class Gateway:
    url: str
    pods: list[str]


@pytest.fixture
async def gateway(tmp_path: Path) -> AsyncIterator[Gateway]:
    backends = EchoBackends(ports=[free_port() for _ in range(PODS)])
    picker = HeaderPicker(address=f"127.0.0.1:{free_port()}")
    pods = [backends.address(i) for i in range(PODS)]
    pool = picker.pool(pods)
    envoy, port = gie_gateway_envoy(
        workdir=tmp_path / "gateway",
        node_id="conformance",
        pool=pool,
        endpoints=pods,
        fail_open=False,
    )
    await backends.start()
    await picker.start()
    try:
        await envoy.start()
        await envoy.wait_live()
        yield Gateway(url=f"http://127.0.0.1:{port}/primary-gateway-test", pods=pods)
    finally:
        await envoy.stop()
        await picker.stop()
        await backends.stop()


async def _served_by(session: aiohttp.ClientSession, url: str, listed: list[str]) -> str:
    """The pod that answered; the gateway told the picker so (the test picker's header)."""
    headers = {SELECTION_HEADER: ",".join(listed)}
    async with session.post(url, data=BODY, headers=headers) as response:
        await response.read()
        assert response.status == 200, response.status
        pod = response.headers[BACKEND_HEADER]
        assert response.headers.get(SERVED_RESULT_HEADER) == pod, dict(response.headers)
        assert SERVED_KEY not in response.headers  # the address was for the picker only
        return pod


@pytest.mark.parametrize(
    "designated",
    [[2], [0, 1], [0, 1, 2]],
    ids=["a-single-designated-pod", "two-designated-pods", "all-available-pods"],
)
async def test_gateway_following_epp_routing(gateway: Gateway, designated: list[int]) -> None:
    listed = [gateway.pods[i] for i in designated]
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session:
        for pod in gateway.pods:  # each pod answers when it alone is named
            assert await _served_by(session, gateway.url, [pod]) == pod
        # 100 requests, 10 at a time, as the suite sends them: every one within the list.
        limit = asyncio.Semaphore(10)

        async def one() -> str:
            async with limit:
                return await _served_by(session, gateway.url, listed)

        served = await asyncio.gather(*(one() for _ in range(100)))
    assert set(served) <= set(listed), sorted(set(served))


async def test_gateway_destination_endpoint_served(gateway: Gateway) -> None:
    """Each pod named alone serves, and the test picker, told by the gateway which endpoint
    served, says the same pod in the suite's result header (``_served_by`` checks it)."""
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session:
        for pod in gateway.pods:
            assert await _served_by(session, gateway.url, [pod]) == pod


# Envoy as xds-control configures it from InferencePools (e2e.inference_pools).


async def test_epp_unavailable_fail_close(tmp_path: Path, api: FakeKubeApi) -> None:
    """Our own case beside EppUnAvailableFailOpen: one gateway, a FailClose pool and a FailOpen
    pool from their InferencePools, the picker killed. The FailClose pool refuses every request
    with the status Envoy gives; the FailOpen one keeps serving its own pods (our Envoy config
    buffers the body, so its fail-open works, unlike the full-duplex gateway's)."""
    stack = pods_stack(tmp_path, pods=4)
    try:
        await add_pool(api, stack, "fail-close", pods=[0, 1])  # failureMode unset: FailClose
        await add_pool(api, stack, "fail-open", pods=[2, 3], failure_mode="FailOpen")
        await start_gateway(
            stack,
            api,
            pools=list(POOL_PODS),
            routes=[
                {"name": "close", "match": {"prefix": "/fail-close"}, "pool": "fail-close"},
                {"name": "open", "match": {"prefix": "/fail-open"}, "pool": "fail-open"},
            ],
        )
        await envoy_serves(stack, "fail-close", [0, 1], what="the FailClose pool")
        await envoy_serves(stack, "fail-open", [2, 3], what="the FailOpen pool")
        pods = {name: [stack.backends.address(i) for i in at] for name, at in POOL_PODS.items()}
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session:
            for name in pods:  # both served, by the picker, while it is up
                served = [await post(session, f"{stack.url}/{name}") for _ in range(10)]
                assert set(served) <= set(pods[name]), served
            stack.control_plane.process.kill()  # SIGKILL, the picker with it; Envoy keeps
            await stack.control_plane.process.stop()  # its config (this waits for the exit)
            refused = [await post(session, f"{stack.url}/fail-close") for _ in range(10)]
            kept = [await post(session, f"{stack.url}/fail-open") for _ in range(10)]
        assert refused == [f"status:{FAIL_CLOSED_STATUS}"] * 10, refused
        assert set(kept) <= set(pods["fail-open"]), kept
    finally:
        await stack.close()


PRIMARY, SECONDARY = "primary-inference-pool", "secondary-inference-pool"
"""The suite's two InferencePools, three model-server pods each (its base.yaml)."""


@pytest.fixture
async def two_pools(tmp_path: Path, api: FakeKubeApi) -> AsyncIterator[EchoStack]:
    """Both pools made from their InferencePools (``inference_pools``), behind the suite's two
    HTTPRoutes: one to the primary pool, one weighted 70 : 30 across both."""
    stack = pods_stack(tmp_path, pods=6)
    try:
        await add_pool(api, stack, PRIMARY, pods=[0, 1, 2])
        await add_pool(api, stack, SECONDARY, pods=[3, 4, 5])
        await start_gateway(
            stack,
            api,
            routes=[
                {
                    "name": "httproute-for-destination-endpoint-served",
                    "match": {"prefix": "/destination-endpoint-served-test"},
                    "pool": PRIMARY,
                },
                {
                    "name": "httproute-weighted-two-pools",
                    "match": {"prefix": "/weighted-two-pools-test"},
                    "pools": [{"name": PRIMARY, "weight": 70}, {"name": SECONDARY, "weight": 30}],
                },
            ],
        )
        await envoy_serves(stack, PRIMARY, [0, 1, 2], what="the primary pool")
        await envoy_serves(stack, SECONDARY, [3, 4, 5], what="the secondary pool")
        yield stack
    finally:
        await stack.close()


async def test_gateway_destination_endpoint_served_through_inference_pools(
    two_pools: EchoStack,
) -> None:
    """Each request is served by the pod the picker selected (what the backend got in
    ``x-gateway-destination-endpoint``, best first), and Envoy reports that pod back to the
    picker, which counts each one served where it was picked."""
    stack = two_pools
    url = f"{stack.url}/destination-endpoint-served-test"
    served: list[tuple[str, str]] = []
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session:
        for n in range(30):  # distinct prompts: the picker spreads them over the pool
            body = json.dumps({"model": "conformance-fake-model", "prompt": f"Critic {n}: SF"})
            async with session.post(url, data=body) as response:
                await response.read()
                assert response.status == 200, response.status
                picked = response.headers[PICKED_HEADER].split(",")
                served.append((response.headers[BACKEND_HEADER], picked[0]))
    pods = {stack.backends.address(i) for i in range(3)}
    assert all(server == picked for server, picked in served), served
    assert len({server for server, _ in served}) >= 2, served  # more than one pod was selected
    assert {server for server, _ in served} <= pods
    metrics = await stack.control_plane.metrics()
    assert served_count(metrics, "picked", pool=PRIMARY) == len(served), metrics


async def test_gateway_weighted_across_two_inference_pools(two_pools: EchoStack) -> None:
    """200 requests, 5 at a time, each listing every pod of both pools in the test picker's
    header as the suite does (our picker ignores it): each is served by the pod the chosen
    pool's picker selected, a pod of one of the pools, and the primary pool's share is within
    max(0.10, 4.5 sigma) of 70%."""
    stack = two_pools
    address = stack.backends.address
    primary, secondary = {address(i) for i in range(3)}, {address(i) for i in range(3, 6)}
    headers = {SELECTION_HEADER: ",".join(sorted(primary | secondary))}
    url = f"{stack.url}/weighted-two-pools-test"
    limit = asyncio.Semaphore(5)
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session:

        async def one(n: int) -> tuple[str, str]:
            body = json.dumps({"model": "conformance-fake-model", "prompt": f"Critic {n}: SF"})
            async with limit, session.post(url, data=body, headers=headers) as response:
                await response.read()
                if response.status != 200:
                    return f"status:{response.status}", ""
                picked = response.headers[PICKED_HEADER].split(",")[0]
                return response.headers[BACKEND_HEADER], picked

        answers = await asyncio.gather(*(one(n) for n in range(200)))
    served = [server for server, _ in answers]
    assert set(served) <= primary | secondary, sorted(set(served))
    assert all(server == picked for server, picked in answers), answers
    share = sum(server in primary for server in served) / len(served)
    tolerance = max(0.10, 4.5 * math.sqrt(0.7 * 0.3 / len(served)))
    assert abs(share - 0.7) <= tolerance, share
