"""Two control-plane replicas behind one Service, as the chart's central mode runs them, and two
real Envoys, one on each: the fleet the replica tests share.

Each replica is a real ``xds-control serve`` with the same config but for the port its picker
listens on (on one host two processes cannot share one, as pods on their own IPs do). Envoy
reaches both through a loopback stand-in for the Service (``ServiceProxy``, round robin per
connection): its bootstrap dials the xDS Service, its picker cluster the picker Service
(``picker.envoy_address``), so every replica serves the same resources. The simulated vLLM
servers publish KV events, which each replica subscribes to; the gateway fleet's size comes
from its Service's EndpointSlices (``gateways.kubernetes``), served by the local list/watch
API.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import grpc
from envoy.service.ext_proc.v3 import external_processor_pb2 as ext

from component.discovery.fake_kube_api import FakeKubeApi, endpoint, endpoint_slice
from e2e.stack import eventually
from xds_control.picker.server import PROCESS_METHOD
from xds_lab.harness.control_plane import ControlPlaneProcess
from xds_lab.harness.envoy import EnvoyProcess
from xds_lab.harness.fleet import local_fleet
from xds_lab.harness.pool_config import one_pool_config
from xds_lab.harness.ports import free_port
from xds_lab.harness.service import ServiceProxy
from xds_lab.sim.fleet import Fleet, ServerSpec
from xds_lab.sim.kv_publisher import KvEventsSpec
from xds_lab.sim.tokenizer import write
from xds_lab.vocabulary import VOCABULARY

__all__ = ["BUDGET", "TOKEN_WINDOW_S", "Replicas", "post", "prompt", "replicas"]

BUDGET = 20.0
"""The fleet-wide budget of the medium class, requests per second."""
TOKEN_WINDOW_S = 3.0
"""The window of the output-token budget (``Replicas.tokens``)."""
DESTINATION = "x-gateway-destination-endpoint"


def prompt(template: int, question: int) -> dict[str, Any]:
    """A chat request: one of a few long shared system prompts, then its own short question."""
    words = " ".join(VOCABULARY[(97 * template + 7 * i) % len(VOCABULARY)] for i in range(256))
    asked = " ".join(VOCABULARY[(31 * question + 3 * i) % len(VOCABULARY)] for i in range(8))
    messages = [{"role": "system", "content": words}, {"role": "user", "content": asked}]
    return {"model": "m", "messages": messages, "max_tokens": 4}


class Replicas:
    """The running fleet: ``replicas[i]`` with its picker at ``picker_addresses[i]``."""

    def __init__(
        self, workdir: Path, api: FakeKubeApi, *, budget: float, tokens: int | None = None
    ) -> None:
        self.workdir = workdir
        self.api = api
        self.budget = budget
        """The medium class's fleet-wide rate, requests per second."""
        self.tokens = tokens
        """Tenant ``a``'s output-token budget a ``TOKEN_WINDOW_S`` window, fleet-wide, shared
        by the replicas the control-plane Service's slices list (``None``: no budget)."""
        self.listener_port = free_port()
        specs = [
            ServerSpec(
                name=f"s{i}",
                profile="vllm-h100",
                kv_events=KvEventsSpec.model_validate(
                    {"layout": "vllm-0.11", "port": free_port(), "replay_port": free_port()}
                ),
            )
            for i in range(4)
        ]
        self.fleet: Fleet = local_fleet(specs, time_scale=0.1)
        self.replicas: list[ControlPlaneProcess] = []
        self.picker_addresses: list[str] = []
        for i in range(2):
            home = workdir / f"replica-{i}"
            home.mkdir()
            self.replicas.append(
                ControlPlaneProcess(config_path=home / "config.yaml", workdir=home)
            )
            self.picker_addresses.append(f"127.0.0.1:{free_port()}")
        self.xds_service = ServiceProxy([f"127.0.0.1:{r.xds_port}" for r in self.replicas])
        self.picker_service = ServiceProxy(self.picker_addresses)
        self.envoys: list[EnvoyProcess] = []

    @property
    def url(self) -> str:
        """The gateway listener every Envoy binds (the kernel spreads connections over them)."""
        return f"http://127.0.0.1:{self.listener_port}"

    def config(self, index: int) -> dict[str, Any]:
        """Replica ``index``'s config: the shared one, its own picker port."""
        sims = self.fleet.servers
        endpoints = [
            {
                "address": f"127.0.0.1:{s.port}",
                "kv_events": {
                    "port": s.kv_publisher.port,
                    "replay_port": s.kv_publisher.replay_port,
                },
            }
            for s in sims.values()
            if s.kv_publisher is not None
        ]
        config = one_pool_config(
            endpoints=endpoints,
            listener_port=self.listener_port,
            pool={
                "picker": {
                    "address": self.picker_addresses[index],
                    "envoy_address": self.picker_service.address,
                    "tokenizer": str(self.workdir / "tokenizer"),
                },
                "kv_events": {},
            },
        )
        config["listeners"][0]["limits"] = {
            "classes": {"medium": {"rate_per_s": self.budget, "burst_s": 0.25}},
            "adapt": {"enabled": False},
        }
        kubeconfig = str(self.api.write_kubeconfig(self.workdir / "kubeconfig"))
        watch = {"namespace": "llm", "kubeconfig": kubeconfig, "relist_backoff_s": 0.1}
        config["gateways"] = {"kubernetes": {**watch, "service": "gateway"}}
        if self.tokens is not None:
            budget = {"tenant": "a", "output_tokens": self.tokens, "window_s": TOKEN_WINDOW_S}
            config["pools"][0]["picker"]["flow"] = {"budgets": [budget]}
            config["control_planes"] = {"kubernetes": {**watch, "service": "xds-control"}}
        return config

    async def list_control_planes(self, count: int) -> None:
        """The control-plane Service's slice lists the first ``count`` replicas, ready."""
        ready = [endpoint(f"10.8.0.{i}", pod=f"xds-control-{i}") for i in range(count)]
        await self.api.apply(
            endpoint_slice("xds-control-a", service="xds-control", port=9002, endpoints=ready)
        )

    async def start(self) -> None:
        """The fleet, the gateway Service's slices (two gateways), both replicas, both
        Services and two Envoys: the first lands on replica 0, the second on replica 1."""
        await self.fleet.start()
        write(self.workdir / "tokenizer")
        gateways = [endpoint(f"10.9.0.{i}", pod=f"gateway-{i}") for i in (1, 2)]
        await self.api.apply(
            endpoint_slice("gateway-a", service="gateway", port=10000, endpoints=gateways)
        )
        await self.list_control_planes(len(self.replicas))
        for i, replica in enumerate(self.replicas):
            replica.write_config(self.config(i))
            await replica.start()
        await self.xds_service.start()
        await self.picker_service.start()
        for name in ("envoy-a", "envoy-b"):
            envoy = EnvoyProcess(workdir=self.workdir, xds_port=self.xds_service.port, node_id=name)
            self.envoys.append(envoy)
            await envoy.start()
            await envoy.wait_live()

    async def nodes(self, index: int) -> set[str]:
        """The Envoys connected to replica ``index``."""
        streams = await self.replicas[index].get_json("/v1/streams")
        return {s["node_id"] for s in streams}

    async def pick(self, index: int, body: dict[str, Any]) -> str:
        """The server replica ``index``'s picker names for ``body``, asked as a gateway asks
        (the Endpoint Picker Protocol: headers, then the body)."""
        messages = [
            ext.ProcessingRequest(request_headers=ext.HttpHeaders()),
            ext.ProcessingRequest(
                request_body=ext.HttpBody(body=json.dumps(body).encode(), end_of_stream=True)
            ),
        ]
        async with grpc.aio.insecure_channel(self.picker_addresses[index]) as channel:
            call = channel.stream_stream(
                PROCESS_METHOD,
                request_serializer=ext.ProcessingRequest.SerializeToString,
                response_deserializer=ext.ProcessingResponse.FromString,
            )(iter(messages))
            responses: list[ext.ProcessingResponse] = [response async for response in call]
        for response in responses:
            for option in response.request_body.response.header_mutation.set_headers:
                if option.header.key == DESTINATION:
                    value: bytes = option.header.raw_value
                    return value.decode().split(",")[0]
        return ""

    async def caught_up(self) -> None:
        """Wait until every replica's index holds every event every server published."""
        by_address = {f"127.0.0.1:{s.port}": s for s in self.fleet.servers.values()}

        async def done() -> bool:
            for replica in self.replicas:
                if not replica.process.running:
                    continue
                rows = (await replica.get_json("/v1/status"))["kv_events"]
                seen = {r["server"]: r["last_seq"] for r in rows}
                for address, sim in by_address.items():
                    publisher = sim.kv_publisher
                    if publisher is None or seen.get(address) != publisher.seq - 1:
                        return False
            return True

        await eventually(done, what="every replica read every server's events")

    async def close(self) -> None:
        """Stop everything started, Envoys first."""
        for envoy in self.envoys:
            await envoy.stop()
        await self.xds_service.stop()
        await self.picker_service.stop()
        for replica in self.replicas:
            await replica.stop()
        await self.fleet.stop()


@asynccontextmanager
async def replicas(
    workdir: Path, *, budget: float = BUDGET, tokens: int | None = None
) -> AsyncIterator[Replicas]:
    """A started ``Replicas`` (and its list/watch API), closed after."""
    api = FakeKubeApi(bookmark_s=0.5)
    await api.start()
    fleet = Replicas(workdir, api, budget=budget, tokens=tokens)
    try:
        await fleet.start()
        yield fleet
    finally:
        await fleet.close()
        await api.stop()


async def post(http: aiohttp.ClientSession, url: str, body: dict[str, Any]) -> int:
    """POST a chat request; its status."""
    async with http.post(f"{url}/v1/chat/completions", data=json.dumps(body)) as response:
        await response.read()
        return response.status
