"""Stuck ADS clients do not slow the fleet: with gRPC clients that never ACK and clients that
never read (HTTP/2 flow control then blocks the server's writes to them) connected, a weight
change still reaches two real Envoys' /clusters quickly; a client that resumes reading gets
the latest version, not every version it missed."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import grpc
from envoy.config.core.v3 import base_pb2
from envoy.service.discovery.v3 import ads_pb2_grpc, discovery_pb2

from e2e.stack import EchoStack
from xds_control.xds import type_urls as urls
from xds_lab.harness.pool_config import POOL, one_pool_config

FILLER = 200
"""Endpoints that nobody calls, so that one EDS response (~6 kB) overflows the stuck clients'
HTTP/2 stream window (1 kB: no BDP probing, small lookahead) and a client that does not read
blocks the server's write to it at once."""
CHANGES = 4
PERIOD_S = 0.1


def config(stack: EchoStack, weight: int) -> dict[str, Any]:
    backends = stack.backends
    endpoints = [{"address": backends.address(0), "weight": weight}]
    endpoints += [{"address": backends.address(1)}]
    endpoints += [{"address": f"127.0.0.2:{20000 + i}"} for i in range(FILLER)]
    data = one_pool_config(endpoints=endpoints, listener_port=stack.listener_port)
    return {**data, "signals": {"reconcile_period_s": PERIOD_S}}


class StuckClient:
    """An ADS client that asks for CDS and the pool's EDS, then never ACKs; with ``read`` off
    it never reads a response either."""

    def __init__(self, *, port: int, node_id: str, read: bool) -> None:
        # No BDP probing and a 1 kB lookahead: the stream window stays small instead of growing.
        self._channel = grpc.aio.insecure_channel(
            f"127.0.0.1:{port}",
            options=[("grpc.http2.bdp_probe", 0), ("grpc.http2.lookahead_bytes", 1024)],
        )
        self.node_id = node_id
        self._node = base_pb2.Node(id=node_id, cluster="gateway")
        self._read = read
        self._call: Any = None
        self._drain: asyncio.Task[None] | None = None
        self.eds_versions: list[str] = []

    async def _requests(self) -> AsyncIterator[discovery_pb2.DiscoveryRequest]:
        yield discovery_pb2.DiscoveryRequest(node=self._node, type_url=urls.CLUSTER)
        yield discovery_pb2.DiscoveryRequest(
            node=self._node, type_url=urls.ENDPOINT, resource_names=[POOL]
        )
        await asyncio.Event().wait()  # never ACK, never close

    def start(self) -> None:
        stub = ads_pb2_grpc.AggregatedDiscoveryServiceStub(self._channel)
        self._call = stub.StreamAggregatedResources(self._requests())
        if self._read:
            self._drain = asyncio.create_task(self.read_until(""))

    async def read_until(self, version: str) -> None:
        """Read responses until an EDS response of ``version`` (forever for ``""``)."""
        while True:
            response = await self._call.read()
            if response.type_url == urls.ENDPOINT:
                self.eds_versions.append(response.version_info)
                if response.version_info == version:
                    return

    async def close(self) -> None:
        if self._drain is not None:
            self._drain.cancel()
        if self._call is not None:
            self._call.cancel()
        await self._channel.close(grace=None)


async def eds_versions(stack: EchoStack) -> dict[str, str]:
    """Node id -> the EDS version the server last sent it."""
    streams = await stack.control_plane.get_json("/v1/streams")
    return {
        s["node_id"]: t["sent_version"]
        for s in streams
        for t in s["types"]
        if t["type"] == urls.SHORT_NAMES[urls.ENDPOINT]
    }


async def change_weight(stack: EchoStack, weight: int) -> float:
    """Seconds from writing the config to both Envoys running ``weight``."""
    started = time.monotonic()
    stack.write_config(config(stack, weight))
    address = stack.backends.address(0)
    while time.monotonic() - started < 20:
        seen = []
        for envoy in stack.envoys:
            hosts = await envoy.cluster_hosts(POOL)
            seen.append(next(h.weight for h in hosts if h.address == address))
        if seen == [weight] * len(stack.envoys):
            return time.monotonic() - started
        await asyncio.sleep(0.02)
    raise AssertionError(f"the Envoys did not run weight {weight} within 20 s")


async def test_stuck_clients_do_not_delay_real_envoys(stack: EchoStack) -> None:
    await stack.start(config(stack, 10), envoys=2)
    baseline = [await change_weight(stack, w) for w in range(11, 11 + CHANGES)]

    port = stack.control_plane.xds_port
    silent = [StuckClient(port=port, node_id=f"no-ack-{i}", read=True) for i in range(10)]
    blocked = [StuckClient(port=port, node_id=f"no-read-{i}", read=False) for i in range(10)]
    try:
        for client in silent + blocked:
            client.start()
        await asyncio.sleep(1.0)
        first = await eds_versions(stack)
        stuck = [await change_weight(stack, w) for w in range(21, 21 + CHANGES)]
        after = await eds_versions(stack)

        print(f"weight change -> both Envoys: alone {baseline}, with stuck clients {stuck}")
        assert max(stuck) < max(1.0, 3 * max(baseline)), (baseline, stuck)
        envoy_version = after["envoy-0"]
        assert after["envoy-1"] == envoy_version != first["envoy-0"]
        for client in blocked:  # their writes are stuck in flow control: nothing new went out
            assert after[client.node_id] == first[client.node_id] != envoy_version
        for client in silent:  # never ACKing does not stop pushes
            assert after[client.node_id] == envoy_version

        # A blocked client that reads again gets the one stuck response, then the latest
        # version: none of the versions published in between.
        for client in blocked:
            await asyncio.wait_for(client.read_until(envoy_version), 10)
            assert len(client.eds_versions) == 2, client.eds_versions
    finally:
        for client in silent + blocked:
            await client.close()
