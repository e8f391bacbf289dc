"""``xdsctl status`` (alias ``proxy-status``): is every connected Envoy on the version served?"""

from __future__ import annotations

from typing import Any

import typer
from rich.table import Table

from xds_control.admin.sync import sync_status
from xds_control.cli.app import OutputFormat
from xds_control.cli.xdsctl.context import XdsctlApp

__all__ = ["TYPES", "command", "rows", "sync_status"]

TYPES = ("CDS", "LDS", "EDS", "RDS")


def rows(streams: list[dict[str, Any]], snapshot: dict[str, Any]) -> list[dict[str, str]]:
    """One row per connected Envoy: per type SYNCED, STALE, NACKED or NOT SENT against
    ``snapshot`` (what is served), and the NACK texts."""
    served = {t["type"]: t["version"] for t in snapshot["types"]}
    out = []
    for stream in streams:
        states = {t["type"]: t for t in stream["types"]}
        row = {
            "name": stream["node_id"],
            "cluster": stream["node_cluster"],
            "group": stream.get("group", ""),
        }
        errors = []
        for short in TYPES:
            row[short] = sync_status(states.get(short), served=served.get(short, ""))
            if row[short] == "NACKED":
                errors.append(f"{short}: {states[short]['last_error']}")
        row["nack"] = "; ".join(errors)
        out.append(row)
    return out


def command(ctx: typer.Context) -> None:
    """One row per connected Envoy: is each xDS type SYNCED, STALE, NACKED or NOT SENT, and
    what Envoy said when it refused one."""
    app: XdsctlApp = ctx.obj
    streams = app.client.get("/v1/streams")
    data: list[dict[str, str]] = []
    for group in sorted({s.get("group", "") for s in streams}):
        snapshot = app.client.get("/v1/snapshot", **({"group": group} if group else {}))
        data += rows([s for s in streams if s.get("group", "") == group], snapshot)
    data.sort(key=lambda r: r["name"])
    if app.output is not OutputFormat.TABLE:
        app.print_data(data)
        return
    table = Table(box=None)
    for column in ("NAME", "CLUSTER", "GROUP", *TYPES, "NACK"):
        table.add_column(column, overflow="fold")
    for row in data:
        table.add_row(
            row["name"], row["cluster"], row["group"], *(row[t] for t in TYPES), row["nack"]
        )
    app.console.print(table)
