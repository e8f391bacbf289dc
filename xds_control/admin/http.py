"""Admin HTTP: /healthz, /readyz, /metrics and JSON views under /v1/."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from xds_control.admin.views import endpoints_view, snapshot_view, status_view, weights_view
from xds_control.cache import SnapshotCache, group_names
from xds_control.config import parse_host_port
from xds_control.control import EngineView, LoopState
from xds_control.control.metrics import EVENT_LOOP_TASKS
from xds_control.errors import ServeError
from xds_control.server import StreamRegistry

__all__ = ["AdminServer"]


class AdminServer:
    """Serves the admin endpoints on ``address`` (loopback by default: unauthenticated)."""

    def __init__(
        self,
        *,
        address: str,
        state: LoopState,
        cache: SnapshotCache,
        registry: StreamRegistry,
        engine: Callable[[], EngineView] | None = None,
        failure: Callable[[], str | None] | None = None,
    ) -> None:
        """``failure`` says why the process is not ready although it serves a snapshot (a
        critical task died; the process is about to exit), or ``None``."""
        self._address = parse_host_port(address)
        self._engine = engine
        self._failure = failure
        self._state = state
        self._cache = cache
        self._registry = registry
        self._runner: web.AppRunner | None = None
        self.port = 0
        app = web.Application()
        app.add_routes(
            [
                web.get("/healthz", self._healthz),
                web.get("/readyz", self._readyz),
                web.get("/metrics", self._metrics),
                web.get("/v1/status", self._status),
                web.get("/v1/streams", self._streams),
                web.get("/v1/snapshot", self._snapshot),
                web.get("/v1/endpoints", self._endpoints),
                web.get("/v1/weights", self._weights),
            ]
        )
        self._app = app

    async def start(self) -> None:
        """Bind and serve."""
        self._runner = web.AppRunner(self._app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self._address.host, self._address.port)
        try:
            await site.start()
        except OSError as exc:
            await self._runner.cleanup()
            address = f"{self._address.host}:{self._address.port}"
            raise ServeError(f"admin HTTP cannot listen on {address}: {exc.strerror}") from exc
        server = site._server  # aiohttp keeps the bound socket here; needed for port 0
        sockets = getattr(server, "sockets", None) or []
        self.port = sockets[0].getsockname()[1] if sockets else self._address.port

    async def stop(self) -> None:
        """Stop serving."""
        if self._runner is not None:
            await self._runner.cleanup()

    async def _healthz(self, request: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    async def _readyz(self, request: web.Request) -> web.Response:
        if self._failure is not None and (why := self._failure()) is not None:
            return web.Response(status=503, text=f"{why}\n")
        missing = [g for g in group_names(self._state.config) if self._cache.snapshot(g) is None]
        if missing:
            return web.Response(status=503, text=f"no snapshot published yet for {missing}\n")
        return web.Response(text="ready\n")

    async def _metrics(self, request: web.Request) -> web.Response:
        EVENT_LOOP_TASKS.set(len(asyncio.all_tasks()))
        body = generate_latest()
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def _status(self, request: web.Request) -> web.Response:
        return web.json_response(status_view(self._state))

    async def _streams(self, request: web.Request) -> web.Response:
        return web.json_response(self._registry.describe())

    async def _snapshot(self, request: web.Request) -> web.Response:
        resources = request.query.get("resources", "") in {"1", "true", "yes"}
        snapshot = self._cache.snapshot(self._group(request))
        return web.json_response(snapshot_view(snapshot, resources=resources))

    async def _endpoints(self, request: web.Request) -> web.Response:
        return web.json_response(endpoints_view(self._cache.snapshot(self._group(request))))

    def _group(self, request: web.Request) -> str:
        # ?group=NAME picks a node group; the first one (the only one without node_groups)
        # otherwise.
        return request.query.get("group") or group_names(self._state.config)[0]

    async def _weights(self, request: web.Request) -> web.Response:
        explain = request.query.get("explain", "") in {"1", "true", "yes"}
        snapshot = self._cache.snapshot(self._group(request))
        return web.json_response(
            weights_view(self._engine() if self._engine else None, snapshot, explain=explain)
        )
