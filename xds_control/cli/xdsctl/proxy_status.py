"""``xdsctl proxy-status``: is every connected Envoy on the version we serve?"""

from __future__ import annotations

from typing import Any

import typer
from rich.table import Table

from xds_control.cli.app import OutputFormat
from xds_control.cli.xdsctl.context import XdsctlApp

__all__ = ["command", "sync_status"]

TYPES = ("CDS", "LDS", "EDS", "RDS")


def sync_status(state: dict[str, Any] | None, *, served: str) -> str:
    """SYNCED, NACKED, STALE (sent, not yet acknowledged) or NOT SENT, as istioctl says."""
    if state is None:
        return "NOT SENT"
    if state["acked_version"] == served:
        return "SYNCED"
    if state["nacked_version"] and state["nacked_version"] == state["sent_version"]:
        return "NACKED"
    return "STALE"


def rows(streams: list[dict[str, Any]], snapshot: dict[str, Any]) -> list[dict[str, str]]:
    """One row per connected Envoy."""
    served = {t["type"]: t["version"] for t in snapshot["types"]}
    out = []
    for stream in streams:
        states = {t["type"]: t for t in stream["types"]}
        row = {"name": stream["node_id"], "cluster": stream["node_cluster"]}
        for short in TYPES:
            row[short] = sync_status(states.get(short), served=served.get(short, ""))
        out.append(row)
    return out


def command(ctx: typer.Context) -> None:
    """List connected Envoys and whether each has the current CDS/LDS/EDS/RDS."""
    app: XdsctlApp = ctx.obj
    client = app.client
    data = rows(client.get("/v1/streams"), client.get("/v1/snapshot"))
    if app.output is not OutputFormat.TABLE:
        app.print_data(data)
        return
    table = Table(box=None)
    for column in ("NAME", "CLUSTER", *TYPES):
        table.add_column(column)
    for row in data:
        table.add_row(row["name"], row["cluster"], *(row[t] for t in TYPES))
    app.console.print(table)
