"""``xdsctl weights [POOL] [--explain]``: each endpoint's weight and why."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.table import Table

from xds_control.cli.app import OutputFormat
from xds_control.cli.xdsctl.context import XdsctlApp

__all__ = ["command", "fetch"]

FACTORS = ("capacity", "queue", "kv", "prefix", "gpu_memory", "slo", "engine")


def fetch(app: XdsctlApp, pool: str | None, *, explain: bool) -> dict[str, Any]:
    """``/v1/weights``, only ``pool`` if given (an unknown pool aborts with the known ones)."""
    data: dict[str, Any] = app.client.get("/v1/weights", explain=explain)
    if pool is not None:
        if pool not in data["pools"]:
            known = ", ".join(sorted(data["pools"])) or "none"
            app.abort(f"xdsctl: no pool named {pool!r} (pools: {known})", 1)
        data["pools"] = {pool: data["pools"][pool]}
        data["autoscale"] = {k: v for k, v in data.get("autoscale", {}).items() if k == pool}
    return data


def _adapters(held: dict[str, Any] | None) -> str:
    """``a,b (+c waiting) 2/4``: the running adapters, those waiting, slots used of max."""
    if held is None:
        return "-"
    text = ",".join(held["running"]) or "none"
    if held["waiting"]:
        text += f" (+{','.join(held['waiting'])} waiting)"
    return f"{text} {len(held['running'])}/{held['max_lora']}"


def command(
    ctx: typer.Context,
    pool: Annotated[str | None, typer.Argument(help="Only this pool.")] = None,
    explain: Annotated[
        bool, typer.Option("--explain", help="Every factor and the score they make.")
    ] = False,
) -> None:
    """Each endpoint's weight, health and reason; with --explain, the factors whose product is
    the score that became the weight (docs/weights.md)."""
    app: XdsctlApp = ctx.obj
    data = fetch(app, pool, explain=explain)
    if app.output is not OutputFormat.TABLE:
        app.print_data(data)
        return
    explained = explain and data["engine"]
    lora = any("adapters" in e for rows in data["pools"].values() for e in rows)
    table = Table(box=None)
    columns = ["POOL", "ENDPOINT", "WEIGHT", "HEALTH"]
    if explained:
        columns += ["SCORE", *(f.upper() for f in FACTORS)]
    if lora:
        columns += ["ADAPTERS"]
    for column in [*columns, "REASON"]:
        table.add_column(column, overflow="fold")
    for name, endpoints in data["pools"].items():
        for e in endpoints:
            cells = [name, e["address"], str(e["weight"]), e["health"]]
            if explained:
                cells += [f"{e['score']:.4f}", *(f"{e['factors'][f]:.3f}" for f in FACTORS)]
            if lora:
                cells.append(_adapters(e.get("adapters")))
            table.add_row(*cells, e["reason"])
    app.console.print(table)
    for name, advice in data.get("autoscale", {}).items():
        app.console.print(
            f"{name}: {advice['recommended_replicas']} replicas recommended "
            f"(now {advice['current_replicas']}): {advice['reason']}",
            markup=False,
            highlight=False,
        )
    if data["engine"] and data.get("source_error"):
        app.err.print(f"signal source: {data['source_error']}", markup=False)
