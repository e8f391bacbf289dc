"""``xdsctl watch``: the weights as a live table, redrawn as they change."""

from __future__ import annotations

import time
from typing import Annotated

import typer
from rich.live import Live
from rich.table import Table

from xds_control.cli.xdsctl.context import XdsctlApp
from xds_control.cli.xdsctl.weights import fetch

__all__ = ["command"]


def _table(app: XdsctlApp, pool: str | None) -> Table:
    data = fetch(app, pool, explain=False)
    table = Table("POOL", "ENDPOINT", "WEIGHT", "HEALTH", "REASON", box=None)
    for name, endpoints in data["pools"].items():
        for e in endpoints:
            table.add_row(name, e["address"], str(e["weight"]), e["health"], e["reason"])
    table.caption = f"engine cycle {data.get('cycle', '-')}; Ctrl-C to stop"
    return table


def command(
    ctx: typer.Context,
    pool: Annotated[str | None, typer.Argument(help="Only this pool.")] = None,
    interval: Annotated[float, typer.Option(help="Seconds between looks.")] = 1.0,
) -> None:
    """Each endpoint's weight, redrawn every --interval seconds until Ctrl-C."""
    app: XdsctlApp = ctx.obj
    try:
        with Live(_table(app, pool), console=app.console, auto_refresh=False) as live:
            while True:
                time.sleep(interval)
                live.update(_table(app, pool), refresh=True)
    except KeyboardInterrupt:
        return
