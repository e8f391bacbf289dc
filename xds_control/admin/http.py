"""Admin HTTP: /healthz, /readyz, /metrics and JSON views under /v1/; and, when asked, the
typed gRPC admin API (``protos/xds_control/admin/v1/admin.proto``) on a port of its own."""

from __future__ import annotations

import asyncio

import grpc
from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from xds_control.admin.auth import grpc_interceptor, http_middleware, is_loopback
from xds_control.admin.events import EventLog
from xds_control.admin.exporter import refresh, refresh_limits
from xds_control.admin.grpc_api import AdminServicer
from xds_control.admin.kv_events import kv_events_view
from xds_control.admin.limits import limits_view
from xds_control.admin.protocol import AdminViews
from xds_control.admin.recorder import Recorder
from xds_control.admin.sync import streams_view
from xds_control.admin.v1 import admin_pb2_grpc
from xds_control.admin.views import endpoints_view, snapshot_view, status_view, weights_view
from xds_control.cache import group_names
from xds_control.config import parse_host_port
from xds_control.control.metrics import EVENT_LOOP_TASKS
from xds_control.errors import ServeError
from xds_control.tasks import guarded_task

__all__ = ["AdminServer"]


class AdminServer:
    """Serves the admin endpoints on ``address`` and, with ``grpc_address``, the gRPC admin
    API, both reading ``views``. On loopback both are open; bound elsewhere both need
    ``token`` (else ``ServeError``)."""

    def __init__(
        self,
        *,
        address: str,
        views: AdminViews,
        grpc_address: str | None = None,
        token: str | None = None,
    ) -> None:
        self._address = parse_host_port(address)
        self._views = views
        self._engine = views.engine
        self._state = views.state
        self._cache = views.cache
        self._registry = views.registry
        self._runner: web.AppRunner | None = None
        self.port = 0
        self.grpc_port = 0
        self._grpc_address = grpc_address
        self._token = token
        for where in (address, grpc_address):
            if where and token is None and not is_loopback(parse_host_port(where).host):
                raise ServeError(
                    f"admin on {where} is off loopback: set admin_token_file or "
                    "XDS_CONTROL_ADMIN_TOKEN (a bearer token every request must carry)"
                )
        self.events = EventLog()
        self._recorder = Recorder(
            events=self.events, state=views.state, cache=views.cache, registry=views.registry
        )
        self._recording: asyncio.Task[object] | None = None
        self._grpc: grpc.aio.Server | None = None
        app = web.Application(middlewares=[http_middleware(token)] if token else [])
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
                web.get("/v1/limits", self._limits),
                web.get("/v1/events", self._events),
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
        if self._grpc_address is not None:
            await self._start_grpc(self._grpc_address)
        self._recording = guarded_task(self._recorder.run(), name="admin-events")

    async def _start_grpc(self, address: str) -> None:
        interceptors = [grpc_interceptor(self._token)] if self._token else []
        self._grpc = grpc.aio.server(interceptors=interceptors)
        servicer = AdminServicer(views=self._views, events=self.events)
        admin_pb2_grpc.add_AdminServicer_to_server(servicer, self._grpc)
        try:
            self.grpc_port = self._grpc.add_insecure_port(address)
        except RuntimeError as exc:
            raise ServeError(f"admin gRPC cannot listen on {address}: in use") from exc
        await self._grpc.start()

    async def stop(self) -> None:
        """Stop serving."""
        if self._recording is not None:
            self._recording.cancel()
            await asyncio.gather(self._recording, return_exceptions=True)
        if self._grpc is not None:
            await self._grpc.stop(0.5)
        if self._runner is not None:
            await self._runner.cleanup()

    async def _healthz(self, request: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    async def _readyz(self, request: web.Request) -> web.Response:
        if self._views.failure is not None and (why := self._views.failure()) is not None:
            return web.Response(status=503, text=f"{why}\n")
        missing = [g for g in group_names(self._state.config) if self._cache.snapshot(g) is None]
        if missing:
            return web.Response(status=503, text=f"no snapshot published yet for {missing}\n")
        return web.Response(text="ready\n")

    async def _metrics(self, request: web.Request) -> web.Response:
        EVENT_LOOP_TASKS.set(len(asyncio.all_tasks()))
        engine = self._engine() if self._engine else None
        refresh(engine=engine, registry=self._registry, groups=group_names(self._state.config))
        refresh_limits(limits_view(self._views.limiter, config=self._state.config))
        body = generate_latest()
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def _status(self, request: web.Request) -> web.Response:
        body = status_view(self._state)
        if self._views.kv_events is not None:
            engine = self._engine() if self._engine else None
            body["kv_events"] = kv_events_view(self._views.kv_events, engine=engine)
        return web.json_response(body)

    async def _streams(self, request: web.Request) -> web.Response:
        return web.json_response(streams_view(registry=self._registry, cache=self._cache))

    async def _events(self, request: web.Request) -> web.Response:
        try:
            after = int(request.query.get("after") or 0)
            limit = int(request.query.get("limit") or 0)
        except ValueError:
            return web.Response(status=400, text="after and limit are whole numbers\n")
        return web.json_response([e.to_json() for e in self.events.since(after, limit=limit)])

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

    async def _limits(self, request: web.Request) -> web.Response:
        view = limits_view(
            self._views.limiter,
            config=self._state.config,
            token_budgets=self._views.token_budgets,
        )
        return web.json_response(view)
