"""``xds-control serve``: the control plane."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer

from xds_control.cli.app import App
from xds_control.cli.collector import settle_for_serving
from xds_control.cli.validate import EXIT_INVALID, ConfigOption
from xds_control.config import Config, load_config, parse_host_port
from xds_control.config.serving import parse_xds_address
from xds_control.errors import ConfigError, ServeError
from xds_control.plane import Plane

__all__ = ["EXIT_CRASHED", "command", "serve"]

EXIT_CRASHED = 1
"""``serve``'s exit code when a task it cannot run without died (a supervisor restarts it)."""


async def serve(*, config: Config, config_path: Path, xds_address: str, admin_address: str) -> int:
    """Run the plane until SIGINT or SIGTERM (exit code 0) or until a critical task dies
    (``EXIT_CRASHED``); health says SERVING only once the first snapshot exists (``Plane``)."""
    async with Plane(
        config=config, config_path=config_path, xds_address=xds_address, admin_address=admin_address
    ) as plane:
        if await plane.serving():
            settle_for_serving()  # the collector out of pushes and edits: cli/collector.py
            await plane.stopped()
    return EXIT_CRASHED if plane.failure() else 0


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
