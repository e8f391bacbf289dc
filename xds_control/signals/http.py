"""One HTTP request for signals, with the signals' error contract.

Prometheus' query API and each endpoint's ``/metrics`` are read through this one function, so a
failure reads the same wherever it happened: a ``QueryError`` whose ``outcome`` is ``timeout``,
``http`` or ``error`` (what the callers' counters label), translated from aiohttp's and asyncio's
exceptions where they enter. What the body means (a PromQL vector, an exposition) is the
caller's to parse, and a body that does not parse is its ``garbage``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass

import aiohttp

from xds_control.errors import QueryError

__all__ = ["Answer", "request"]


@dataclass(frozen=True, slots=True)
class Answer:
    """A 200 answer's body, and the text encoding its Content-Type gives (aiohttp's reading:
    the charset, else UTF-8)."""

    body: bytes
    encoding: str


async def request(
    client: aiohttp.ClientSession,
    *,
    url: str,
    timeout_s: float,
    form: Mapping[str, str] | None = None,
) -> Answer:
    """GET ``url`` (POST ``form`` when given); the answer of a 200 within ``timeout_s``, else
    ``QueryError``. A status other than 200 carries the start of its body: Prometheus answers
    400, 422 and 503 with a JSON error worth logging."""
    try:
        async with asyncio.timeout(timeout_s):
            method = "GET" if form is None else "POST"
            async with client.request(method, url, data=form) as response:
                body = await response.read()
                if response.status != 200:
                    detail = body[:200].decode("utf-8", errors="replace")
                    raise QueryError("http", f"HTTP {response.status}: {detail}")
                return Answer(body=body, encoding=response.get_encoding())
    except TimeoutError as exc:
        raise QueryError("timeout", f"no answer within {timeout_s}s") from exc
    except aiohttp.ClientError as exc:
        raise QueryError("error", f"{type(exc).__name__}: {exc}") from exc
