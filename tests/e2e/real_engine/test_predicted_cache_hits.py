"""The picker's belief against vLLM's own counter (issue 49, must-show 1): through a real
Envoy to real vLLM servers, for each of 24 chat requests sharing four long system prompts,
the prompt tokens the picker predicted the chosen server holds (from the servers' KV events,
cut into blocks of the size the events carry, by the model's own tokenizer and chat template)
equal what that server's ``vllm:prefix_cache_hits_total`` rose by, within one block (the block
size read from ``vllm:cache_config_info``: 128 on the CPU build). A repeated prefix goes to
the server that holds it, which serves it from cache."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aiohttp
import pytest

from e2e.real_engine.real_stack import events_settled, picks, real_stack
from xds_lab.real_engine.server import MODEL_NAME, VllmFleet, metric_value
from xds_lab.vocabulary import VOCABULARY

pytestmark = pytest.mark.asyncio(loop_scope="session")

PREFIXES = 4
ROUNDS = 6


def _system(k: int) -> str:
    """Prefix ``k``: 250 words and 120 more for each ``k``, so the four hold 2 to 5 blocks."""
    words = 250 + 120 * k
    return " ".join(VOCABULARY[(97 * k + 13 * i) % len(VOCABULARY)] for i in range(words))


def _body(k: int, n: int) -> dict[str, Any]:
    messages = [
        {"role": "system", "content": _system(k)},
        {"role": "user", "content": f"question {n} about {VOCABULARY[n]}"},
    ]
    return {"model": MODEL_NAME, "messages": messages, "max_tokens": 4}


async def _counters(fleet: VllmFleet) -> dict[str, tuple[float, float]]:
    """Address -> (prefix-cache queries, hits), both in tokens."""
    out = {}
    for server in fleet.servers.values():
        text = await server.metrics()
        out[server.address] = (
            metric_value(text, "vllm:prefix_cache_queries_total"),
            metric_value(text, "vllm:prefix_cache_hits_total"),
        )
    return out


async def test_the_picker_predicts_the_cached_tokens_vllm_counts(
    vllm_fleet: VllmFleet, tmp_path: Path
) -> None:
    block = {await s.block_size() for s in vllm_fleet.servers.values()}
    assert len(block) == 1, block
    size = block.pop()
    rows = []
    async with (
        real_stack(vllm_fleet, tmp_path) as stack,
        aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as http,
    ):
        for n in range(PREFIXES * ROUNDS):
            before = await _counters(vllm_fleet)
            seen = len(picks(stack))
            url = f"{stack.url}/v1/chat/completions"
            async with http.post(url, json=_body(n % PREFIXES, n)) as response:
                assert response.status == 200, await response.text()
                usage = (await response.json())["usage"]
            await events_settled(stack)
            after = await _counters(vllm_fleet)
            served = [a for a in after if after[a][0] > before[a][0]]
            assert len(served) == 1, (before, after)
            address = served[0]
            new = picks(stack)[seen:]
            assert len(new) == 1, new
            predicted = new[0]["cached"].get(address, 0)
            counted = after[address][1] - before[address][1]
            rows.append((n % PREFIXES, address, usage["prompt_tokens"], predicted, counted))
    print(f"\nblock {size}; prefix, server, prompt tokens, predicted, counted:")
    for row in rows:
        print(*row)
    assert all(abs(predicted - counted) <= size for *_, predicted, counted in rows), rows
    # The test means something: most requests after a prefix's first hit the cache.
    hits = [counted for *_, counted in rows[PREFIXES:]]
    assert sum(c >= size for c in hits) >= len(hits) * 3 // 4, rows
