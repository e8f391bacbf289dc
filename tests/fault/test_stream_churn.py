"""Many ADS streams connecting and disconnecting, plus a client that never ACKs, next to a
real Envoy under load: Envoy's traffic and its pushes are untouched, and the control plane's
memory and asyncio task count are flat (what a stream leaves behind would add up)."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
from envoy.config.core.v3 import base_pb2
from envoy.service.discovery.v3 import ads_pb2_grpc, discovery_pb2

from e2e.engine_stack import SimStack
from e2e.stack import eventually
from fault.fleet import fault_stack, static_config
from fault.load import SteadyLoad
from fault.report import record
from xds_control.xds import type_urls as urls
from xds_lab.harness.pool_config import POOL

pytestmark = [pytest.mark.fault, pytest.mark.e2e]

CHURN_S = 10.0
"""Thousands of streams on a quiet machine, hundreds on a busy one; four weight changes."""
WORKERS = 20
"""Streams open at once; each closes after its first answer and a new one opens."""
WEIGHTS = [[10, 20, 30, 40], [40, 30, 20, 10]]
RSS_SLACK_MIB = 12.0
TASK_SLACK = 3


def rss_mib(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    match = re.search(r"VmRSS:\s+(\d+) kB", status)
    assert match, status
    return int(match.group(1)) / 1024


async def loop_tasks(stack: SimStack) -> int:
    metrics = await stack.control_plane.metrics()
    match = re.search(r"^xds_control_event_loop_tasks (\S+)$", metrics, re.MULTILINE)
    assert match, "no xds_control_event_loop_tasks on /metrics"
    return int(float(match.group(1)))


def _requests(node_id: str) -> tuple[AsyncIterator[discovery_pb2.DiscoveryRequest], asyncio.Event]:
    """What a client sends: CDS and the pool's EDS, then nothing (no ACK) until ``done``."""
    node = base_pb2.Node(id=node_id, cluster="gateway")
    done = asyncio.Event()

    async def gen() -> AsyncIterator[discovery_pb2.DiscoveryRequest]:
        yield discovery_pb2.DiscoveryRequest(node=node, type_url=urls.CLUSTER)
        yield discovery_pb2.DiscoveryRequest(
            node=node, type_url=urls.ENDPOINT, resource_names=[POOL]
        )
        await done.wait()

    return gen(), done


async def churn(port: int, *, worker: int, until: float, opened: list[int]) -> None:
    """Open a stream, read its first response, cancel it; again until ``until``. Every fifth
    stream also uses a new connection."""
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
    n = 0
    try:
        while time.monotonic() < until:
            if n and n % 5 == 0:
                await channel.close(grace=None)
                channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
            requests, done = _requests(f"churn-{worker}-{n}")
            call = ads_pb2_grpc.AggregatedDiscoveryServiceStub(channel).StreamAggregatedResources(
                requests
            )
            try:
                await asyncio.wait_for(call.read(), 10)
            finally:
                done.set()
                call.cancel()
            opened.append(1)
            n += 1
    finally:
        await channel.close(grace=None)


async def test_stream_churn_and_a_silent_client_leave_envoy_and_the_process_alone(
    tmp_path: Path,
) -> None:
    stack = fault_stack(tmp_path)
    silent_channel: grpc.aio.Channel | None = None
    try:
        await stack.start(static_config(stack, WEIGHTS[0]))
        cp = stack.control_plane
        assert cp.process.proc is not None
        pid = cp.process.proc.pid
        names = list(stack.backends.addresses)
        tasks_before = await loop_tasks(stack)

        silent_channel = grpc.aio.insecure_channel(f"127.0.0.1:{cp.xds_port}")
        requests, silent_done = _requests("never-acks")
        silent = ads_pb2_grpc.AggregatedDiscoveryServiceStub(
            silent_channel
        ).StreamAggregatedResources(requests)
        silent_versions: list[str] = []

        async def read_silent() -> None:
            while True:
                response = await silent.read()
                if not isinstance(response, discovery_pb2.DiscoveryResponse):
                    return  # the end of the stream
                silent_versions.append(response.version_info)

        reader = asyncio.create_task(read_silent())
        push_s: list[float] = []
        opened: list[int] = []
        rss: list[float] = []
        async with SteadyLoad(stack.url) as load:
            until = time.monotonic() + CHURN_S
            workers = [
                asyncio.create_task(churn(cp.xds_port, worker=i, until=until, opened=opened))
                for i in range(WORKERS)
            ]
            change = 0
            while time.monotonic() < until:
                await asyncio.sleep(2.5)
                rss.append(rss_mib(pid))
                change += 1
                weights = WEIGHTS[change % 2]
                written = time.monotonic()
                stack.write_config(static_config(stack, weights))
                expected = dict(zip(names, weights, strict=True))

                async def pushed(expected: dict[str, int] = expected) -> bool:
                    return await stack.envoy_weights() == expected

                await eventually(pushed, timeout=10, what="the weight change to reach Envoy")
                push_s.append(time.monotonic() - written)
            await asyncio.gather(*workers)
            await asyncio.sleep(1)

        async def streams_closed() -> bool:
            streams = await cp.get_json("/v1/streams")
            return {s["node_id"] for s in streams} <= {"envoy-0", "never-acks"}

        await eventually(streams_closed, timeout=10, what="the churned streams to be gone")
        silent_done.set()
        silent.cancel()
        reader.cancel()
        await asyncio.gather(reader, return_exceptions=True)
        await silent_channel.close(grace=None)
        silent_channel = None

        async def tasks_settled() -> bool:
            return await loop_tasks(stack) <= tasks_before + TASK_SLACK

        await eventually(tasks_settled, timeout=10, what="the task count back to its start")
        tasks_after = await loop_tasks(stack)
        counts = load.counts()
        record(
            f"{len(opened)} ADS streams churned over {CHURN_S:.0f} s + a client that never ACKs",
            counts,
            recover_s=max(push_s),
            streams=len(opened),
            push_s=[round(p, 2) for p in push_s],
            rss_mib=[round(r, 1) for r in rss],
            tasks=[tasks_before, tasks_after],
        )
        assert counts.failed == 0, (counts, load.failures()[:5])
        assert len(opened) >= 200, len(opened)
        assert max(push_s) < 2.0, push_s
        # The silent client still got every push (it never ACKed one).
        assert len(silent_versions) >= len(push_s), silent_versions
        # Flat from the first sample (the process warmed up) to the last.
        assert rss[-1] - rss[0] < RSS_SLACK_MIB, rss
    finally:
        if silent_channel is not None:
            await silent_channel.close(grace=None)
        await stack.close()
