"""Request classes read from the body inside a real Envoy, over a simulated fleet: each class
lands on its pool, `match.model` works with no client header, unreadable bodies take the
default route, and a prompt prefix keeps to one server without the client hashing it."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from xds_lab.harness.fleet import local_fleet
from xds_lab.harness.stack import Stack
from xds_lab.sim.fleet import Fleet, ServerSpec

SERVER = "x-sim-server"
MODEL = "meta-llama/Llama-3.1-8B-Instruct"
POOLS = {"long": ["l0"], "fast": ["f0"], "general": ["g0", "g1", "g2", "g3"]}
POOL_OF = {server: pool for pool, servers in POOLS.items() for server in servers}


def _config(stack: Stack[Fleet], *, share_route: bool = False) -> dict[str, Any]:
    addresses = stack.backends.addresses
    routes: list[dict[str, Any]] = [
        {
            "name": "long-code",
            "match": {"prompt_tokens": {"min": 2000}, "keywords": ["def ", "import "]},
            "pool": "long",
        },
        {"name": "code-model", "match": {"model": "code-llama"}, "pool": "long"},
        {"name": "chat", "match": {"stream": True, "prompt_tokens": {"max": 512}}, "pool": "fast"},
        {"name": "default", "pool": "general", "retry": {}, "idle_timeout_s": 60},
    ]
    return {
        "pools": [
            {"name": pool, "endpoints": [{"address": addresses[s]} for s in servers]}
            for pool, servers in POOLS.items()
        ],
        "listeners": [
            {
                "name": "gateway",
                "address": f"127.0.0.1:{stack.listener_port}",
                "classify": {},
                "routes": routes,
            }
        ],
    }


@pytest.fixture
async def stack(tmp_path: Path) -> AsyncIterator[Stack[Fleet]]:
    servers = [ServerSpec(name=s, profile="vllm-h100") for s in POOL_OF]
    stack = Stack(workdir=tmp_path, backends=local_fleet(servers, time_scale=0.05))
    try:
        await stack.start(_config(stack))
        yield stack
    finally:
        await stack.close()


def _chat(user: str, *, system: str | None = None, **extra: Any) -> dict[str, Any]:
    messages = [{"role": "system", "content": system}] if system else []
    messages.append({"role": "user", "content": user})
    return {"model": MODEL, "messages": messages, "max_tokens": 2, **extra}


async def _send(
    session: aiohttp.ClientSession, url: str, body: dict[str, Any] | bytes
) -> tuple[int, str]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    headers = {"content-type": "application/json"}
    async with session.post(f"{url}/v1/chat/completions", data=data, headers=headers) as resp:
        await resp.read()
        return resp.status, resp.headers.get(SERVER, "")


async def test_classes_land_on_their_pools_and_unreadable_bodies_take_the_default(
    stack: Stack[Fleet],
) -> None:
    code = "import os\n" + "def f(x):\n    return x * 2\n" * 400  # ~10 KiB: ~2600 tokens
    cases: list[tuple[str, dict[str, Any] | bytes, int, str]] = [
        ("long code", _chat(code), 200, "long"),
        ("long prose", _chat("word " * 2000), 200, "general"),
        ("model, no header", _chat("hi", model="code-llama"), 200, "long"),
        ("short stream", _chat("hello there", stream=True), 200, "fast"),
        ("short, no stream", _chat("hello there"), 200, "general"),
        # Over the 64 KiB limit: not read, so not long-code although it would be.
        ("oversized", _chat(code + "#" * 70_000), 200, "general"),
        # Not JSON: Envoy serves it on the default route; the server itself answers 400.
        ("not json", b"this is not json", 400, "general"),
    ]
    async with aiohttp.ClientSession() as session:
        for what, body, status, pool in cases:
            got_status, server = await _send(session, stack.url, body)
            assert (got_status, POOL_OF.get(server)) == (status, pool), what


async def test_a_prompt_prefix_keeps_to_one_server_with_no_client_header(
    stack: Stack[Fleet],
) -> None:
    by_prefix: dict[int, Counter[str]] = {}
    async with aiohttp.ClientSession() as session:
        for prefix in range(12):
            for turn in range(4):
                body = _chat(f"question {turn}", system=f"You are assistant number {prefix}.")
                status, server = await _send(session, stack.url, body)
                assert status == 200
                by_prefix.setdefault(prefix, Counter())[server] += 1
    assert all(len(servers) == 1 for servers in by_prefix.values()), by_prefix
    used = {server for servers in by_prefix.values() for server in servers}
    assert len(used) >= 3, by_prefix
