"""One simulated inference server: an aiohttp app in front of a ``Scheduler``.

Routes: ``POST /v1/completions`` and ``/v1/chat/completions`` (JSON or SSE, ``completions.py``),
``GET /v1/models``, ``/health``, ``/metrics``, and the control endpoint ``GET|POST|DELETE
/sim/faults``. Every response carries ``x-sim-server: <name>`` so a client behind Envoy can tell
who answered.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
import uuid
from typing import Any

import structlog
from aiohttp import web
from pydantic import ValidationError

from xds_control.tasks import guarded_task
from xds_lab.sim.completions import JSON_ERRORS, Completions
from xds_lab.sim.faults import FaultState, FaultUpdate
from xds_lab.sim.kv_publisher import KvEventsSpec, KvPublisher
from xds_lab.sim.metrics import GaugeView, render_metrics
from xds_lab.sim.openai_api import error_body
from xds_lab.sim.profiles import NO_METRICS, Profile
from xds_lab.sim.scheduler import Scheduler
from xds_lab.sim.stats import EngineStats
from xds_lab.sim.tokens import BLOCK_SIZE

__all__ = ["SERVER_HEADER", "SimServer"]

SERVER_HEADER = "x-sim-server"


class SimServer:
    """A simulated server listening on ``host:port`` (port 0 picks a free one at start)."""

    def __init__(
        self,
        *,
        name: str,
        profile: Profile,
        host: str = "127.0.0.1",
        port: int = 0,
        seed: int = 0,
        kv_events: KvEventsSpec | None = None,
    ) -> None:
        self.name = name
        self.profile = profile
        self.host = host
        self.port = port
        self.gpu_uuid = f"GPU-{uuid.uuid5(uuid.NAMESPACE_DNS, name)}"
        self.faults = FaultState()
        self._rng = random.Random(f"{seed}:{name}")
        self.stats = EngineStats()
        self.scheduler = Scheduler(profile, faults=self.faults, stats=self.stats, rng=self._rng)
        self._completions = Completions(
            name=name,
            profile=profile,
            scheduler=self.scheduler,
            stats=self.stats,
            faults=self.faults,
            rng=self._rng,
        )
        self.kv_publisher: KvPublisher | None = None
        """Its KV-event publisher (``kv_events`` given and the profile caches prefixes)."""
        if kv_events is not None and profile.prefix_caching:
            self.kv_publisher = KvPublisher(
                name=name, host=host, spec=kv_events, block_size=BLOCK_SIZE, engine=profile.engine
            )
            self.scheduler.publish_kv_events(self.kv_publisher.publish)
        self._runner: web.AppRunner | None = None
        self._site: web.TCPSite | None = None
        self._engine: asyncio.Task[Any] | None = None
        self._util_sample = (time.monotonic(), 0.0, 0.0)
        self._log = structlog.get_logger(__name__).bind(server=name, profile=profile.name)

    @property
    def url(self) -> str:
        """Base URL of this server."""
        return f"http://{self.host}:{self.port}"

    def app(self) -> web.Application:
        """The aiohttp application (tests may serve it with aiohttp's test client)."""
        app = web.Application()
        app.on_response_prepare.append(self._stamp)
        app.router.add_post("/v1/completions", self._completions.completions)
        app.router.add_post("/v1/chat/completions", self._completions.chat_completions)
        app.router.add_get("/v1/models", self._models)
        if self.profile.engine == "vllm":
            app.router.add_post("/tokenize", self._completions.tokenize)
        app.router.add_get("/health", self._health)
        if self.profile.metrics != NO_METRICS:
            app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/sim/faults", self._get_faults)
        app.router.add_post("/sim/faults", self._post_faults)
        app.router.add_delete("/sim/faults", self._delete_faults)
        return app

    async def start(self) -> None:
        """Listen and start the engine loop."""
        # In-flight requests are failed on stop, so a long grace period would only delay it.
        self._runner = web.AppRunner(
            self.app(), access_log=None, handle_signals=False, shutdown_timeout=1.0
        )
        await self._runner.setup()
        if self.kv_publisher is not None:
            self.kv_publisher.start()
        await self._listen()
        self._engine = guarded_task(self.scheduler.run(), name=f"sim-engine-{self.name}")
        self._log.info("sim server started", url=self.url)

    async def stop(self) -> None:
        """Stop the engine, then the listener and open connections."""
        if self._engine is not None:
            self._engine.cancel()
            await asyncio.gather(self._engine, return_exceptions=True)
            self._engine = None
        self.faults.running.set()  # let hung handlers finish so cleanup does not wait on them
        self.scheduler.restart()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
            self._site = None
        if self.kv_publisher is not None:
            await self.kv_publisher.stop()

    async def update_faults(self, update: FaultUpdate, *, keep: object = None) -> None:
        """Apply a fault change; ``keep`` is a connection to close gracefully, not reset."""
        self.faults.apply(update)
        if update.restart is not None:
            await self.restart(downtime=update.restart)
        elif update.refuse is True:
            await self._unlisten(keep=keep)
        elif update.refuse is False:
            await self._listen()
        self._log.info("faults changed", **self.faults.describe())

    async def clear_faults(self) -> None:
        """Remove every fault and listen again if refusing."""
        self.faults.clear()
        await self._listen()
        self._log.info("faults cleared")

    async def restart(self, *, downtime: float, keep: object = None) -> None:
        """Drop in-flight work, refuse for ``downtime`` s, come back cold with zeroed counters."""
        await self._unlisten(keep=keep)
        self.scheduler.restart()
        if self.kv_publisher is not None:
            self.kv_publisher.restart()
        fresh = EngineStats()
        for slot in EngineStats.__slots__:
            setattr(self.stats, slot, getattr(fresh, slot))
        await asyncio.sleep(downtime)
        self.stats.started_at = time.time()  # the new process starts when it comes back
        if not self.faults.refuse:
            await self._listen()

    async def _listen(self) -> None:
        if self._runner is None or self._site is not None:
            return
        site = web.TCPSite(self._runner, self.host, self.port, reuse_address=True)
        await site.start()
        self._site = site
        self.port = self._runner.addresses[-1][1]

    async def _unlisten(self, *, keep: object = None) -> None:
        if self._runner is None or self._site is None:
            return
        await self._site.stop()
        self._site = None
        server = self._runner.server
        for conn in [] if server is None else server.connections:
            # The connection carrying this control request closes after its response.
            if conn is keep:
                conn.close()
            else:
                conn.force_close()

    async def _stamp(self, request: web.Request, response: web.StreamResponse) -> None:
        response.headers[SERVER_HEADER] = self.name
        asked = request.headers.get("endpoint-load-metrics-format", "")
        # vLLM and Triton's TensorRT-LLM backend report; SGLang and ONNX Runtime do not.
        if asked.upper() in ("TEXT", "JSON") and self.profile.engine in ("vllm", "triton"):
            response.headers["endpoint-load-metrics"] = self._load_report(asked.upper())

    def _load_report(self, form: str) -> str:
        """The state now as vLLM reports it with a response (its ORCA header, in vLLM's
        order and Python's float form), when the request asked for one."""
        gauges = self.gauges()
        named = {
            "num_requests_waiting": float(gauges.waiting),
            "kv_cache_usage_perc": gauges.kv_used_blocks / max(1, gauges.kv_capacity_blocks),
        }
        if form == "JSON":
            return f"JSON {json.dumps({'named_metrics': named})}"
        return "TEXT " + ", ".join(f"named_metrics.{k}={v}" for k, v in named.items())

    def gauges(self) -> GaugeView:
        """The instantaneous state the metrics report."""
        now = time.monotonic()
        then, busy_then, util = self._util_sample
        # Utilisation is busy time over the last half second or more, not since start.
        if now - then >= 0.5:
            util = min(1.0, (self.stats.busy_seconds - busy_then) / (now - then))
            self._util_sample = (now, self.stats.busy_seconds, util)
        return GaugeView(
            server=self.name,
            gpu_uuid=self.gpu_uuid,
            running=len(self.scheduler.running),
            waiting=len(self.scheduler.waiting),
            kv_used_blocks=self.scheduler.kv.used_blocks,
            kv_capacity_blocks=self.scheduler.kv.capacity,
            gpu_util=max(0.0, util),
            leaked_mib=self.faults.leaked_mib(),
            lora_series=tuple(
                self.scheduler.loras.series(
                    s.adapter for s in self.scheduler.waiting if s.adapter is not None
                )
            ),
        )

    async def _metrics(self, _request: web.Request) -> web.Response:
        await self.faults.running.wait()
        text = render_metrics(self.profile, self.stats, self.gauges())
        return web.Response(text=text, content_type="text/plain", charset="utf-8")

    async def _health(self, _request: web.Request) -> web.Response:
        await self.faults.running.wait()
        return web.Response(status=200)

    async def _models(self, _request: web.Request) -> web.Response:
        await self.faults.running.wait()
        model = {"id": self.profile.model, "object": "model", "owned_by": "xds-control-sim"}
        return web.json_response({"object": "list", "data": [model]})

    async def _get_faults(self, _request: web.Request) -> web.Response:
        return web.json_response({"server": self.name, "faults": self.faults.describe()})

    async def _post_faults(self, request: web.Request) -> web.Response:
        try:
            update = FaultUpdate.model_validate(await request.json())
        except (ValidationError, *JSON_ERRORS) as exc:
            return web.json_response(
                error_body(message=str(exc), kind="invalid", code=400), status=400
            )
        if update.restart is not None:
            # Answer first; the restart outlives this request.
            guarded_task(self.update_faults(update), name=f"sim-restart-{self.name}")
        else:
            await self.update_faults(update, keep=request.protocol)
        return web.json_response({"server": self.name, "faults": self.faults.describe()})

    async def _delete_faults(self, _request: web.Request) -> web.Response:
        await self.clear_faults()
        return web.json_response({"server": self.name, "faults": self.faults.describe()})
