"""``xdsctl explain POOL ENDPOINT``: one weight taken apart: each factor, each input, its age."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.table import Table

from xds_control.cli.app import OutputFormat
from xds_control.cli.xdsctl.context import XdsctlApp
from xds_control.cli.xdsctl.weights import fetch

__all__ = ["command"]


def command(
    ctx: typer.Context,
    pool: Annotated[str, typer.Argument(help="The pool.")],
    endpoint: Annotated[str, typer.Argument(help="The endpoint's address, HOST:PORT.")],
) -> None:
    """Why ENDPOINT has its weight: the factors (their product is the score), the signal
    readings they came from with their ages, and the smoothing from target to weight."""
    app: XdsctlApp = ctx.obj
    data = fetch(app, pool, explain=True)
    if not data["engine"]:
        app.abort("xdsctl: no signal source configured: weights are static (config)", 1)
    found = [e for e in data["pools"][pool] if e["address"] == endpoint]
    if not found:
        known = ", ".join(e["address"] for e in data["pools"][pool]) or "none"
        app.abort(f"xdsctl: no endpoint {endpoint!r} in pool {pool!r} (endpoints: {known})", 1)
    decision: dict[str, Any] = found[0]
    if app.output is not OutputFormat.TABLE:
        app.print_data(decision)
        return
    say = app.console.print
    say(f"{pool} {endpoint}: weight {decision['weight']} ({decision['health']})", markup=False)
    say(f"reason: {decision['reason']}", markup=False)
    factors = Table("FACTOR", "VALUE", box=None, title="score = product of the factors")
    for name, value in decision["factors"].items():
        factors.add_row(name, f"{value:.6f}")
    factors.add_row("= score", f"{decision['score']:.6f}")
    say(factors)
    inputs = Table("SIGNAL", "VALUE", "AGE (s)", "SOURCE", box=None, title="inputs")
    for name, reading in decision["inputs"].items():
        inputs.add_row(name, f"{reading['value']:g}", f"{reading['age_s']:g}", reading["source"])
    say(inputs)
    say(
        f"target {decision['target']} -> smoothed {decision['smoothed']} -> warmup x"
        f"{decision['warmup']} -> weight {decision['weight']}",
        markup=False,
    )
    for name, why in decision["rejected"].items():
        say(f"rejected {name}: {why}", markup=False)
