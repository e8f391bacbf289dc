"""A pool with ``kv_events``: the control loop subscribes to each of its servers at the ports
the config names, ``/v1/status`` shows what each one's events say it holds, and a pool that
drops ``kv_events`` is unsubscribed."""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiohttp
import grpc

from component.cli.xdsctl_plane import xdsctl
from component.sim.simclient import stream_completion, words
from xds_control.admin import AdminServer, AdminViews
from xds_control.admin.v1 import admin_pb2 as pb
from xds_control.admin.v1 import admin_pb2_grpc
from xds_control.cache import MemorySnapshotCache
from xds_control.config import load_config
from xds_control.control import ControlLoop
from xds_control.server import StreamRegistry
from xds_control.signals.kv_events import KvEvents
from xds_lab.harness.ports import free_port
from xds_lab.sim.kv_publisher import KvEventsSpec
from xds_lab.sim.profiles import get_profile
from xds_lab.sim.server import SimServer


def _config(server: SimServer, *, events: bool) -> str:
    publisher = server.kv_publisher
    assert publisher is not None
    ports = f"kv_events: {{port: {publisher.port}, replay_port: {publisher.replay_port}}}"
    pool_events = "    kv_events: {replay_timeout_s: 5}\n" if events else ""
    return (
        "pools:\n"
        "  - name: chat\n"
        f"{pool_events}"
        f"    endpoints: [{{address: '127.0.0.1:{server.port}', {ports}}}]\n"
        "listeners:\n"
        "  - {name: gw, address: '127.0.0.1:10000', routes: [{name: r, pool: chat}]}\n"
    )


async def test_status_shows_each_servers_blocks_and_a_dropped_pool_unsubscribes(
    tmp_path: Path,
) -> None:
    profile = get_profile("vllm-h100", jitter=0.0).scaled(0.05)
    server = SimServer(
        name="gpu-a",
        profile=profile,
        kv_events=KvEventsSpec.model_validate({"layout": "vllm-0.11"}),
    )
    await server.start()
    path = tmp_path / "config.yaml"
    path.write_text(_config(server, events=True), encoding="utf-8")
    kv = KvEvents()
    loop = ControlLoop(
        config=load_config(path), config_path=path, cache=MemorySnapshotCache(), kv_events=kv
    )
    admin = AdminServer(
        address=f"127.0.0.1:{free_port()}",
        views=AdminViews(
            state=loop.state, cache=MemorySnapshotCache(), registry=StreamRegistry(), kv_events=kv
        ),
        grpc_address=f"127.0.0.1:{free_port()}",
    )
    await admin.start()
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{admin.grpc_port}")
    stub = admin_pb2_grpc.AdminStub(channel)
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=20)) as http:

            async def status() -> list[dict[str, object]]:
                async with http.get(f"http://127.0.0.1:{admin.port}/v1/status") as resp:
                    body = await resp.json()
                kv_status: list[dict[str, object]] = body["kv_events"]
                return kv_status

            await loop.step()
            for prefix in ("a", "b", "c"):
                await stream_completion(http, server.url, words(64, prefix=prefix), max_tokens=1)
            held = server.scheduler.kv.cached_blocks + len(server.scheduler.kv._refs)
            assert held == 12
            seen: list[dict[str, object]] = []

            async def poll() -> bool:
                seen[:] = await status()
                return bool(seen) and seen[0]["blocks"] == held

            deadline = asyncio.get_running_loop().time() + 10
            while not await poll():
                assert asyncio.get_running_loop().time() < deadline, seen
                await asyncio.sleep(0.05)
            (entry,) = seen
            assert entry["server"] == f"127.0.0.1:{server.port}"
            assert entry["layout"] == "arrays"
            assert entry["refused"] == 0
            assert entry["stale"] is False  # no engine reading: staleness is never claimed
            # The operator's view of the same subscription.
            shown = await xdsctl("kv-events", admin=f"http://127.0.0.1:{admin.port}")
            assert shown.code == 0, shown
            line = next(x for x in shown.stdout.splitlines() if entry["server"] in x).split()
            assert line[:3] == ["chat", entry["server"], "arrays"], shown.stdout
            assert (line[3], line[5], line[-1]) == (str(entry["last_seq"]), "12", "ok")
            # And over the gRPC admin API, the same figures as messages.
            answer = await stub.ListKvEvents(pb.ListKvEventsRequest())
            assert answer.enabled
            (sub,) = answer.subscriptions
            assert (sub.pool, sub.server, sub.layout, sub.blocks, sub.stale) == (
                "chat",
                entry["server"],
                "arrays",
                12,
                False,
            )
            assert sub.last_seq == entry["last_seq"]
            other = await stub.ListKvEvents(pb.ListKvEventsRequest(pool="other"))
            assert list(other.subscriptions) == []

            path.write_text(_config(server, events=False), encoding="utf-8")
            await loop.step()
            assert await status() == []
            gone = await xdsctl("kv-events", admin=f"http://127.0.0.1:{admin.port}")
            assert gone.code == 0, gone
            assert "no pool subscribes to KV events" in gone.stderr, gone
            assert list((await stub.ListKvEvents(pb.ListKvEventsRequest())).subscriptions) == []
    finally:
        await channel.close(None)
        await kv.close()
        await admin.stop()
        await server.stop()
