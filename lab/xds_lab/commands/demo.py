"""``xds-control demo``: a mixed fleet, the engine's weights, a fault, and Envoy following."""

from __future__ import annotations

import asyncio
from typing import Annotated

import typer

from xds_control.cli.app import App
from xds_lab.demo.tour import run_tour

__all__ = ["command"]


def command(
    ctx: typer.Context,
    duration: Annotated[
        float | None,
        typer.Option(
            min=30,
            help="Run warm-up, fault and recovery once in about this many seconds, then exit "
            "with a verdict (0: the slowed server lost weight and traffic, then won its weight "
            "back; 1: it did not).",
        ),
    ] = None,
) -> None:
    """Start six simulated vLLM servers (H100, A100, L4), the control plane with the weight
    engine and a real Envoy; send steady traffic; slow one H100 down midway and watch.

    Without --duration the phases repeat until Ctrl-C.
    """
    app: App = ctx.obj
    try:
        verdict = asyncio.run(run_tour(duration=duration, console=app.console))
    except KeyboardInterrupt:
        app.console.print("stopped")
        return
    if verdict is None:
        return
    if not verdict.ok:
        app.abort(verdict.message, 1)
    app.console.print(verdict.message, markup=False, highlight=False)
