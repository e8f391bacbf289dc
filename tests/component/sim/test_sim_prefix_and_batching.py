"""Must show 1 and 2: prefix hits lower TTFT as the model says; batching and queueing."""

from __future__ import annotations

import asyncio

import aiohttp
import pytest

from component.sim.simclient import StartServer, Timed, scrape, stream_completion, words
from xds_lab.sim.tokens import BLOCK_SIZE


@pytest.mark.serial  # TTFTs compared within 15%: not next to other load
async def test_repeated_prefix_lowers_ttft_by_the_modelled_prefill(
    http: aiohttp.ClientSession, start_server: StartServer
) -> None:
    server = await start_server("vllm-h100")
    prompt_tokens = 1024
    prompt = words(prompt_tokens)
    # A first request of another prompt, so the cold one below pays no first-request costs
    # (the connection, the tokenizer's first call) beside its prefill.
    await stream_completion(http, server.url, words(32, prefix="warm-up-"), max_tokens=1)
    before = await scrape(http, server.url)

    cold = await stream_completion(http, server.url, prompt, max_tokens=2)
    after_cold = await scrape(http, server.url)
    warm = await stream_completion(http, server.url, prompt, max_tokens=2)
    after_warm = await scrape(http, server.url)

    # The last token is always computed, so 63 of the 64 blocks are reused.
    hit = (prompt_tokens - 1) // BLOCK_SIZE * BLOCK_SIZE
    assert cold.cached_tokens == 0
    assert warm.cached_tokens == hit
    profile = server.profile
    modelled_saving = profile.prefill_time(prompt_tokens) - profile.prefill_time(
        prompt_tokens - hit
    )
    measured_saving = cold.ttft - warm.ttft
    assert measured_saving == pytest.approx(modelled_saving, rel=0.15)
    assert warm.ttft == pytest.approx(profile.prefill_time(prompt_tokens - hit), abs=0.02)

    def delta(name: str, a: dict[str, float], b: dict[str, float]) -> float:
        return b[name] - a[name]

    assert delta("vllm:prefix_cache_queries_total", before, after_cold) == prompt_tokens
    assert delta("vllm:prefix_cache_hits_total", before, after_cold) == 0
    assert delta("vllm:prefix_cache_queries_total", after_cold, after_warm) == prompt_tokens
    assert delta("vllm:prefix_cache_hits_total", after_cold, after_warm) == hit


async def test_a_different_prefix_does_not_hit(
    http: aiohttp.ClientSession, start_server: StartServer
) -> None:
    server = await start_server("vllm-h100", time_scale=0.1)
    await stream_completion(http, server.url, words(256, prefix="a"), max_tokens=1)
    other = await stream_completion(http, server.url, words(256, prefix="b"), max_tokens=1)
    shared_system = words(128, prefix="sys") + " "
    await stream_completion(http, server.url, shared_system + words(64, prefix="q"), max_tokens=1)
    second = await stream_completion(
        http, server.url, shared_system + words(64, prefix="r"), max_tokens=1
    )
    assert other.cached_tokens == 0
    assert second.cached_tokens == 128  # exactly the shared system prompt's 8 blocks


@pytest.mark.serial  # time per token compared between batch sizes: not next to other load
async def test_a_larger_batch_raises_time_per_output_token(
    http: aiohttp.ClientSession, start_server: StartServer
) -> None:
    # Client and server share this process: each step's 128 chunks cost a few milliseconds of
    # Python on top of the modelled step (measured: +8 ms on a loaded machine). Steps three
    # times as long keep that cost a small part of what is compared.
    server = await start_server("vllm-h100", time_scale=3.0)
    out = 40

    def tpot(t: Timed) -> float:
        return (t.e2e - t.ttft) / (t.completion_tokens - 1)

    alone = await stream_completion(http, server.url, words(32), max_tokens=out)
    batch = 128
    crowd = await asyncio.gather(
        *(
            stream_completion(http, server.url, words(32, prefix=f"p{i}-"), max_tokens=out)
            for i in range(batch)
        )
    )
    profile = server.profile
    assert tpot(alone) == pytest.approx(profile.decode_time(1), rel=0.2)
    crowd_tpot = sorted(tpot(t) for t in crowd)[batch // 2]
    assert crowd_tpot > 1.5 * tpot(alone)
    assert crowd_tpot == pytest.approx(profile.decode_time(batch), rel=0.3)


async def test_past_capacity_the_queue_grows_and_metrics_show_it(
    http: aiohttp.ClientSession, start_server: StartServer
) -> None:
    slots, offered = 4, 12
    server = await start_server("vllm-h100", time_scale=0.2, max_num_seqs=slots, max_waiting=8)

    def offer(n: int) -> list[asyncio.Task[object]]:
        return [
            asyncio.create_task(stream_completion(http, server.url, words(64), max_tokens=200))
            for _ in range(n)
        ]

    # The first few take the batch slots; the rest, arriving later, wait.
    tasks = offer(slots)
    await asyncio.sleep(0.05)
    tasks += offer(offered - slots)
    await asyncio.sleep(0.05)
    busy = await scrape(http, server.url)
    assert busy["vllm:num_requests_running"] == slots
    assert busy["vllm:num_requests_waiting"] == offered - slots
    # The queue holds 8: two more are shed with the engine's 429.
    extra = await asyncio.gather(
        *(stream_completion(http, server.url, words(8), max_tokens=1) for _ in range(2))
    )
    assert [t.status for t in extra] == [429, 429]
    results = await asyncio.gather(*tasks)
    assert all(getattr(t, "status", None) == 200 for t in results)
    idle = await scrape(http, server.url)
    assert idle["vllm:num_requests_waiting"] == 0
    assert idle["vllm:num_requests_running"] == 0
