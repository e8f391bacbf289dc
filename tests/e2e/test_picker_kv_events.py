"""The picker follows what the servers hold, as their KV-cache events say, through a real Envoy:
with the model's tokenizer mounted (``picker.tokenizer``) it cuts each prompt into the
engine's token ids and matches them against the blocks every server published. A prompt the
picker once sent to one server, which has since evicted it, and which another server now
holds, goes to the one that holds it: the response reports the prompt served from cache."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aiohttp

from e2e.stack import eventually
from xds_lab.harness.fleet import local_fleet
from xds_lab.harness.pool_config import one_pool_config
from xds_lab.harness.ports import free_port
from xds_lab.harness.stack import Stack
from xds_lab.sim.fleet import Fleet, ServerSpec
from xds_lab.sim.kv_publisher import KvEventsSpec
from xds_lab.sim.server import SERVER_HEADER
from xds_lab.sim.tokenizer import write
from xds_lab.vocabulary import VOCABULARY

NAMES = ("s0", "s1", "s2")
BLOCKS = 40
"""Each server's KV cache, in 16-token blocks: three 256-word prompts evict a fourth."""


def _prompt(offset: int) -> dict[str, Any]:
    words = " ".join(VOCABULARY[(offset + 7 * i) % len(VOCABULARY)] for i in range(256))
    messages = [{"role": "system", "content": words}, {"role": "user", "content": "kakaka"}]
    return {"model": "m", "messages": messages, "max_tokens": 1}


async def _post(http: aiohttp.ClientSession, url: str, body: dict[str, Any]) -> tuple[str, int]:
    """Which server answered, and how many prompt tokens it served from its cache."""
    async with http.post(f"{url}/v1/chat/completions", data=json.dumps(body)) as response:
        assert response.status == 200, await response.text()
        usage = (await response.json())["usage"]
        return response.headers[SERVER_HEADER], usage["prompt_tokens_details"]["cached_tokens"]


async def test_the_picker_sends_a_prompt_where_the_events_say_it_is_held(tmp_path: Path) -> None:
    servers = [
        ServerSpec(
            name=name,
            profile="vllm-h100",
            overrides={"kv_blocks": BLOCKS},
            kv_events=KvEventsSpec.model_validate(
                {"layout": "vllm-0.11", "port": free_port(), "replay_port": free_port()}
            ),
        )
        for name in NAMES
    ]
    stack: Stack[Fleet] = Stack(workdir=tmp_path, backends=local_fleet(servers, time_scale=0.1))
    tokenizer = write(tmp_path / "tokenizer")
    try:
        sims = stack.backends.servers
        publishers = {n: s.kv_publisher for n, s in sims.items()}
        endpoints = [
            {
                "address": f"127.0.0.1:{sims[n].port}",
                "kv_events": {"port": p.port, "replay_port": p.replay_port},
            }
            for n, p in publishers.items()
            if p is not None
        ]
        config = one_pool_config(
            endpoints=endpoints,
            listener_port=stack.listener_port,
            pool={
                "picker": {"address": f"127.0.0.1:{free_port()}", "tokenizer": str(tokenizer)},
                "kv_events": {},
            },
        )
        await stack.start(config)
        by_address = {f"127.0.0.1:{s.port}": n for n, s in sims.items()}

        async def caught_up() -> bool:
            # Every server's events up to its last one are in the control plane's index.
            rows = await stack.control_plane.get_json("/v1/status")
            seen = {by_address[r["server"]]: r["last_seq"] for r in rows["kv_events"]}
            return seen.keys() == set(NAMES) and all(
                p.seq - 1 == seen[n] for n, p in publishers.items() if p is not None
            )

        timeout = aiohttp.ClientTimeout(total=20)
        async with aiohttp.ClientSession(timeout=timeout) as http:
            # First request of the prompt: nobody holds it; the picker places it.
            first, cached = await _post(http, stack.url, _prompt(0))
            assert cached == 0
            # Since then: that server evicted it (three other prompts sent to it directly,
            # not through the picker), and another one took it in.
            other = next(n for n in NAMES if n != first)
            for k in (1, 2, 3):
                await _post(http, sims[first].url, _prompt(1000 + k))
            await _post(http, sims[other].url, _prompt(0))
            await eventually(caught_up, what="every server's events read")

            # Routing history says `first`; the events say `other`, and `other` serves it
            # from its cache.
            served, cached = await _post(http, stack.url, _prompt(0))
            assert served == other
            assert cached >= 256
    finally:
        await stack.close()
