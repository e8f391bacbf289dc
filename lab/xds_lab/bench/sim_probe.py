"""The fleet process's benchmark-only routes under ``/lab``: its event-loop lag, and the ideal
picker's exact view of every server (``ideal.py``).

Both live in the fleet's process because that is where the truth is: the lag of the loop that
runs every simulated server, and the servers' KV caches (block hashes are Python ``hash``
values, which another process cannot reproduce).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import aiohttp
from aiohttp import web

from xds_lab.bench.ideal import ServerView, pick
from xds_lab.loadgen.loop_lag import LagTicker
from xds_lab.sim.server import SimServer
from xds_lab.sim.tokens import BLOCK_SIZE, block_hashes, chat_tokens, text_tokens

__all__ = ["probe_app", "read_fleet_lag"]

_TICKER: web.AppKey[LagTicker] = web.AppKey("lag_ticker", LagTicker)


def _tokens(path: str, body: Mapping[str, Any]) -> list[str]:
    if path.endswith("/chat/completions"):
        return chat_tokens(m for m in body.get("messages") or () if isinstance(m, Mapping))
    return text_tokens(str(body.get("prompt", "")))


def _view(server: SimServer, hashes: list[int], prompt_tokens: int) -> ServerView:
    sched = server.scheduler
    max_hit = max(0, (prompt_tokens - 1) // BLOCK_SIZE)
    return ServerView(
        name=server.name,
        profile=server.profile,
        hit_tokens=min(sched.kv.match(hashes), max_hit) * BLOCK_SIZE,
        queued_tokens=sum(seq.prompt_tokens for seq in sched.waiting),
        running=len(sched.running),
        slowdown=server.faults.slowdown,
    )


def probe_app(servers: Mapping[str, SimServer]) -> web.Application:
    """``GET /lag`` (the loop's lag since the last read) and ``POST /pick`` (the ideal server
    for ``{"path", "body", "servers", "tpot_s"}``)."""

    async def lag(request: web.Request) -> web.Response:
        return web.json_response(request.app[_TICKER].take())

    async def best(request: web.Request) -> web.Response:
        data = await request.json()
        tokens = _tokens(str(data["path"]), data["body"])
        hashes = block_hashes(tokens)
        names = [n for n in data.get("servers") or servers if n in servers]
        views = [_view(servers[n], hashes, len(tokens)) for n in names]
        chosen = pick(views, prompt_tokens=len(tokens), tpot_s=float(data["tpot_s"]))
        return web.json_response({"server": chosen})

    async def start(app: web.Application) -> None:
        app[_TICKER].start()

    async def stop(app: web.Application) -> None:
        await app[_TICKER].stop()

    app = web.Application()
    app[_TICKER] = LagTicker()
    app.on_startup.append(start)
    app.on_cleanup.append(stop)
    app.router.add_get("/lag", lag)
    app.router.add_post("/pick", best)
    return app


async def read_fleet_lag(control_url: str) -> dict[str, float]:
    """The fleet process's loop lag since the previous read (``loop_lag.lag_summary``)."""
    timeout = aiohttp.ClientTimeout(total=10)
    async with (
        aiohttp.ClientSession(timeout=timeout) as http,
        http.get(control_url + "/lab/lag") as resp,
    ):
        resp.raise_for_status()
        data: dict[str, float] = await resp.json()
        return data
