"""A real Envoy configured as a gateway of the Gateway API Inference Extension configures it
(``xds_lab.harness.gie_gateway``: the Endpoint Picker Protocol alone, no pool named, the body
FULL_DUPLEX_STREAMED) in front of ``xds-control serve``'s picker: requests land where the picker
says with their bodies intact, and the endpoint that served reaches the picker (the protocol's
``envoy.lb`` metadata on the response path); with the picker gone, a FailOpen pool keeps
serving and a FailClose pool refuses with the status Envoy 1.40 gives. With the response's
body in full duplex too, every answer reaches the client whole and a token budget is charged
what the answers' usage said."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from e2e.engine_stack import sim_stack
from e2e.stack import EchoStack, echo_stack, eventually
from e2e.test_picker import WEIGHTS, _body, first_choice
from e2e.test_picker_served import served_count
from xds_control.config import Config
from xds_control.picker.score import Candidate
from xds_lab.harness.backends import BACKEND_HEADER, BODY_HEADER
from xds_lab.harness.envoy import EnvoyProcess
from xds_lab.harness.gie_gateway import gie_gateway_envoy
from xds_lab.harness.pool_config import one_pool_config
from xds_lab.harness.ports import free_port

FAIL_CLOSED_STATUS = 500
"""What Envoy 1.40 answers when a FailClose picker cannot be reached (``failure_mode_allow``
false: the ``ext_proc`` filter's gRPC error becomes a 500 to the client)."""


async def _post(session: aiohttp.ClientSession, url: str, body: bytes) -> tuple[str, int]:
    """The backend that answered and the body bytes it got, or the status as ``status:N``."""
    async with session.post(url, data=body) as response:
        await response.read()
        if response.status != 200:
            return f"status:{response.status}", 0
        return response.headers[BACKEND_HEADER], int(response.headers[BODY_HEADER])


async def _gateway(
    stack: EchoStack, config: Config, *, name: str, fail_open: bool
) -> tuple[EnvoyProcess, str]:
    envoy, port = gie_gateway_envoy(
        workdir=stack.workdir / name,
        node_id=name,
        pool=config.pools[0],
        endpoints=[stack.backends.address(i) for i in range(len(WEIGHTS))],
        fail_open=fail_open,
    )
    await envoy.start()
    await envoy.wait_live()
    return envoy, f"http://127.0.0.1:{port}/v1/chat/completions"


class Gateways:
    """The control plane with its picker (no Envoy of ours), and two gateways in front of it:
    one for a FailOpen pool, one for a FailClose pool."""

    def __init__(self, stack: EchoStack) -> None:
        self.stack = stack
        self.envoys: list[EnvoyProcess] = []
        self.urls: dict[str, str] = {}

    async def start(self) -> None:
        backends = self.stack.backends
        data = one_pool_config(
            endpoints=[
                {"address": backends.address(i), "weight": w} for i, w in enumerate(WEIGHTS)
            ],
            listener_port=self.stack.listener_port,
            # A gateway waits a second for the picker (ours: 50 ms, failing open).
            pool={"picker": {"address": f"127.0.0.1:{free_port()}", "message_timeout_ms": 1000}},
        )
        await self.stack.start(data, envoys=0)
        config = Config.model_validate(data)
        for name, fail_open in (("FailOpen", True), ("FailClose", False)):
            envoy, url = await _gateway(self.stack, config, name=name, fail_open=fail_open)
            self.envoys.append(envoy)
            self.urls[name] = url

    def picked(self, prompt: str) -> str:
        """What the picker names for a prefix it has not seen: its rendezvous choice."""
        backends = self.stack.backends
        candidates = [
            Candidate(address=backends.address(i), weight=w, healthy=True)
            for i, w in enumerate(WEIGHTS)
        ]
        return first_choice(candidates, prompt)

    def prompts(self) -> list[str]:
        """Eight prompts, not all of them the heavy server's."""
        named = (f"You are assistant number {n}." for n in range(1000))
        prompts = [next(named) for _ in range(7)]
        light = {self.stack.backends.address(i) for i in range(3)}
        return [*prompts, next(p for p in named if self.picked(p) in light)]

    async def close(self) -> None:
        for envoy in self.envoys:
            await envoy.stop()
        await self.stack.close()


@pytest.fixture
async def gateways(tmp_path: Path) -> AsyncIterator[Gateways]:
    made = Gateways(echo_stack(tmp_path, backends=len(WEIGHTS)))
    try:
        await made.start()
        yield made
    finally:
        await made.close()


async def test_a_gateway_lands_where_the_picker_says_and_a_fail_close_pool_refuses_without_it(
    gateways: Gateways,
) -> None:
    prompts = gateways.prompts()
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session:
        for url in gateways.urls.values():
            served = {p: [await _post(session, url, _body(p)) for _ in range(2)] for p in prompts}
            # Where the picker said, and the whole body arrived (the picker gave it back).
            assert served == {p: [(gateways.picked(p), len(_body(p)))] * 2 for p in prompts}
        # Each response's served endpoint reached the picker, in the protocol's metadata.
        metrics = await gateways.stack.control_plane.metrics()
        sent = 2 * len(prompts) * len(gateways.urls)
        assert served_count(metrics, "picked") == sent, metrics
        assert served_count(metrics, "elsewhere") == 0
        await gateways.stack.control_plane.stop()  # the picker with it
        refused = [await _post(session, gateways.urls["FailClose"], _body(p)) for p in prompts]
    assert refused == [(f"status:{FAIL_CLOSED_STATUS}", 0)] * len(prompts), refused


@pytest.mark.xfail(
    strict=True,
    reason="Envoy 1.40 fails open in FULL_DUPLEX_STREAMED only until the first body chunk has "
    "gone to the processor, and in full duplex the body goes at once: a FailOpen pool whose "
    "picker is down answers 500 (failure_mode_allowed stays 0)",
)
async def test_a_fail_open_pool_keeps_serving_when_its_picker_is_gone(gateways: Gateways) -> None:
    prompts = gateways.prompts()
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session:
        await gateways.stack.control_plane.stop()
        served = [await _post(session, gateways.urls["FailOpen"], _body(p)) for p in prompts]
    assert all(server in gateways.stack.backends.addresses for server, _ in served), served


async def test_a_gateway_s_requests_are_held_while_the_pool_has_no_server(tmp_path: Path) -> None:
    """Flow control in the protocol's full-duplex mode: a request waits while the pool has no
    ready server and is served by the one that arrives within the wait; past the wait it is
    refused 503 with the reason."""
    stack = echo_stack(tmp_path, backends=len(WEIGHTS))
    picker = f"127.0.0.1:{free_port()}"

    def config(servers: int) -> dict[str, Any]:
        return one_pool_config(
            endpoints=[{"address": stack.backends.address(i)} for i in range(servers)],
            listener_port=stack.listener_port,
            pool={
                "picker": {"address": picker, "message_timeout_ms": 1000, "flow": {"max_wait_s": 3}}
            },
        )

    envoy = None
    try:
        await stack.start(config(0), envoys=0)
        envoy, url = await _gateway(
            stack, Config.model_validate(config(1)), name="FailClose", fail_open=False
        )
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=20)) as session:
            waiting = asyncio.create_task(_post(session, url, _body("held")))
            await asyncio.sleep(1.0)
            assert not waiting.done()
            stack.write_config(config(1))
            assert await waiting == (stack.backends.address(0), len(_body("held")))
            stack.write_config(config(0))

            async def refused() -> bool:  # once the loop has taken the server away
                async with session.post(url, data=_body("refused")) as response:
                    await response.read()
                    if response.status == 200:
                        return False
                    assert response.status == 503
                    assert response.headers["x-xds-control-flow"] == "no-ready-endpoint"
                    return True

            await eventually(refused, timeout=15, what="503 no-ready-endpoint")
    finally:
        if envoy is not None:
            await envoy.stop()
        await stack.close()


