"""``xdsctl kv-events``: each server's KV-cache event subscription, what its events say it
holds, and whether they have gone stale."""

from __future__ import annotations

from typing import Any

import typer
from rich.table import Table

from xds_control.cli.app import OutputFormat
from xds_control.cli.xdsctl.context import XdsctlApp

__all__ = ["command"]

_COLUMNS = ("POOL", "SERVER", "LAYOUT", "LAST SEQ", "AGE", "BLOCKS", "LOST", "RESTARTS")


def _age(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds:.1f}s"


def command(ctx: typer.Context) -> None:
    """One row per subscribed server (pools with `kv_events`): the layout its batches decode
    as, the last sequence number applied and how long ago, the blocks it holds, the batches
    lost and refused, its restarts, and STALE when its events no longer back its picks
    (docs/kv-events.md)."""
    app: XdsctlApp = ctx.obj
    data: list[dict[str, Any]] = app.client.get("/v1/status").get("kv_events", [])
    if app.output is not OutputFormat.TABLE:
        app.print_data(data)
        return
    if not data:
        app.err.print("no pool subscribes to KV events (kv_events in a pool's config)")
        return
    table = Table(box=None)
    for column in (*_COLUMNS, "REFUSED", "STATE"):
        table.add_column(column, overflow="fold")
    for r in sorted(data, key=lambda r: (r["pool"], r["server"])):
        table.add_row(
            r["pool"],
            r["server"],
            r["layout"] or "-",
            str(r["last_seq"]),
            _age(r["last_event_age_s"]),
            str(r["blocks"]),
            str(r["lost"]),
            str(r["restarts"]),
            str(r["refused"]),
            "STALE" if r["stale"] else "ok",
        )
    app.console.print(table)
