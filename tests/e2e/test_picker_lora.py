"""LoRA adapter affinity through a real Envoy: three simulated vLLM servers with two adapter
slots each, the direct scrape reading ``vllm:lora_requests_info``. A request for an adapter
goes to the server running it while it has room; one for an adapter no server runs avoids the
server whose slots are full; the admin API (what ``xdsctl weights`` shows) has each server's
adapters."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import aiohttp

from e2e.engine_stack import sim_stack
from e2e.stack import eventually
from e2e.test_xdsctl_envoy import xdsctl
from xds_lab.harness.pool_config import one_pool_config
from xds_lab.harness.ports import free_port

ADAPTERS = ["adapter-a", "adapter-b", "adapter-c", "adapter-d"]


async def _complete(http: aiohttp.ClientSession, url: str, model: str, *, tokens: int = 4) -> str:
    body = {"model": model, "prompt": f"a request for {model}", "max_tokens": tokens}
    async with http.post(f"{url}/v1/completions", json=body) as response:
        assert response.status == 200, await response.text()
        return response.headers["x-sim-server"]


async def test_adapter_requests_go_where_it_runs_and_avoid_full_servers(tmp_path: Path) -> None:
    stack = sim_stack(
        tmp_path,
        profiles=["vllm-h100"] * 3,
        overrides={"max_loras": 2, "lora_load_s": 0.5, "jitter": 0.0},
        time_scale=0.1,
    )
    long_running: list[asyncio.Task[str]] = []
    try:
        addresses = stack.backends.addresses
        await stack.start(
            one_pool_config(
                endpoints=[{"address": addresses[n]} for n in ("s0", "s1", "s2")],
                listener_port=stack.listener_port,
                pool={
                    "engine": "vllm",
                    "picker": {"address": f"127.0.0.1:{free_port()}", "lora": {"names": ADAPTERS}},
                },
                signals={
                    "scrape": {"enabled": True, "interval_s": 0.25},
                    "reconcile_period_s": 0.5,
                },
            )
        )
        timeout = aiohttp.ClientTimeout(total=60)
        async with aiohttp.ClientSession(timeout=timeout) as http:
            # Straight to the servers: s0 runs a and b (its two slots full), s1 runs c.
            for name, model in (("s0", "adapter-a"), ("s0", "adapter-b"), ("s1", "adapter-c")):
                url = f"http://{addresses[name]}"
                long_running.append(
                    asyncio.ensure_future(_complete(http, url, model, tokens=20_000))
                )

            async def adapters_shown() -> dict[str, Any]:
                view = await stack.control_plane.get_json("/v1/weights")
                names = {a: n for n, a in addresses.items()}
                return {names[r["address"]]: r.get("adapters") for r in view["pools"]["chat"]}

            async def running_reported() -> bool:
                shown = await adapters_shown()
                return (
                    shown["s0"] is not None
                    and shown["s0"]["running"] == ["adapter-a", "adapter-b"]
                    and shown["s1"] is not None
                    and shown["s1"]["running"] == ["adapter-c"]
                )

            await eventually(running_reported, timeout=20, what="the servers' adapters shown")
            shown = await adapters_shown()
            assert shown["s0"]["max_lora"] == 2
            assert shown["s2"] is None  # it has loaded none: vLLM writes no series yet
            table = await xdsctl(stack.control_plane.admin_url, "weights")
            assert table.code == 0, table.stderr
            rows = {line.split()[1]: line for line in table.stdout.splitlines()[1:] if line}
            assert "adapter-a,adapter-b 2/2" in rows[addresses["s0"]], table.stdout
            assert "adapter-c 1/2" in rows[addresses["s1"]], table.stdout

            for_c = [await _complete(http, stack.url, "adapter-c") for _ in range(8)]
            assert for_c == ["s1"] * 8, for_c
            for_d = [await _complete(http, stack.url, "adapter-d") for _ in range(8)]
            assert "s0" not in for_d, for_d
    finally:
        for task in long_running:
            task.cancel()
        await asyncio.gather(*long_running, return_exceptions=True)
        await stack.close()