TENANT_HEADER = "x-gateway-inference-fairness-id"


async def _answer(
    session: aiohttp.ClientSession, url: str, *, tenant: str, stream: bool
) -> tuple[int, str, int]:
    """Status, the answer's text and the output tokens its usage reported, as a client reads
    them (a stream must end with ``[DONE]``)."""
    body: dict[str, Any] = {
        "model": "m",
        "messages": [{"role": "user", "content": f"tell me about {tenant}"}],
        "stream": stream,
    }
    if stream:
        body["stream_options"] = {"include_usage": True}
    async with session.post(url, json=body, headers={TENANT_HEADER: tenant}) as response:
        raw = await response.read()
        if response.status != 200:
            return response.status, raw.decode(errors="replace"), 0
    if not stream:
        whole = json.loads(raw)
        return 200, whole["choices"][0]["message"]["content"], whole["usage"]["completion_tokens"]
    events = [line[5:].strip() for line in raw.decode().splitlines() if line.startswith("data:")]
    assert events[-1] == "[DONE]", raw[-200:]
    chunks = [json.loads(event) for event in events[:-1]]
    text = "".join(c["choices"][0]["delta"]["content"] for c in chunks if c["choices"])
    tokens = sum(c["usage"]["completion_tokens"] for c in chunks if c.get("usage"))
    return 200, text, tokens


