"""The picker follows what the servers hold, as their KV-cache events say, through a real Envoy:
with the model's tokenizer mounted (``picker.tokenizer``) it cuts each prompt into the
engine's token ids and matches them against the blocks every server published. A prompt the
picker once sent to one server, which has since evicted it, and which another server now
holds, goes to the one that holds it: the response reports the prompt served from cache. Cut
off from the servers' events for 5 s, the control plane catches up through their replay
sockets."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from e2e.stack import eventually
from xds_lab.harness.fleet import local_fleet
from xds_lab.harness.pool_config import one_pool_config
from xds_lab.harness.ports import free_port
from xds_lab.harness.stack import Stack
from xds_lab.sim.fleet import Fleet, ServerSpec
from xds_lab.sim.kv_publisher import KvEventsSpec, KvPublisher
from xds_lab.sim.server import SERVER_HEADER, SimServer
from xds_lab.sim.tokenizer import write
from xds_lab.vocabulary import VOCABULARY

NAMES = ("s0", "s1", "s2")
TIMEOUT = aiohttp.ClientTimeout(total=20)
CUT_S = 5.0
BLOCKS = 40
"""Each server's KV cache, in 16-token blocks: three 256-word prompts evict a fourth."""


def _short(word: str) -> dict[str, Any]:
    """A prompt of two blocks: it evicts nothing of a 256-word prompt."""
    messages = [{"role": "user", "content": " ".join([word] * 32)}]
    return {"model": "m", "messages": messages, "max_tokens": 1}


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


@dataclass
class _Lab:
    stack: Stack[Fleet]
    sims: dict[str, SimServer]
    publishers: dict[str, KvPublisher]

    async def rows(self) -> dict[str, dict[str, Any]]:
        """Server name -> its row of ``/v1/status``'s ``kv_events``."""
        by_address = {f"127.0.0.1:{s.port}": n for n, s in self.sims.items()}
        status = await self.stack.control_plane.get_json("/v1/status")
        return {by_address[r["server"]]: r for r in status["kv_events"]}

    async def caught_up(self) -> bool:
        """Every server's events up to its last one are in the control plane's index."""
        rows = await self.rows()
        return rows.keys() == set(NAMES) and all(
            p.seq - 1 == rows[n]["last_seq"] for n, p in self.publishers.items()
        )


LAYOUTS = {"vllm": "vllm-0.11", "sglang": "sglang"}
"""The layout each engine's servers publish in these tests."""


@contextlib.asynccontextmanager
async def _lab(tmp_path: Path, *, engine: str = "vllm") -> AsyncIterator[_Lab]:
    """Three event-publishing servers of ``engine`` behind the picker with the lab's tokenizer
    mounted."""
    servers = [
        ServerSpec(
            name=name,
            profile=f"{engine}-h100",
            overrides={"kv_blocks": BLOCKS},
            kv_events=KvEventsSpec.model_validate(
                {"layout": LAYOUTS[engine], "port": free_port(), "replay_port": free_port()}
            ),
        )
        for name in NAMES
    ]
    stack: Stack[Fleet] = Stack(workdir=tmp_path, backends=local_fleet(servers, time_scale=0.1))
    tokenizer = write(tmp_path / "tokenizer")
    try:
        sims = stack.backends.servers
        publishers = {n: p for n, s in sims.items() if (p := s.kv_publisher) is not None}
        endpoints = [
            {
                "address": f"127.0.0.1:{sims[n].port}",
                "kv_events": {"port": p.port, "replay_port": p.replay_port},
            }
            for n, p in publishers.items()
        ]
        config = one_pool_config(
            endpoints=endpoints,
            listener_port=stack.listener_port,
            pool={
                "engine": engine,
                "picker": {"address": f"127.0.0.1:{free_port()}", "tokenizer": str(tokenizer)},
                "kv_events": {},
            },
        )
        await stack.start(config)
        yield _Lab(stack=stack, sims=sims, publishers=publishers)
    finally:
        await stack.close()


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
async def test_the_picker_sends_a_prompt_where_the_events_say_it_is_held(
    tmp_path: Path, engine: str
) -> None:
    """SGLang's servers publish vLLM 0.9's structs one page at a time, with signed hashes."""
    async with _lab(tmp_path, engine=engine) as lab, aiohttp.ClientSession(timeout=TIMEOUT) as http:
        # First request of the prompt: nobody holds it; the picker places it.
        first, cached = await _post(http, lab.stack.url, _prompt(0))
        assert cached == 0
        # Since then: that server evicted it (three other prompts sent to it directly, not
        # through the picker), and another one took it in.
        other = next(n for n in NAMES if n != first)
        for k in (1, 2, 3):
            await _post(http, lab.sims[first].url, _prompt(1000 + k))
        await _post(http, lab.sims[other].url, _prompt(0))
        await eventually(lab.caught_up, what="every server's events read")

        # Routing history says `first`; the events say `other`, and `other` serves it from
        # its cache.
        served, cached = await _post(http, lab.stack.url, _prompt(0))
        assert served == other
        assert cached >= 256


async def test_a_subscriber_cut_off_for_5_s_catches_up_through_replay(tmp_path: Path) -> None:
    async with _lab(tmp_path) as lab, aiohttp.ClientSession(timeout=TIMEOUT) as http:
        first, _ = await _post(http, lab.stack.url, _prompt(0))
        await eventually(lab.caught_up, what="every server's events read")
        other = next(n for n in NAMES if n != first)
        replays = {n: p.replays for n, p in lab.publishers.items()}

        # Cut off for 5 s: meanwhile `first` evicts the prompt and `other` takes it in, and
        # none of it reaches the control plane.
        cut_at = time.monotonic()
        for publisher in lab.publishers.values():
            publisher.cut(CUT_S)
        for k in (1, 2, 3):
            await _post(http, lab.sims[first].url, _prompt(1000 + k))
        await _post(http, lab.sims[other].url, _prompt(0))
        assert not await lab.caught_up()
        await asyncio.sleep(CUT_S - (time.monotonic() - cut_at) + 0.2)

        # Back: each server's next batch shows the gap, and its replay fills it.
        for name in (first, other):
            await _post(http, lab.sims[name].url, _short(name))
        await eventually(lab.caught_up, what="every server's events read after the cut")
        rows = await lab.rows()
        assert all(rows[n]["lost"] == 0 for n in NAMES), rows
        assert all(lab.publishers[n].replays > replays[n] for n in (first, other))

        # What the replay brought decides: `other` holds the prompt, `first` no longer does.
        served, cached = await _post(http, lab.stack.url, _prompt(0))
        assert served == other
        assert cached >= 256
