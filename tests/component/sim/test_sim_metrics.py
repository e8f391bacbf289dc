"""Must show 3: every metric parses with a Prometheus text parser; counters match requests."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from component.sim.simclient import StartServer, scrape, stream_completion, words
from xds_lab.sim.server import SimServer

MIB = 1024 * 1024


async def _serve_mixed(http: aiohttp.ClientSession, server: SimServer) -> tuple[int, int, int]:
    """Send a mix of chat/completions, JSON/SSE; return (requests, prompt tokens, output tokens)."""
    prompt_total = output_total = 0
    jobs: list[Awaitable[object]] = []  # streamed ones timed, the others read here
    for i in range(12):
        out = 3 + i
        if i % 3 == 0:
            jobs.append(stream_completion(http, server.url, words(20 + i), max_tokens=out))
            prompt_total += 20 + i
        else:
            body = {"messages": [{"role": "user", "content": words(10 + i)}], "max_tokens": out}
            jobs.append(http.post(f"{server.url}/v1/chat/completions", json=body))
            prompt_total += 10 + i + 1  # the role marker is a token
        output_total += out
    results = await asyncio.gather(*jobs)
    for r in results:
        if isinstance(r, aiohttp.ClientResponse):
            assert r.status == 200
            payload = await r.json()
            assert payload["server"] == server.name
            assert r.headers["x-sim-server"] == server.name
            r.release()
    return len(jobs), prompt_total, output_total


@pytest.mark.parametrize("profile", ["vllm-h100", "triton-a100", "sglang-l4", "onnxruntime-l4"])
async def test_every_metric_parses_and_counters_agree_with_requests(
    http: aiohttp.ClientSession, start_server: StartServer, profile: str
) -> None:
    server = await start_server(profile, time_scale=0.05)
    n, prompt_tokens, output_tokens = await _serve_mixed(http, server)
    async with http.get(f"{server.url}/metrics") as resp:
        text = await resp.text()
    families = {f.name: f for f in text_string_to_metric_families(text)}
    assert all(f.samples for f in families.values())
    m = await scrape(http, server.url)

    if profile.startswith("vllm"):
        assert m["vllm:request_success_total"] == n
        assert m["vllm:prompt_tokens_total"] == prompt_tokens
        assert m["vllm:generation_tokens_total"] == output_tokens
        assert m["vllm:time_to_first_token_seconds_count"] == n
        assert m["vllm:e2e_request_latency_seconds_count"] == n
        assert m["vllm:e2e_request_latency_seconds_bucket{le=+Inf}"] == n
        # One inter-token latency per output token after the first.
        assert m["vllm:inter_token_latency_seconds_count"] == output_tokens - n
        assert m["vllm:prefix_cache_queries_total"] == prompt_tokens
        assert families["vllm:time_to_first_token_seconds"].type == "histogram"
    elif profile.startswith("sglang"):
        assert m["sglang:num_requests_total"] == n
        assert m["sglang:prompt_tokens_total"] == prompt_tokens
        assert m["sglang:generation_tokens_total"] == output_tokens
        assert m["sglang:e2e_request_latency_seconds_count"] == n
    else:
        # Triton's counters carry no _total suffix; prometheus-client's parser adds it.
        assert m["nv_inference_request_success_total"] == n
        assert m["nv_inference_count_total"] == n
        assert m["nv_inference_pending_request_count"] == 0
        assert m["nv_gpu_memory_total_bytes"] == server.profile.gpu_memory_mib * MIB
        assert m["nv_gpu_memory_used_bytes"] == pytest.approx(
            server.profile.weights_bytes, rel=1e-6
        )
        assert ("nv_trt_llm_kv_cache_block_metrics" in families) == profile.startswith("triton")

    # DCGM view: an idle server holds only its weights.
    weights_mib = server.profile.weights_bytes / MIB
    assert m["DCGM_FI_DEV_FB_USED"] == round(weights_mib)
    assert m["DCGM_FI_DEV_FB_FREE"] == round(server.profile.gpu_memory_mib - weights_mib)
    dcgm = families["DCGM_FI_DEV_FB_USED"].samples[0].labels
    assert {"gpu", "UUID", "modelName", "Hostname"} <= dcgm.keys()
    assert dcgm["Hostname"] == server.name


async def test_framebuffer_use_grows_with_kv_blocks_in_use(
    http: aiohttp.ClientSession, start_server: StartServer
) -> None:
    server = await start_server("vllm-h100", time_scale=0.5)
    prompt = 4000
    task = asyncio.create_task(stream_completion(http, server.url, words(prompt), max_tokens=96))
    await asyncio.sleep(0.3)
    busy = await scrape(http, server.url)
    await task
    blocks = -(-(prompt + 96) // 16)
    kv_mib = blocks * 16 * server.profile.kv_bytes_per_token / MIB
    weights_mib = server.profile.weights_bytes / MIB
    assert busy["DCGM_FI_DEV_FB_USED"] == round(weights_mib + kv_mib)
    assert busy["vllm:kv_cache_usage_perc"] == pytest.approx(blocks / server.profile.kv_blocks)
    assert busy["vllm:num_requests_running"] == 1


async def test_a_server_with_no_metrics_answers_404_there_and_still_serves(
    http: aiohttp.ClientSession, start_server: StartServer
) -> None:
    server = await start_server("triton-a100", metrics="none")
    async with http.get(f"{server.url}/metrics") as response:
        assert response.status == 404
    result = await stream_completion(http, server.url, words(10), max_tokens=3)
    assert result.status == 200


async def test_triton_s_compute_time_never_goes_back_while_requests_queue(
    http: aiohttp.ClientSession, start_server: StartServer
) -> None:
    # Triton counts a request's compute time when it ends. A counter that fell when queued
    # requests were admitted read as a restart to every scraper (and put the server into
    # warm-up). Three short answers first, then a burst of long prompts, more than one
    # prefill takes at once: they wait for each other, and none ends for a while.
    server = await start_server("triton-a100", time_scale=0.2)
    for _ in range(3):
        await stream_completion(http, server.url, words(20), max_tokens=30)
    jobs = [
        asyncio.create_task(stream_completion(http, server.url, words(3000), max_tokens=20))
        for _ in range(8)
    ]
    metric = "nv_inference_compute_infer_duration_us_total"
    seen = [(await scrape(http, server.url))[metric]]
    while not all(job.done() for job in jobs):
        seen.append((await scrape(http, server.url))[metric])
        await asyncio.sleep(0.01)
    await asyncio.gather(*jobs)
    assert seen[0] > 0
    assert seen == sorted(seen), seen
    final = await scrape(http, server.url)
    assert final[metric] < final["nv_inference_request_duration_us_total"]
