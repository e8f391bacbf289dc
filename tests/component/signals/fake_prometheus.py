"""A stand-in for Prometheus' ``/api/v1/query`` on loopback whose answer a test sets."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from aiohttp import web
from aiohttp.test_utils import TestServer

__all__ = ["Answer", "serving", "vector"]

Answer = Callable[[str], web.StreamResponse | None]
"""PromQL -> the response; ``None``: hang for 5 s (a Prometheus that does not answer)."""


def vector(values: dict[str, str]) -> web.Response:
    """An instant vector: one sample per ``instance`` label value."""
    result = [{"metric": {"instance": a}, "value": [1.7e9, v]} for a, v in values.items()]
    return web.json_response(
        {"status": "success", "data": {"resultType": "vector", "result": result}}
    )


@asynccontextmanager
async def serving(first: Answer) -> AsyncIterator[tuple[list[Answer], str]]:
    """The server, answering with ``answers[0]`` (a test replaces it), and its base URL."""
    answers: list[Answer] = [first]

    async def handle(request: web.Request) -> web.StreamResponse:
        answer = answers[0](str((await request.post())["query"]))
        if answer is None:
            await asyncio.sleep(5)
            return vector({})
        return answer

    app = web.Application()
    app.router.add_post("/api/v1/query", handle)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    try:
        yield answers, str(server.make_url(""))
    finally:
        await server.close()
