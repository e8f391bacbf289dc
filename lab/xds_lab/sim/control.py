"""The fleet control endpoint: read and change any server's faults by name.

It listens on its own port, so a server that refuses connections (or restarts) can still be
told to recover. Routes: ``GET /servers``, ``GET|POST|DELETE /servers/{name}/faults``.
"""

from __future__ import annotations

from collections.abc import Mapping

from aiohttp import web
from pydantic import ValidationError

from xds_control.tasks import guarded_task
from xds_lab.sim.faults import FaultUpdate
from xds_lab.sim.server import SimServer

__all__ = ["control_app"]


def _describe(server: SimServer) -> dict[str, object]:
    return {
        "name": server.name,
        "profile": server.profile.name,
        "url": server.url,
        "faults": server.faults.describe(),
    }


def control_app(servers: Mapping[str, SimServer]) -> web.Application:
    """An aiohttp app controlling ``servers``."""

    def lookup(request: web.Request) -> SimServer:
        name = request.match_info["name"]
        if name not in servers:
            raise web.HTTPNotFound(text=f"no server named {name!r}")
        return servers[name]

    async def list_servers(_request: web.Request) -> web.Response:
        return web.json_response({"servers": [_describe(s) for s in servers.values()]})

    async def get_faults(request: web.Request) -> web.Response:
        return web.json_response(_describe(lookup(request)))

    async def post_faults(request: web.Request) -> web.Response:
        server = lookup(request)
        try:
            update = FaultUpdate.model_validate(await request.json())
        except (ValidationError, ValueError) as exc:
            raise web.HTTPBadRequest(text=str(exc)) from exc
        if update.restart is not None:
            guarded_task(server.update_faults(update), name=f"sim-restart-{server.name}")
        else:
            await server.update_faults(update)
        return web.json_response(_describe(server))

    async def delete_faults(request: web.Request) -> web.Response:
        server = lookup(request)
        await server.clear_faults()
        return web.json_response(_describe(server))

    app = web.Application()
    app.router.add_get("/servers", list_servers)
    app.router.add_get("/servers/{name}/faults", get_faults)
    app.router.add_post("/servers/{name}/faults", post_faults)
    app.router.add_delete("/servers/{name}/faults", delete_faults)
    return app
