"""The running control plane: every part built from the config, and their lifetimes.

``Plane`` is the composition root, library code the CLI calls (``cli/serve.py`` parses flags
and turns the outcome into an exit code), as kopf's ``operator()`` and go-control-plane's
``NewServer`` are. It builds the parts in the order each needs the one before it and hands
each the views it reads of the others: admin one record of read-only views (``AdminViews``),
the picker the loop's config, endpoints and the engine's decisions (``Fleet``), and the data
path's window, built once, to the engine, the access-log service and the budgets.

It owns their lifetimes with one ``AsyncExitStack``: whatever fails on the way up closes what
was opened before it, and on the way down the producers stop first (the loop, the scraper,
flow control, the KV-event subscriptions), then the servers (the picker, xDS with a grace
period, admin), the HTTP session last. A gRPC server frees a port it bound only once started,
so each is bound right before it starts.

Readiness: every server listens from the start, but gRPC health, the picker's health and
``/readyz`` say SERVING only once the first snapshot exists (with the weight engine on, that
may wait for the engine's state file or for one round of signals); Envoys that connect
meanwhile get nothing, so they keep running what they have. A task the plane cannot run
without that dies fails readiness and stops the plane (``failure``).
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Coroutine, Mapping
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import aiohttp
import structlog

from xds_control.admin import AdminServer, AdminViews
from xds_control.admin.auth import load_token
from xds_control.cache import MemorySnapshotCache
from xds_control.config import Config
from xds_control.control import ControlLoop, Weigher
from xds_control.control.kv_staleness import events_stale
from xds_control.discovery import Endpoint
from xds_control.engine import WeightDecision
from xds_control.flow import FlowController
from xds_control.limits import Limiter
from xds_control.picker import Fleet, Picker, PickerServer, picker_addresses
from xds_control.picker.cached_blocks import CachedBlocks
from xds_control.picker.prefix import Tokenize
from xds_control.picker.tokenizer import TokenizerShelf
from xds_control.server import StreamRegistry, XdsServer
from xds_control.signals import AccessLogServicer, DataPath, DataPathLatency
from xds_control.signals.kv_events import KvEvents
from xds_control.tasks import guarded_task

__all__ = ["Plane"]

log = structlog.get_logger(__name__)

_XDS_GRACE_S = 2.0
"""How long open ADS streams may take to end once the plane stops."""


class Plane:
    """One control plane's parts, from ``config`` (read from ``config_path``, whose folder
    relative tokenizer paths start from), serving ADS on ``xds_address`` and admin HTTP on
    ``admin_address``.

    ``async with`` starts it (failing, it closes what it opened and raises, ``ServeError``
    for a port taken or an unreadable token file); ``serving`` waits for the first snapshot,
    ``stopped`` for SIGINT, SIGTERM or a crash; leaving the block stops it."""

    _client: aiohttp.ClientSession
    _weigher: Weigher
    _latency: DataPathLatency
    _limiter: Limiter
    _loop: ControlLoop
    _fleet: Fleet
    _xds: XdsServer
    _shelf: TokenizerShelf

    def __init__(
        self, *, config: Config, config_path: Path, xds_address: str, admin_address: str
    ) -> None:
        self._config = config
        self._config_path = config_path
        self._xds_address = xds_address
        self._admin_address = admin_address
        self.cache = MemorySnapshotCache()
        self.registry = StreamRegistry()
        self.data_path = DataPath()
        """The data path's window: the access-log service fills it, the engine and the budgets
        read it; the engine sets it as ``signals.data_path`` says."""
        self.cached_blocks = CachedBlocks()
        self.kv_events = KvEvents(sink=self.cached_blocks)
        self._stop = asyncio.Event()
        self._crashes: list[str] = []
        self._tasks: list[asyncio.Task[Any]] = []
        self._stack = AsyncExitStack()
        self._flow: FlowController | None = None
        self._picker: PickerServer | None = None

    async def __aenter__(self) -> Plane:
        try:
            await self._start()
        except BaseException:
            await self._close()
            raise
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self._close()

    def failure(self) -> str | None:
        """Why the plane stopped, if a task it cannot run without died; else ``None``."""
        return self._crashes[0] if self._crashes else None

    async def serving(self) -> bool:
        """Wait for the first snapshot and say SERVING (ADS health, the picker's); ``False``
        when the plane was stopped first."""
        if await _first_of(published=self._loop.published, stop=self._stop) != "published":
            return False
        await self._xds.mark_serving()
        if self._picker is not None:
            await self._picker.mark_ready()
        log.info("serving", version=self._loop.state.version)
        return True

    async def stopped(self) -> None:
        """Wait for SIGINT, SIGTERM or a critical task's crash."""
        await self._stop.wait()

    async def _start(self) -> None:
        stack = self._stack
        self._client = await stack.enter_async_context(aiohttp.ClientSession())
        self._build_control()
        admin = AdminServer(
            address=self._admin_address,
            views=self._admin_views(),
            grpc_address=self._config.admin_grpc_address,
            token=load_token(self._config.admin_token_file),
        )
        stack.push_async_callback(admin.stop)
        self._xds = XdsServer(  # binds: may raise
            cache=self.cache,
            registry=self.registry,
            address=self._xds_address,
            tls=self._config.tls,
            settings=self._config.grpc,
            # Served whether or not the data path is on, so a reload that turns it on (and
            # gives every listener the access log) needs no restart; off, entries are dropped.
            access_log=AccessLogServicer(data_path=self.data_path),
        )
        stack.push_async_callback(self._xds.stop, grace=_XDS_GRACE_S)
        await self._xds.start()
        await admin.start()
        await self._start_request_path()
        stack.push_async_callback(self._stop_producers)
        for signum in (signal.SIGINT, signal.SIGTERM):
            asyncio.get_running_loop().add_signal_handler(signum, self._stop.set)
        self._run(self._loop.run(), name="control-loop")
        self._run(self._loop.scrape_forever(), name="signals-scrape")
        log.info(
            "listening; serving once the first snapshot exists",
            xds_address=self._xds_address,
            xds_port=self._xds.port,
            admin_address=self._admin_address,
            admin_port=admin.port,
        )

    def _build_control(self) -> None:
        """The engine, the budgets, the loop that runs their cycles, and the fleet the picker
        reads of them."""
        config = self._config
        self._weigher = Weigher.from_config(
            client=self._client, signals=config.signals, data_path=self.data_path
        )
        self._latency = DataPathLatency(data_path=self.data_path)
        self._limiter = Limiter()
        self._limiter.configure(client=self._client, config=config, data_path=self._latency)
        self._loop = ControlLoop(
            config=config,
            config_path=self._config_path,
            cache=self.cache,
            weigher=self._weigher,
            on_signals_change=self._configure_signals,
            limiter=self._limiter,
            envoys=self.registry.envoys_by_group,
            kv_events=self.kv_events,
        )
        self._fleet = Fleet(
            config=self._served_config, endpoints=self._served_endpoints, decisions=self._decisions
        )

    def _admin_views(self) -> AdminViews:
        return AdminViews(
            state=self._loop.state,
            cache=self.cache,
            registry=self.registry,
            engine=self._weigher.view,
            failure=self.failure,
            limiter=self._limiter,
            kv_events=self.kv_events,
            token_budgets=self._token_budgets,
        )

    async def _start_request_path(self) -> None:
        """The per-request path, when a pool has a picker: the tokenizers, the picker over the
        fleet and the KV events, its flow control, and its ext_proc servers on the pools'
        picker addresses, ready once the first snapshot exists."""
        addresses = picker_addresses(self._config)
        if not addresses:
            return
        self._shelf = TokenizerShelf()
        picker = Picker(
            fleet=self._fleet,
            cached_blocks=self.cached_blocks,
            tokenizers=self._tokenizer,
            stale=self._events_stale,
            delivered=self.registry.endpoints_everywhere,
            reported=self._weigher.reported,
        )
        self._flow = FlowController(pools=picker, replicas=self._replicas)
        self._picker = PickerServer(picker=picker, addresses=addresses, flow=self._flow)  # binds
        self._stack.push_async_callback(self._picker.stop)
        await self._picker.start()
        self._run(self._flow.run(), name="flow-control")

    def _run(self, coro: Coroutine[Any, Any, Any], *, name: str) -> None:
        """A task the plane cannot run without: its crash stops the plane."""
        self._tasks.append(guarded_task(coro, name=name, on_crash=self._crashed))

    def _crashed(self, name: str, exc: BaseException) -> None:
        self._crashes.append(f"{name} crashed: {type(exc).__name__}: {exc}")
        self._stop.set()

    async def _stop_producers(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.kv_events.close()

    async def _close(self) -> None:
        reason = self.failure() or ("signal" if self._stop.is_set() else "start-up failed")
        log.info("stopping", reason=reason)
        await self._stack.aclose()

    def _configure_signals(self, new: Config) -> None:
        """A reload changed the signal settings: the engine's sources and the budgets' P99
        source follow them, sharing the session and the data path's window."""
        self._weigher.configure(client=self._client, signals=new.signals)
        self._limiter.configure(client=self._client, config=new, data_path=self._latency)

    def _served_config(self) -> Config:
        return self._loop.state.config

    def _served_endpoints(self) -> Mapping[str, tuple[Endpoint, ...]]:
        return self._loop.state.endpoints

    def _decisions(self) -> Mapping[str, tuple[WeightDecision, ...]]:
        return self._weigher.view().pools

    def _tokenizer(self, pool: str) -> Tokenize | None:
        """The pool's tokenizer (its file relative to the config's folder), once loaded."""
        settings = self._fleet.picker(pool)
        if settings is None or settings.tokenizer is None:
            return None
        found = self._shelf.get(str(self._config_path.parent / settings.tokenizer))
        return None if found is None else found.token_ids

    def _events_stale(self, pool: str, address: str) -> bool:
        """Whether the server's KV events have stopped, as the engine's decisions date it."""
        return events_stale(self.kv_events, self._weigher.view().pools, pool=pool, address=address)

    def _replicas(self) -> int:
        """The control planes sharing the fleet's token budgets (one unless told)."""
        return self._loop.state.control_planes or 1

    def _token_budgets(self) -> list[dict[str, object]]:
        """The picker's output-token windows (none without a picker)."""
        return self._flow.budgets.rows() if self._flow is not None else []


async def _first_of(**events: asyncio.Event) -> str:
    """The name of the first of ``events`` to be set."""
    waits = {guarded_task(e.wait(), name=f"serve-wait-{n}"): n for n, e in events.items()}
    done, pending = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    for task in pending:
        task.cancel()
    return waits[next(iter(done))]
