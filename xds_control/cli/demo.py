"""``xds-control demo``: watch Envoy's traffic follow the control plane's weights."""

from __future__ import annotations

import asyncio
from typing import Annotated

import typer

from xds_control.cli.app import App
from xds_control.demo.tour import TOLERANCE, run_tour

__all__ = ["command"]


def command(
    ctx: typer.Context,
    duration: Annotated[
        float | None,
        typer.Option(
            help="Run the tour once in about this many seconds, then exit with a verdict."
        ),
    ] = None,
) -> None:
    """Start backends, the control plane and a real Envoy; change weights; show the shares.

    Without --duration it loops until Ctrl-C. With it, it exits 1 when a backend's share
    strayed more than 6 points from its weight's share.
    """
    app: App = ctx.obj
    try:
        results = asyncio.run(run_tour(duration=duration, console=app.console))
    except KeyboardInterrupt:
        app.console.print("stopped")
        return
    worst = max(r.worst_gap for r in results)
    requests = sum(r.total for r in results)
    if worst > TOLERANCE:
        app.abort(f"FAIL: traffic did not follow the weights (worst gap {worst:.1%})", 1)
    app.console.print(
        f"OK: {requests} requests in {len(results)} phases followed the weights "
        f"(worst gap {worst:.1%}, tolerance {TOLERANCE:.0%})"
    )
