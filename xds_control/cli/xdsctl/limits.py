"""``xdsctl limits [ROUTE]``: each priority class's budget per route and node group, the P99
it came from, and what each output-token budget has charged in its window."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.table import Table

from xds_control.cli.app import OutputFormat
from xds_control.cli.xdsctl.context import XdsctlApp

__all__ = ["command"]


def _p99(row: dict[str, Any]) -> str:
    parts = []
    for pool, p99 in row["p99"].items():
        ttft = "-" if p99["ttft_s"] is None else f"{p99['ttft_s']:.3f}s"
        tpot = "" if p99["tpot_s"] is None else f" tpot {p99['tpot_s']:.3f}s"
        parts.append(f"{pool}: ttft {ttft}{tpot}")
    return ", ".join(parts) or "-"


def _token_table(rows: list[dict[str, Any]]) -> Table:
    """The picker's output-token budgets: one row per budget and tenant in its window."""
    table = Table(box=None, title="output-token budgets", title_justify="left")
    for column in ("POOL", "BUDGET", "TENANT", "WINDOW", "TOKENS", "CHARGED", "LEFT", "RENEWS IN"):
        table.add_column(column, overflow="fold")
    for r in rows:
        table.add_row(
            r["pool"],
            r["budget"],
            r["tenant"],
            f"{r['window_s']:g}s",
            _tokens(r),
            str(r["charged"]),
            str(r["left"]),
            f"{r['renews_in_s']:.1f}s",
        )
    return table


def _tokens(row: dict[str, Any]) -> str:
    """A budget's tokens a window, and this replica's share when control planes share it."""
    replicas = row.get("replicas", 1)
    if replicas <= 1:
        return str(row["output_tokens"])
    return f"{row['output_tokens']} ({row['here']} here, {replicas} replicas)"


def command(
    ctx: typer.Context,
    route: Annotated[str | None, typer.Argument(help="Only this route (LISTENER/ROUTE).")] = None,
) -> None:
    """The fleet-wide fill rate of each class on each route, the Envoys sharing it, the bucket
    each Envoy enforces, the pools' P99 and what the last cycle did (docs/limits.md); and each
    output-token budget's window: charged, left, when it renews (docs/flow-control.md)."""
    app: XdsctlApp = ctx.obj
    data: dict[str, Any] = app.client.get("/v1/limits")
    if route is not None:  # admin.limits.narrowed's rule; importing the server costs xdsctl ~1.5 s
        rows = [r for r in data["budgets"] if f"{r['listener']}/{r['route']}" == route]
        if not rows:
            known = sorted({f"{r['listener']}/{r['route']}" for r in data["budgets"]})
            app.abort(
                f"xdsctl: no limited route {route!r} (routes: {', '.join(known) or 'none'})", 1
            )
        data["budgets"] = rows
        pools = {pool for r in rows for pool in r["pools"]}
        data["token_budgets"] = [t for t in data.get("token_budgets", []) if t["pool"] in pools]
    if app.output is not OutputFormat.TABLE:
        app.print_data(data)
        return
    table = Table(box=None)
    columns = ["GROUP", "ROUTE", "CLASS", "FLEET/S", "ENVOYS", "PER ENVOY/S", "BUCKET", "P99"]
    for column in [*columns, "PRESSURE", "ACTION"]:
        table.add_column(column, overflow="fold")
    for r in data["budgets"]:
        pressure = "-" if r["pressure"] is None else f"{r['pressure']:.2f}"
        table.add_row(
            r["group"],
            f"{r['listener']}/{r['route']}",
            r["priority"],
            f"{r['fleet_rps']:g}",
            _envoys(r),
            f"{r['envoy_rps']:g}",
            str(r["bucket"]["max_tokens"]),
            _p99(r),
            pressure,
            r["action"],
        )
    app.console.print(table)
    if tokens := data.get("token_budgets"):
        app.console.print(_token_table(tokens))
    if data.get("source_error"):
        app.err.print(f"P99 source: {data['source_error']}", markup=False)


def _envoys(row: dict[str, Any]) -> str:
    """How many Envoys share the rate; with a gateway fleet, how many of them are here."""
    if row.get("gateway_fleet") is None:
        return str(row["envoys"])
    return f"{row['envoys']} ({row['connected']} here)"
