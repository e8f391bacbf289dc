"""Must show 4: a real Prometheus scrapes a simulated fleet; PromQL over DCGM and vLLM series
returns one value per server."""

from __future__ import annotations

import asyncio

import aiohttp
import pytest

from xds_lab.harness.prometheus import Prometheus, Target, find_prometheus
from xds_lab.sim.fleet import Fleet, FleetSpec

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(find_prometheus() is None, reason="no prometheus binary (PROMETHEUS_BIN)"),
]


async def test_prometheus_scrapes_the_fleet_and_promql_returns_per_server_values() -> None:
    spec = FleetSpec.model_validate(
        {
            "time_scale": 0.2,
            "groups": [
                {"profile": "vllm-h100", "count": 2},
                {"profile": "triton-a100", "count": 1},
            ],
        }
    )
    async with Fleet(spec) as fleet:
        targets = [
            Target(f"127.0.0.1:{s.port}", {"server": s.name}) for s in fleet.servers.values()
        ]
        async with Prometheus(targets=targets, scrape_interval_s=0.5) as prom:
            await prom.wait_for_targets(len(targets))
            # Load only the first vLLM server, with long prompts, so its KV use stands out.
            busy = fleet.servers["vllm-h100-0"]
            async with aiohttp.ClientSession() as http:
                # Distinct prompts: shared ones would share KV blocks.
                bodies = [
                    {"prompt": " ".join(f"r{r}w{i}" for i in range(3000)), "max_tokens": 600}
                    for r in range(4)
                ]
                jobs = [http.post(f"{busy.url}/v1/completions", json=b) for b in bodies]
                responses = asyncio.gather(*jobs)
                await asyncio.sleep(1.5)  # three scrapes while the requests run
                fb = await prom.query('max_over_time(DCGM_FI_DEV_FB_USED{job="sim"}[2s])')
                kv = await prom.query("max_over_time(vllm:kv_cache_usage_perc[2s])")
                for r in await responses:
                    assert r.status == 200
                    r.release()
            await asyncio.sleep(1.0)
            served = await prom.query("sum by (server) (vllm:request_success_total)")

    fb_by_server = {row["metric"]["Hostname"]: float(row["value"][1]) for row in fb}
    assert set(fb_by_server) == set(fleet.servers)
    weights_mib = busy.profile.weights_bytes / 1024 / 1024
    assert fb_by_server["vllm-h100-1"] == pytest.approx(weights_mib, abs=1)
    assert fb_by_server["vllm-h100-0"] > weights_mib + 1000  # 4 x 3600 tokens x 128 KiB
    assert fb_by_server["triton-a100-0"] == pytest.approx(weights_mib, abs=1)

    kv_by_server = {row["metric"]["server"]: float(row["value"][1]) for row in kv}
    assert set(kv_by_server) == {"vllm-h100-0", "vllm-h100-1"}  # Triton exports no vllm:*
    assert kv_by_server["vllm-h100-0"] > 0
    assert kv_by_server["vllm-h100-1"] == 0
    assert {row["metric"]["server"]: float(row["value"][1]) for row in served} == {
        "vllm-h100-0": 4.0,
        "vllm-h100-1": 0.0,
    }
