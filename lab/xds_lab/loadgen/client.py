"""Send one request and time it the way a user sees it."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import aiohttp

from xds_lab.loadgen.workloads import RequestSpec

__all__ = ["Result", "Route", "send"]

Route = Callable[[RequestSpec], Awaitable[str]]
"""Chooses a base URL per request (a picker the load generator asks itself); its time counts
in the request's latency, as a real picker's would."""


@dataclass(slots=True)
class Result:
    """What happened to one request; times in seconds, ``None`` when not observable."""

    index: int
    scheduled: float
    started: float
    status: int
    e2e_s: float
    ttft_s: float | None = None
    output_tokens: int = 0
    cached_tokens: int = 0
    prompt_tokens: int = 0
    server: str = ""
    error: str = ""
    stream: bool = False

    @property
    def tpot_s(self) -> float | None:
        """Time per output token after the first (streamed requests only)."""
        if self.ttft_s is None or self.output_tokens < 2:
            return None
        return (self.e2e_s - self.ttft_s) / (self.output_tokens - 1)

    @property
    def ok(self) -> bool:
        """A 200 answer that arrived whole."""
        return self.status == 200 and not self.error


def _usage(result: Result, usage: object) -> None:
    if not isinstance(usage, dict):
        return
    result.output_tokens = int(usage.get("completion_tokens", result.output_tokens))
    result.prompt_tokens = int(usage.get("prompt_tokens", result.prompt_tokens))
    details = usage.get("prompt_tokens_details")
    if isinstance(details, dict):
        result.cached_tokens = int(details.get("cached_tokens") or 0)


async def _read_stream(resp: aiohttp.ClientResponse, result: Result, start: float) -> None:
    pieces = 0
    async for raw in resp.content:
        line = raw.strip()
        if not line.startswith(b"data:"):
            continue
        data = line[5:].strip()
        if data == b"[DONE]":
            break
        chunk = json.loads(data)
        for choice in chunk.get("choices") or ():
            text = choice.get("text") or (choice.get("delta") or {}).get("content") or ""
            if text and result.ttft_s is None:
                result.ttft_s = time.monotonic() - start
            pieces += len(text.split())
        if chunk.get("usage"):
            _usage(result, chunk["usage"])
    if not result.output_tokens:
        result.output_tokens = pieces  # no usage chunk: count words, the sim's token rule


async def send(
    session: aiohttp.ClientSession,
    base_url: str,
    spec: RequestSpec,
    *,
    scheduled: float,
    server_header: str = "x-sim-server",
    timeout_s: float = 120.0,
    route: Route | None = None,
) -> Result:
    """Send ``spec`` to ``base_url``, or where ``route`` says; never raises for network or HTTP
    errors (they land in ``Result.error``)."""
    start = time.monotonic()
    result = Result(
        index=spec.index,
        scheduled=scheduled,
        started=start,
        status=0,
        e2e_s=0.0,
        prompt_tokens=spec.prompt_tokens,
        stream=spec.stream,
    )
    try:
        async with asyncio.timeout(timeout_s):
            if route is not None:
                base_url = await route(spec)
            async with session.post(
                base_url + spec.path, json=spec.body, headers=spec.headers
            ) as resp:
                result.status = resp.status
                result.server = resp.headers.get(server_header, "")
                if resp.status != 200:
                    await resp.read()
                elif spec.stream:
                    await _read_stream(resp, result, start)
                else:
                    _usage(result, (await resp.json()).get("usage"))
    except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
        result.error = f"{type(exc).__name__}: {exc}"
    result.e2e_s = time.monotonic() - start
    return result
