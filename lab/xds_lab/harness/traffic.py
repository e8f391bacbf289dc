"""Send many small requests through Envoy and count which backend answered each."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Mapping

import aiohttp

__all__ = ["count_backends", "shares"]


async def count_backends(
    *,
    url: str,
    count: int,
    headers_for: Callable[[int], Mapping[str, str]],
    backend_header: str,
    concurrency: int = 16,
) -> Counter[str]:
    """Send ``count`` GETs (request ``i`` with ``headers_for(i)``); count the backend header of
    each answer (``"error"`` for a failure, ``"status:<code>"`` for a non-200)."""
    counts: Counter[str] = Counter()
    queue: asyncio.Queue[int] = asyncio.Queue()
    for i in range(count):
        queue.put_nowait(i)
    timeout = aiohttp.ClientTimeout(total=10)

    async def worker(session: aiohttp.ClientSession) -> None:
        while not queue.empty():
            i = queue.get_nowait()
            try:
                async with session.get(url, headers=dict(headers_for(i))) as response:
                    await response.read()
                    if response.status == 200:
                        counts[response.headers.get(backend_header, "unknown")] += 1
                    else:
                        counts[f"status:{response.status}"] += 1
            except (aiohttp.ClientError, TimeoutError):
                counts["error"] += 1

    async with aiohttp.ClientSession(timeout=timeout) as session:
        await asyncio.gather(*(worker(session) for _ in range(concurrency)))
    return counts


def shares(counts: Counter[str]) -> dict[str, float]:
    """Each key's fraction of the total."""
    total = sum(counts.values())
    return {key: value / total for key, value in counts.items()} if total else {}
