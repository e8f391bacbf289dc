"""A real vLLM server killed and restarted under load (issue 49, must-show 4): with the
route's retries on (the default), no request through Envoy is lost while a server crashes
(SIGKILL to its process group) and comes back on the same ports; the control plane sees the
restart in its KV events and clears what the index held of that server, and the engine ramps
the server's weight back up (``warmup_s``) instead of handing it its full share at once."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from pathlib import Path

import aiohttp
import pytest

from e2e.real_engine.real_stack import RealStack, real_stack
from e2e.stack import eventually
from xds_lab.real_engine.server import MODEL_NAME, VllmFleet

pytestmark = pytest.mark.asyncio(loop_scope="session")

WARMUP_S = 20.0


async def _load(stack: RealStack, statuses: Counter[int], stop: asyncio.Event) -> None:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as http:

        async def client(k: int) -> None:
            n = 0
            while not stop.is_set():
                n += 1
                body = {
                    "model": MODEL_NAME,
                    "messages": [{"role": "user", "content": f"client {k} request {n}"}],
                    "max_tokens": 16,
                }
                try:
                    async with http.post(f"{stack.url}/v1/chat/completions", json=body) as r:
                        await r.read()
                        statuses[r.status] += 1
                except aiohttp.ClientError:
                    statuses[0] += 1
                await asyncio.sleep(0.05)

        await asyncio.gather(*(client(k) for k in range(4)))


@pytest.mark.timeout(600)  # a restart is 50-65 s alone; under a busy machine's load, over 3 min
async def test_a_real_server_killed_and_restarted_under_load(
    vllm_fleet: VllmFleet, tmp_path: Path
) -> None:
    victim = vllm_fleet.servers["v1"]
    weights = {"warmup_s": WARMUP_S}
    async with real_stack(vllm_fleet, tmp_path, pool={"weights": weights}) as stack:
        await eventually(lambda: _both_weighted(stack), timeout=30, what="both servers weighted")
        statuses: Counter[int] = Counter()
        stop = asyncio.Event()
        load = asyncio.create_task(_load(stack, statuses, stop))
        try:
            await asyncio.sleep(3)
            before = dict(statuses)
            victim.kill()
            await asyncio.sleep(3)
            await victim.start()
            await victim.wait_healthy()
            back_at = time.monotonic()
            names = {s.address: n for n, s in vllm_fleet.servers.items()}

            async def restart_seen() -> bool:
                status = await stack.control_plane.get_json("/v1/status")
                rows = {names[r["server"]]: r for r in status["kv_events"]}
                return bool(rows["v1"]["restarts"] >= 1)

            await eventually(restart_seen, timeout=20, what="the restart seen in v1's events")
            ramp = []
            while time.monotonic() - back_at < WARMUP_S + 5:
                got = await stack.envoy_weights()
                ramp.append((round(time.monotonic() - back_at, 1), got.get("v1"), got.get("v0")))
                await asyncio.sleep(1.0)
        finally:
            stop.set()
            await load
    print(f"\nbefore the kill {before}; all {dict(statuses)}; ramp (s, v1, v0) {ramp}")
    assert set(statuses) == {200}, statuses
    assert sum(statuses.values()) > sum(before.values()), statuses
    v1 = [w for _, w, _ in ramp if w is not None]
    assert v1, ramp
    assert v1[0] < max(v1), ramp
    assert v1[-1] == max(v1), ramp


async def _both_weighted(stack: RealStack) -> bool:
    decisions = await stack.decisions()
    return {"v0", "v1"} <= decisions.keys()
