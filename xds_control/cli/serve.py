"""``xds-control serve``: the control plane."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path
from typing import Annotated

import aiohttp
import structlog
import typer

from xds_control.admin import AdminServer
from xds_control.cache import MemorySnapshotCache
from xds_control.cli.app import App
from xds_control.cli.validate import EXIT_INVALID, ConfigOption
from xds_control.config import Config, load_config, parse_host_port
from xds_control.control import ControlLoop, Weigher
from xds_control.errors import ConfigError
from xds_control.server import StreamRegistry, XdsServer
from xds_control.tasks import guarded_task

__all__ = ["command", "serve"]

log = structlog.get_logger(__name__)


async def serve(*, config: Config, config_path: Path, xds_address: str, admin_address: str) -> None:
    """Run until SIGINT or SIGTERM; then stop the producers first, then the servers."""
    cache = MemorySnapshotCache()
    registry = StreamRegistry()
    client = aiohttp.ClientSession()
    weigher = Weigher.from_config(client=client, signals=config.signals)
    loop = ControlLoop(
        config=config,
        config_path=config_path,
        cache=cache,
        weigher=weigher,
        on_signals_change=lambda new: weigher.configure(client=client, signals=new.signals),
    )
    await loop.step()  # the first snapshot exists before any Envoy can connect
    xds = XdsServer(cache=cache, registry=registry, address=xds_address)
    admin = AdminServer(
        address=admin_address, state=loop.state, cache=cache, registry=registry, engine=weigher.view
    )
    await xds.start()
    await xds.mark_serving()
    await admin.start()
    log.info(
        "serving",
        xds_address=xds_address,
        xds_port=xds.port,
        admin_address=admin_address,
        admin_port=admin.port,
        version=loop.state.version,
    )
    stop = asyncio.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        asyncio.get_running_loop().add_signal_handler(signum, stop.set)
    reconcile = guarded_task(loop.run(), name="control-loop")
    try:
        await stop.wait()
    finally:
        log.info("stopping")
        reconcile.cancel()
        await asyncio.gather(reconcile, return_exceptions=True)
        await xds.stop(grace=2.0)
        await admin.stop()
        await client.close()


def command(
    ctx: typer.Context,
    config: ConfigOption,
    xds_address: Annotated[
        str | None,
        typer.Option(
            help="ADS gRPC address (default from config: 0.0.0.0:18000).",
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
    try:
        loaded = load_config(config)
        for flag, value in (("--xds-address", xds_address), ("--admin-address", admin_address)):
            if value is not None:
                try:
                    parse_host_port(value)
                except ValueError as exc:
                    raise ConfigError([(flag, str(exc))]) from None
    except ConfigError as exc:
        for path, message in exc.problems:
            app.err.print(f"{config}: {path or '(file)'}: {message}", markup=False)
        raise typer.Exit(EXIT_INVALID) from None
    asyncio.run(
        serve(
            config=loaded,
            config_path=config,
            xds_address=xds_address or loaded.xds_address,
            admin_address=admin_address or loaded.admin_address,
        )
    )
