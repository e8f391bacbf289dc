"""``xdsctl status`` (alias ``proxy-status``): is every connected Envoy on the version served?"""

from __future__ import annotations

from typing import Any

import typer
from rich.table import Table

from xds_control.cli.app import OutputFormat
from xds_control.cli.xdsctl.context import XdsctlApp

__all__ = ["TYPES", "command", "rows"]

TYPES = ("CDS", "LDS", "EDS", "RDS")


def rows(streams: list[dict[str, Any]]) -> list[dict[str, str]]:
    """One row per connected Envoy: per type SYNCED, STALE, NACKED or NOT SENT (the server
    judges each stream against what its group is served, in ``/v1/streams``), and the NACK
    texts."""
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
            row[short] = states[short]["sync"] if short in states else "NOT SENT"
            if row[short] == "NACKED":
                errors.append(f"{short}: {states[short]['last_error']}")
        row["nack"] = "; ".join(errors)
        out.append(row)
    return out


def command(ctx: typer.Context) -> None:
    """One row per connected Envoy: is each xDS type SYNCED, STALE, NACKED or NOT SENT, and
    what Envoy said when it refused one."""
    app: XdsctlApp = ctx.obj
    data = sorted(rows(app.client.get("/v1/streams")), key=lambda r: r["name"])
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
