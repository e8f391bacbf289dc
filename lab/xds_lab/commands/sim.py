"""``xds-control sim``: run a simulated inference fleet, or change faults on a running one."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from pathlib import Path
from typing import Annotated, Any

import aiohttp
import typer
from pydantic import ValidationError
from rich.table import Table

from xds_control.cli.app import App, OutputFormat
from xds_control.errors import ConfigError
from xds_lab.sim.faults import parse_fault_assignments
from xds_lab.sim.fleet import Fleet, FleetSpec, load_fleet

__all__ = ["command", "fleet_table"]


def fleet_table(fleet: Fleet) -> Table:
    """One row per server: name, profile, where it listens and its capacity."""
    table = Table(title=f"simulated fleet ({len(fleet.servers)} servers)")
    for column in ("server", "profile", "gpu", "url", "slots", "kv blocks", "metrics"):
        table.add_column(column, no_wrap=column in ("server", "url"))
    for server in fleet.servers.values():
        p = server.profile
        table.add_row(
            server.name,
            p.name,
            p.gpu_dcgm_name,
            server.url,
            str(p.max_num_seqs),
            str(p.kv_blocks),
            p.metrics,
        )
    return table


async def _run(app: App, spec: FleetSpec, duration: float | None) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    async with Fleet(spec) as fleet:
        if app.output is OutputFormat.TABLE:
            app.console.print(fleet_table(fleet))
            if fleet.control_url:
                app.console.print(f"control endpoint: {fleet.control_url}/servers")
            app.console.print("Ctrl-C stops the fleet.")
        else:
            app.print_data(
                {
                    "control_url": fleet.control_url,
                    "servers": [
                        {"name": s.name, "profile": s.profile.name, "url": s.url}
                        for s in fleet.servers.values()
                    ],
                }
            )
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=duration)


async def _control(url: str, server: str, payload: dict[str, Any] | None) -> Any:
    target = f"{url.rstrip('/')}/servers/{server}/faults"
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as http:
        method = http.delete(target) if payload is None else http.post(target, json=payload)
        async with method as resp:
            if resp.status != 200:
                raise ValueError(f"{resp.status}: {await resp.text()}")
            return await resp.json()


def command(
    ctx: typer.Context,
    fleet: Annotated[
        Path | None, typer.Option(help="Fleet YAML to run (servers, groups, control_port).")
    ] = None,
    control: Annotated[
        str | None,
        typer.Option(help="Fleet control URL of a running fleet, to change faults instead."),
    ] = None,
    server: Annotated[str | None, typer.Option(help="Server name whose faults change.")] = None,
    fault: Annotated[
        list[str] | None,
        typer.Option(
            help="NAME=VALUE, repeatable: slowdown=3, error_rate=0.2, refuse, hang, "
            "memory_creep_mib_per_s=50, restart=2 (seconds down)."
        ),
    ] = None,
    clear: Annotated[bool, typer.Option(help="Clear every fault on --server.")] = False,
    duration: Annotated[
        float | None, typer.Option(help="Stop the fleet after this many seconds.")
    ] = None,
) -> None:
    """Run a simulated fleet from --fleet until Ctrl-C, or inject/clear faults on a running one.

    Examples: `xds-control sim --fleet examples/fleets/mixed.yaml`;
    `xds-control sim --control http://127.0.0.1:8999 --server vllm-h100-0 --fault slowdown=3`;
    `xds-control sim --control http://127.0.0.1:8999 --server vllm-h100-0 --clear`.
    """
    app: App = ctx.obj if isinstance(ctx.obj, App) else App()
    if control is not None:
        if server is None or (not fault and not clear):
            app.abort("--control needs --server and either --fault or --clear", 2)
        try:
            update = None if clear else parse_fault_assignments(fault or [])
            payload = None if update is None else update.model_dump(exclude_none=True)
            app.print_data(asyncio.run(_control(control, server, payload)))
        except ValidationError as exc:
            app.abort(f"bad --fault: {exc}", 2)
        except (aiohttp.ClientError, ValueError) as exc:
            app.abort(f"control endpoint {control}: {exc}", 1)
        return
    if fleet is None:
        app.abort("give --fleet FILE to run a fleet, or --control URL to change faults", 2)
    try:
        spec = load_fleet(fleet)
    except ConfigError as exc:
        app.abort(f"invalid fleet file: {exc}", 2)
    try:
        asyncio.run(_run(app, spec, duration))
    except OSError as exc:
        app.abort(f"could not start the fleet: {exc}", 1)
