"""``xdsctl endpoints``: each pool's endpoints with the weight and health being served."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from xds_control.cli.app import OutputFormat
from xds_control.cli.xdsctl.context import XdsctlApp

__all__ = ["command"]


def command(
    ctx: typer.Context,
    pool: Annotated[str | None, typer.Argument(help="Only this pool.")] = None,
) -> None:
    """Show the weights the control plane serves (what Envoy's EDS holds)."""
    app: XdsctlApp = ctx.obj
    client = app.client
    data = client.get("/v1/endpoints")
    if pool is not None:
        if pool not in data:
            app.abort(f"no pool named {pool!r} (pools: {', '.join(sorted(data))})", 1)
        data = {pool: data[pool]}
    if app.output is not OutputFormat.TABLE:
        app.print_data(data)
        return
    table = Table(box=None)
    for column in ("POOL", "ENDPOINT", "WEIGHT", "HEALTH"):
        table.add_column(column)
    for name, endpoints in data.items():
        for endpoint in endpoints:
            table.add_row(name, endpoint["address"], str(endpoint["weight"]), endpoint["health"])
    app.console.print(table)
