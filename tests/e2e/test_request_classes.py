"""Request classes read from the body inside a real Envoy, over a simulated fleet: each class
lands on its pool, `match.model` works with no client header, unreadable bodies take the
default route, and a prompt prefix keeps to one server without the client hashing it. A route
over two pools of different engines (and metric dialects) splits by the engine's pool weights
and moves off a pool that slows down; a retry leaves the server that failed."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from e2e.engine_stack import load_in_background
from e2e.stack import eventually
from xds_lab.harness.fleet import local_fleet
from xds_lab.harness.ports import free_port
from xds_lab.harness.stack import Stack
from xds_lab.sim.faults import FaultUpdate
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
    # The default pool's servers serve any body (``lenient_body``), as a lenient
    # OpenAI-compatible server would; vLLM itself answers 400 to a body it cannot parse. So
    # a 200 from the general pool shows Envoy passed the unreadable body on, unchanged.
    servers = [
        ServerSpec(name=s, profile="vllm-h100", overrides={"lenient_body": POOL_OF[s] == "general"})
        for s in POOL_OF
    ]
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
        # Not JSON, and JSON that is no completion request: the default route, served.
        ("not json", b"this is not json", 200, "general"),
        ("not openai", {"input": "def f(x):" * 3000, "stream": True}, 200, "general"),
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


async def _envoy_split(stack: Stack[Fleet]) -> dict[str, int]:
    dump = await stack.envoy.config_dump()
    for config in dump["configs"]:
        for table in config.get("dynamic_route_configs", []):
            for route in table["route_config"]["virtual_hosts"][0]["routes"]:
                clusters = route["route"].get("weighted_clusters", {}).get("clusters", [])
                if clusters:
                    return {c["name"]: int(c["weight"]) for c in clusters}
    return {}


async def _split_served(
    stack: Stack[Fleet], pool_of: dict[str, str], *, requests: int = 200
) -> tuple[float, float]:
    """(share of pool "h100" in Envoy's weights, share of ``requests`` it served). The weights
    may move while the requests go: each batch of 20 counts at the weights Envoy had then."""
    weighted = served = 0.0
    async with aiohttp.ClientSession() as session:
        for _ in range(requests // 20):
            split = await _envoy_split(stack)
            weighted += split["h100"] / (split["h100"] + split["a100"])
            for status, server in await asyncio.gather(
                *(_send(session, stack.url, _chat("hi", max_tokens=1)) for _ in range(20))
            ):
                assert status == 200
                served += pool_of[server] == "h100"
    return weighted / (requests // 20), served / requests


async def test_a_route_over_two_engines_splits_by_pool_weights_and_moves_off_a_slow_pool(
    tmp_path: Path,
) -> None:
    # vLLM on H100 against SGLang on A100: each pool's servers export only their engine's
    # metric names (vllm:* and sglang:*), so each pool is read in its own dialect. (Not Triton:
    # its nv_* compute time is per request, not per step, so the engine does not compare it
    # with another engine's pool; see docs/routing.md.)
    pools = {"h100": ("vllm", ["v0", "v1"]), "a100": ("sglang", ["s0", "s1"])}
    servers = [
        ServerSpec(name=s, profile=f"{engine}-{pool}", overrides={"max_num_seqs": 8})
        for pool, (engine, names) in pools.items()
        for s in names
    ]
    stack = Stack(workdir=tmp_path, backends=local_fleet(servers))
    pool_of = {s: p for p, (_, names) in pools.items() for s in names}
    # Quick to follow, so the test takes seconds: no smoothing, no hysteresis to speak of.
    quick = {"max_num_seqs": 8, "ewma_alpha": 1.0, "max_step": 100, "hysteresis": 0.3}
    quick |= {"capacity_alpha": 0.2, "settle_s": 5.0, "warmup_s": 0}
    try:
        addresses = stack.backends.addresses
        await stack.start(
            {
                "pools": [
                    {
                        "name": p,
                        "engine": engine,
                        "endpoints": [{"address": addresses[s]} for s in names],
                        "weights": quick,
                    }
                    for p, (engine, names) in pools.items()
                ],
                "listeners": [
                    {
                        "name": "gateway",
                        "address": f"127.0.0.1:{stack.listener_port}",
                        "routes": [
                            {"name": "split", "pools": [{"name": "h100"}, {"name": "a100"}]}
                        ],
                    }
                ],
                "signals": {
                    "scrape": {"enabled": True, "interval_s": 0.25, "window_s": 2.0},
                    "reconcile_period_s": 0.25,
                },
            }
        )
        # Static shares (1:1) until the engine has measured both pools.
        assert await _envoy_split(stack) == {"h100": 1, "a100": 1}
        load_in_background(stack, rate=8, seconds=40)

        seen: list[Any] = []

        async def engine_in_envoy(faster: str, slower: str) -> bool:
            view = await stack.control_plane.get_json("/v1/weights?explain=1")
            found = view.get("routes", {}).get("gateway/split", {})
            seen[:] = [found]
            engine = {pool: why["weight"] for pool, why in found.items()}
            return (
                set(engine) == {"h100", "a100"}
                and engine[faster] >= 1.3 * engine[slower]
                and await _envoy_split(stack) == engine
            )

        # The H100s decode ~1.7x as fast as the A100s with the same batch slots.
        await eventually(
            lambda: engine_in_envoy("h100", "a100"), timeout=30, what="H100 pool weighted up"
        )
        weighted, served = await _split_served(stack, pool_of)
        assert weighted > 0.55, weighted
        assert abs(served - weighted) < 0.08, (weighted, served)

        for name in pools["h100"][1]:
            stack.backends.servers[name].faults.apply(FaultUpdate(slowdown=4))
        try:
            await eventually(lambda: engine_in_envoy("a100", "h100"), timeout=30, what="a move")
        except AssertionError:
            raise AssertionError(f"traffic stayed on the slow pool: {seen}") from None
        weighted, served = await _split_served(stack, pool_of)
        assert weighted < 0.45, weighted  # moved: the A100 pool now takes most
        assert abs(served - weighted) < 0.08, (weighted, served)
    finally:
        await stack.close()


KEYS = 100


async def test_a_retry_goes_to_another_server_even_under_maglev(tmp_path: Path) -> None:
    servers = [ServerSpec(name=f"s{i}", profile="vllm-h100") for i in range(3)]
    stack = Stack(workdir=tmp_path, backends=local_fleet(servers, time_scale=0.05))
    dead = f"127.0.0.1:{free_port()}"  # nothing listens: every connect there fails

    def config(other_host: bool) -> dict[str, Any]:
        live = [{"address": address} for address in stack.backends.addresses.values()]
        endpoints = [*live, {"address": dead}]
        route = {"name": "all", "pool": "p", "retry": {"other_host": other_host}}
        return {
            "pools": [{"name": "p", "endpoints": endpoints}],
            "listeners": [
                {
                    "name": "gateway",
                    "address": f"127.0.0.1:{stack.listener_port}",
                    "routes": [route],
                }
            ],
        }

    async def statuses() -> Counter[int]:
        got: Counter[int] = Counter()
        async with aiohttp.ClientSession() as session:
            for key in range(KEYS):
                headers = {"content-type": "application/json", "x-prefix-hash": f"k{key}"}
                body = json.dumps(_chat("hi", max_tokens=1))
                async with session.post(
                    f"{stack.url}/v1/chat/completions", data=body, headers=headers
                ) as resp:
                    await resp.read()
                    got[resp.status] += 1
        return got

    try:
        await stack.start(config(other_host=False))
        # MAGLEV maps a key to one host, so a plain retry tries the dead server again: the
        # keys that map to it (a quarter) fail.
        assert (await statuses())[503] > KEYS // 10
        stack.write_config(config(other_host=True))

        async def predicate_served() -> bool:
            dump = json.dumps(await stack.envoy.config_dump())
            return "previous_hosts" in dump

        await eventually(predicate_served, what="the retry host predicate in Envoy")

        async def workers_follow() -> bool:
            # The config dump is the main thread's; the worker takes the new routes a moment
            # later (seen: 0.5 s was not always enough on a busy machine).
            return await statuses() == Counter({200: KEYS})

        await eventually(workers_follow, what="Envoy's worker to retry on another host")
        assert await statuses() == Counter({200: KEYS})  # and it holds
    finally:
        await stack.close()
