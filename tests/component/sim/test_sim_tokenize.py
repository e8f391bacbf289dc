"""The simulator answers vLLM's ``/tokenize`` with the ids of the lab's tokenizer: the ids its
KV-cache events carry, and what the picker computes from the same tokenizer file."""

from __future__ import annotations

import aiohttp

from component.sim.simclient import StartServer
from xds_lab.sim.tokenizer import encode
from xds_lab.sim.tokens import chat_tokens


async def test_tokenize_answers_a_prompt_and_a_chat_as_vllm_does(
    http: aiohttp.ClientSession, start_server: StartServer
) -> None:
    server = await start_server("vllm-h100")
    messages = [{"role": "system", "content": "kakaka lololo"}, {"role": "user", "content": "x"}]
    async with http.post(f"{server.url}/tokenize", json={"prompt": "kakaka lololo"}) as r:
        assert r.status == 200
        body = await r.json()
    assert body["tokens"] == encode(["kakaka", "lololo"])
    assert body["count"] == 2
    assert body["max_model_len"] == server.profile.max_model_len
    async with http.post(f"{server.url}/tokenize", json={"messages": messages}) as r:
        assert (await r.json())["tokens"] == encode(chat_tokens(messages))
    async with http.post(f"{server.url}/tokenize", json={"prompt": 3}) as r:
        assert r.status == 400


async def test_an_engine_without_tokenize_answers_404(
    http: aiohttp.ClientSession, start_server: StartServer
) -> None:
    server = await start_server("triton-a100")
    async with http.post(f"{server.url}/tokenize", json={"prompt": "kakaka"}) as r:
        assert r.status == 404
