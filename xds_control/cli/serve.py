"""``xds-control serve``: the control plane."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import aiohttp
import structlog
import typer

from xds_control.admin import AdminServer
from xds_control.admin.auth import load_token
from xds_control.cache import MemorySnapshotCache
from xds_control.cli.app import App
from xds_control.cli.collector import settle_for_serving
from xds_control.cli.validate import EXIT_INVALID, ConfigOption
from xds_control.config import Config, load_config, parse_host_port
from xds_control.config.serving import parse_xds_address
from xds_control.control import ControlLoop, Weigher
from xds_control.control.kv_staleness import events_stale
from xds_control.errors import ConfigError, ServeError
from xds_control.flow import FlowController
from xds_control.limits import Limiter
from xds_control.picker import Fleet, Picker, PickerServer, picker_addresses
from xds_control.picker.cached_blocks import CachedBlocks
from xds_control.picker.prefix import Tokenize
from xds_control.picker.tokenizer import TokenizerShelf
from xds_control.server import StreamRegistry, XdsServer
from xds_control.signals import AccessLogServicer, DataPathLatency
from xds_control.signals.kv_events import KvEvents
from xds_control.tasks import guarded_task

__all__ = ["EXIT_CRASHED", "command", "serve"]

log = structlog.get_logger(__name__)

EXIT_CRASHED = 1
"""``serve``'s exit code when a task it cannot run without died (a supervisor restarts it)."""


async def serve(*, config: Config, config_path: Path, xds_address: str, admin_address: str) -> int:
    """Run until SIGINT or SIGTERM (exit code 0) or until a critical task dies
    (``EXIT_CRASHED``); then stop the producers first, then the servers.

    Both servers listen from the start, but health (gRPC and ``/readyz``) says SERVING only
    once the first snapshot exists: with the weight engine on, that may wait for the engine's
    state file or for one round of signals (``restart``). Envoys that connect meanwhile get
    nothing, so they keep running what they have."""
    cache = MemorySnapshotCache()
    registry = StreamRegistry()
    stop = asyncio.Event()
    crashed: list[str] = []

    def on_crash(name: str, exc: BaseException) -> None:
        crashed.append(f"{name} crashed: {type(exc).__name__}: {exc}")
        stop.set()

    # Whatever fails from here on (a port taken, an unreadable token file) closes what was
    # opened before it. A gRPC server frees a port it bound only once started, so each one is
    # bound right before it starts.
    client = aiohttp.ClientSession()
    xds: XdsServer | None = None
    admin: AdminServer | None = None
    picker: PickerServer | None = None
    tasks: list[asyncio.Task[object]] = []
    cached_blocks = CachedBlocks()
    kv_events = KvEvents(sink=cached_blocks)
    try:
        weigher = Weigher.from_config(client=client, signals=config.signals)
        limiter = Limiter()
        path_latency = DataPathLatency(data_path=weigher.data_path)
        limiter.configure(client=client, config=config, data_path=path_latency)

        def on_signals_change(new: Config) -> None:
            weigher.configure(client=client, signals=new.signals)
            limiter.configure(client=client, config=new, data_path=path_latency)

        loop = ControlLoop(
            config=config,
            config_path=config_path,
            cache=cache,
            weigher=weigher,
            on_signals_change=on_signals_change,
            limiter=limiter,
            envoys=registry.envoys_by_group,
            kv_events=kv_events,
        )
        fleet = Fleet(
            config=lambda: loop.state.config,
            endpoints=lambda: loop.state.endpoints,
            decisions=lambda: weigher.view().pools,
        )
        picks: Picker | None = None
        flow: FlowController | None = None
        if addresses := picker_addresses(config):
            shelf = TokenizerShelf()

            def tokenizers(pool: str) -> Tokenize | None:
                settings = fleet.picker(pool)
                if settings is None or settings.tokenizer is None:
                    return None
                found = shelf.get(str(config_path.parent / settings.tokenizer))
                return None if found is None else found.token_ids

            picks = Picker(
                fleet=fleet,
                cached_blocks=cached_blocks,
                tokenizers=tokenizers,
                stale=lambda pool, address: events_stale(
                    kv_events, weigher.view().pools, pool=pool, address=address
                ),
                delivered=registry.endpoints_everywhere,
                reported=weigher.reported,
            )
            flow = FlowController(pools=picks, replicas=lambda: loop.state.control_planes or 1)
        admin = AdminServer(
            address=admin_address,
            state=loop.state,
            cache=cache,
            registry=registry,
            engine=weigher.view,
            failure=lambda: crashed[0] if crashed else None,
            grpc_address=config.admin_grpc_address,
            token=load_token(config.admin_token_file),
            limiter=limiter,
            kv_events=kv_events,
            token_budgets=flow.budgets.rows if flow is not None else None,
        )
        xds = XdsServer(  # binds: may raise
            cache=cache,
            registry=registry,
            address=xds_address,
            tls=config.tls,
            settings=config.grpc,
            # Served whether or not the data path is on, so a reload that turns it on (and
            # gives every listener the access log) needs no restart; off, entries are dropped.
            access_log=AccessLogServicer(data_path=weigher.data_path),
        )
        await xds.start()
        await admin.start()
        if picks is not None and flow is not None:
            picker = PickerServer(picker=picks, addresses=addresses, flow=flow)  # binds
            await picker.start()
            tasks.append(guarded_task(flow.run(), name="flow-control", on_crash=on_crash))
        for signum in (signal.SIGINT, signal.SIGTERM):
            asyncio.get_running_loop().add_signal_handler(signum, stop.set)
        tasks += [
            guarded_task(loop.run(), name="control-loop", on_crash=on_crash),
            guarded_task(loop.scrape_forever(), name="signals-scrape", on_crash=on_crash),
        ]
        log.info(
            "listening; serving once the first snapshot exists",
            xds_address=xds_address,
            xds_port=xds.port,
            admin_address=admin_address,
            admin_port=admin.port,
        )
        if await _first_of(published=loop.published, stop=stop) == "published":
            await xds.mark_serving()
            if picker is not None:
                await picker.mark_ready()
            log.info("serving", version=loop.state.version)
            settle_for_serving()  # the collector out of pushes and edits: cli/collector.py
            await stop.wait()
    finally:
        reason = crashed[0] if crashed else "signal" if stop.is_set() else "start-up failed"
        log.info("stopping", reason=reason)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await kv_events.close()
        if picker is not None:
            await picker.stop()
        if xds is not None:
            await xds.stop(grace=2.0)
        if admin is not None:
            await admin.stop()
        await client.close()
    return EXIT_CRASHED if crashed else 0


