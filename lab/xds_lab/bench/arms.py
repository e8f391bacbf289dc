"""What a filter adds to a request, measured as two arms through one Envoy: a plain listener and
one with the filter, in front of the same fast backend, offered the same open-loop rate.

The arms alternate round by round (A, B, B, A, ...), so drift on a shared machine falls on both;
latency is the client's, request sent to response read, over loopback. The classifier and the
limiter benchmarks differ only in their config and their tables.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field

import aiohttp

__all__ = ["ArmSamples", "alternate_arms", "chat_body", "open_loop"]


def chat_body(kib: int) -> bytes:
    """An OpenAI chat request of about ``kib`` KiB: a system prompt and a user message."""
    filler = "Summarise the following text in one line. " * (kib * 1024 // 43 + 1)
    body = {
        "model": "meta-llama/Llama-3.1-8B-Instruct",
        "messages": [
            {"role": "system", "content": "You are a concise assistant."},
            {"role": "user", "content": filler[: max(0, kib * 1024 - 160)]},
        ],
        "max_tokens": 64,
        "stream": False,
    }
    return json.dumps(body).encode()


@dataclass
class ArmSamples:
    """One arm's latencies of requests answered 200, and how many were not."""

    latencies_s: list[float] = field(default_factory=list)
    failed: int = 0


async def open_loop(
    session: aiohttp.ClientSession, url: str, body: bytes, *, rate: float, seconds: float
) -> ArmSamples:
    """Open-loop arrivals at ``rate`` for ``seconds``: each answered request's latency."""
    got = ArmSamples()
    headers = {"content-type": "application/json"}

    async def one() -> None:
        started = time.perf_counter()
        try:
            async with session.post(url, data=body, headers=headers) as resp:
                await resp.read()
                ok = resp.status == 200
        except aiohttp.ClientError:
            ok = False
        if ok:
            got.latencies_s.append(time.perf_counter() - started)
        else:
            got.failed += 1

    loop = asyncio.get_running_loop()
    start = loop.time() + 0.05
    tasks = []
    for i in range(int(rate * seconds)):
        delay = start + i / rate - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(one()))
    await asyncio.gather(*tasks)
    return got


async def alternate_arms(
    session: aiohttp.ClientSession,
    urls: dict[str, str],
    body: bytes,
    *,
    rate: float,
    seconds: float,
    rounds: int,
) -> dict[str, ArmSamples]:
    """A one-second warm-up per arm (connections, filter state, route tables), then ``rounds``
    rounds per arm, the order reversed every other round."""
    arms = list(urls)
    for arm in arms:
        await open_loop(session, urls[arm], body, rate=rate, seconds=1.0)
    samples = {arm: ArmSamples() for arm in arms}
    for r in range(rounds):
        for arm in arms if r % 2 == 0 else arms[::-1]:
            got = await open_loop(session, urls[arm], body, rate=rate, seconds=seconds)
            samples[arm].latencies_s += got.latencies_s
            samples[arm].failed += got.failed
    return samples