async def test_full_duplex_response_bodies_reach_the_client_whole_and_settle_the_budget(
    tmp_path: Path,
) -> None:
    """The response's body in full duplex, as Istio's and GKE's gateways send it: Envoy passes
    on only what the picker sends back, so the picker gives back every piece of every answer,
    budgeted or not, and reads a budgeted one's usage on the way."""
    stack = sim_stack(tmp_path, profiles=["vllm-h100", "vllm-h100"], time_scale=0.05)
    addresses = list(stack.backends.addresses.values())  # ports pinned before start
    budget = {"tenant": "a", "output_tokens": 1_000_000}
    data = one_pool_config(
        endpoints=[{"address": a} for a in addresses],
        listener_port=stack.listener_port,
        pool={
            "picker": {
                "address": f"127.0.0.1:{free_port()}",
                "message_timeout_ms": 1000,
                "flow": {"budgets": [budget]},
            }
        },
    )
    envoy = None
    try:
        await stack.start(data, envoys=0)
        envoy, port = gie_gateway_envoy(
            workdir=stack.workdir / "gateway",
            node_id="gateway",
            pool=Config.model_validate(data).pools[0],
            endpoints=addresses,
            fail_open=False,
            duplex_response=True,
        )
        await envoy.start()
        await envoy.wait_live()
        url = f"http://127.0.0.1:{port}/v1/chat/completions"
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as session:
            # What a server answers with no gateway in between.
            direct = f"http://{addresses[0]}/v1/chat/completions"
            _, text, tokens = await _answer(session, direct, tenant="a", stream=True)
            assert tokens > 0
            asked = [("a", True)] * 5 + [("a", False), ("b", True), ("b", False)]
            answers = await asyncio.gather(
                *(_answer(session, url, tenant=t, stream=s) for t, s in asked)
            )
        assert answers == [(200, text, tokens)] * len(asked)
        # Tenant a's budget was charged what its answers' usage said (each settles at its
        # body's last piece, which the picker may see just after the client has it).
        charged = sum(
            n for (tenant, _), (_, _, n) in zip(asked, answers, strict=True) if tenant == "a"
        )
        pattern = re.compile(
            r'^xds_control_flow_output_tokens_total\{budget="a/all",pool="chat"\} (\S+)$',
            re.MULTILINE,
        )

        async def counted() -> bool:
            match = pattern.search(await stack.control_plane.metrics())
            return match is not None and float(match[1]) == charged

        await eventually(counted, timeout=10, what=f"{charged} tokens counted")
    finally:
        if envoy is not None:
            await envoy.stop()
        await stack.close()