async def _first_of(**events: asyncio.Event) -> str:
    """The name of the first of ``events`` to be set."""
    waits = {guarded_task(e.wait(), name=f"serve-wait-{n}"): n for n, e in events.items()}
    done, pending = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    for task in pending:
        task.cancel()
    return waits[next(iter(done))]


def command(
    ctx: typer.Context,
    config: ConfigOption,
    xds_address: Annotated[
        str | None,
        typer.Option(
            help="ADS gRPC address, IP:PORT or unix:///path (default from config: 0.0.0.0:18000).",
            envvar="XDS_CONTROL_XDS_ADDRESS",
        ),
    ] = None,
    admin_address: Annotated[
        str | None,
        typer.Option(
            help="Admin HTTP address (default from config: 127.0.0.1:9902).",
            envvar="XDS_CONTROL_ADMIN_ADDRESS",
        ),
    ] = None,
) -> None:
    """Serve CDS/EDS/LDS/RDS over ADS; reload the config and endpoints files on change."""
    app: App = ctx.obj
    # Each problem under its own name: a flag's under the flag, the file's under the file.
    problems = [
        f"{flag}: {problem}"
        for flag, value, parse in (
            ("--xds-address", xds_address, parse_xds_address),
            ("--admin-address", admin_address, parse_host_port),
        )
        if value is not None and (problem := _address_problem(value, parse)) is not None
    ]
    loaded: Config | None = None
    try:
        loaded = load_config(config)
    except ConfigError as exc:
        problems += [f"{config}: {path or '(file)'}: {message}" for path, message in exc.problems]
    if loaded is None or problems:
        for line in problems:
            app.err.print(line, markup=False, highlight=False)
        raise typer.Exit(EXIT_INVALID)
    try:
        code = asyncio.run(
            serve(
                config=loaded,
                config_path=config,
                xds_address=xds_address or loaded.xds_address,
                admin_address=admin_address or loaded.admin_address,
            )
        )
    except ServeError as exc:
        app.abort(f"xds-control serve: {exc}", EXIT_CRASHED)
    if code:
        raise typer.Exit(code)


def _address_problem(value: str, parse: Callable[[str], object]) -> str | None:
    try:
        parse(value)
    except ValueError as exc:
        return str(exc)
    return None
