"""The per-request picker through a real Envoy: requests go to the server the picker names
(the same prefix to the same server), and when the picker dies mid-run no request fails and
traffic falls back to the pool's weighted MAGLEV, bounded by Envoy's own load count."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from pathlib import Path

import aiohttp

from e2e.stack import EchoStack, echo_stack, eventually
from xds_control.config.picker import PoolPicker
from xds_control.picker.prefix import prefix_key
from xds_control.picker.score import Candidate, rank
from xds_lab.harness.backends import BACKEND_HEADER
from xds_lab.harness.pool_config import one_pool_config
from xds_lab.harness.ports import free_port

WEIGHTS = [10, 10, 10, 70]


def _body(system: str) -> bytes:
    messages = [{"role": "system", "content": system}, {"role": "user", "content": "hi"}]
    return json.dumps({"model": "m", "messages": messages}).encode()


def first_choice(candidates: list[Candidate], prompt: str) -> str:
    """What the picker, at its default settings, names for a prefix it has not seen: its
    rendezvous choice."""
    defaults = PoolPicker(address="127.0.0.1:1")
    key = prefix_key(_body(prompt), prefix_bytes=defaults.prefix_bytes)
    assert key is not None
    ranking = rank(
        candidates, key=key, affinity=defaults.affinity, move_cost=defaults.move_cost, count=1
    )
    return ranking.order[0]


async def _post(
    session: aiohttp.ClientSession, url: str, body: bytes, headers: dict[str, str] | None = None
) -> str:
    """The backend that answered, or ``error``/``status:<code>``."""
    try:
        async with session.post(url, data=body, headers=headers) as response:
            await response.read()
            if response.status != 200:
                return f"status:{response.status}"
            return response.headers.get(BACKEND_HEADER, "unknown")
    except (aiohttp.ClientError, TimeoutError):
        return "error"


async def test_picker_routes_by_prefix_and_fails_open(tmp_path: Path) -> None:
    stack: EchoStack = echo_stack(tmp_path, backends=len(WEIGHTS))
    try:
        backends = stack.backends
        config = one_pool_config(
            endpoints=[
                {"address": backends.address(i), "weight": w} for i, w in enumerate(WEIGHTS)
            ],
            listener_port=stack.listener_port,
            pool={"picker": {"address": f"127.0.0.1:{free_port()}"}},
        )
        await stack.start(config)
        url = f"{stack.url}/v1/chat/completions"
        candidates = [
            Candidate(address=backends.address(i), weight=w, healthy=True)
            for i, w in enumerate(WEIGHTS)
        ]

        def picked(prompt: str) -> str:
            return first_choice(candidates, prompt)

        # Twelve prompts whose choices are not all the heavy server (the choice depends on
        # the ports of this run), so landing where the picker says is not landing where the
        # weights would send most requests anyway.
        named = (f"You are assistant number {n}." for n in range(1000))
        prompts = [next(named) for _ in range(11)]
        light_servers = {backends.address(i) for i in range(3)}
        prompts.append(next(p for p in named if picked(p) in light_servers))

        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session:
            # The picker on: every request lands where the picker says; a prompt's three
            # requests on one server (4 servers, 36 requests: chance cannot pass this).
            served = {p: [await _post(session, url, _body(p)) for _ in range(3)] for p in prompts}
            assert served == {p: [picked(p)] * 3 for p in prompts}

            # Kill the picker (it lives in the control plane) mid-run: no request fails.
            results: list[str] = []
            running = True

            async def load(worker: int) -> None:
                n = 0
                while running:
                    results.append(await _post(session, url, _body(f"w{worker}-{n % 5}")))
                    n += 1

            workers = [asyncio.create_task(load(w)) for w in range(4)]
            await eventually(lambda: _true(len(results) >= 40), what="load before the kill")
            stack.control_plane.process.kill()
            killed_at = len(results)
            await eventually(
                lambda: _true(len(results) >= killed_at + 80), what="load after the kill"
            )
            running = False
            await asyncio.gather(*workers)
            failures = Counter(r for r in results if r not in backends.addresses)
            assert not failures, failures

            # Without the picker: weighted MAGLEV on the route's hash key decides. One key, one
            # server; distinct keys mostly on the heavy server.
            same = {
                await _post(session, url, _body("x"), {"x-prefix-hash": "one"}) for _ in range(5)
            }
            assert len(same) == 1, same
            homes = [
                await _post(session, url, _body("x"), {"x-prefix-hash": f"k{i}"}) for i in range(60)
            ]
            assert Counter(homes)[backends.address(3)] > 30, Counter(homes)

            # The weights are frozen now; the fallback's bounded load still reacts. A burst on a
            # key of a light server (a tenth of the weight) overflows to others, none fails.
            light = next(f"k{i}" for i, home in enumerate(homes) if home != backends.address(3))
            burst = await asyncio.gather(
                *(_post(session, url, _body("x"), {"x-prefix-hash": light}) for _ in range(30))
            )
            assert set(burst) <= set(backends.addresses), Counter(burst)
            assert len(set(burst)) > 1, Counter(burst)
        stats = await stack.envoy.stats()
        # Every request after the kill went through Envoy's fail-open path, none was refused.
        assert stats["http.gateway.ext_proc.picker.failure_mode_allowed"] >= 80 + 65, stats
    finally:
        await stack.close()


async def _true(value: bool) -> bool:
    """``value`` as the awaitable ``eventually`` polls."""
    return value
