"""``xdsctl events [--follow]``: what just happened (pushes, ACKs, NACKs, publishes, reloads,
errors), oldest first."""

from __future__ import annotations

import datetime
import json
import time
from typing import Annotated, Any

import typer

from xds_control.cli.app import OutputFormat
from xds_control.cli.xdsctl.context import XdsctlApp

__all__ = ["command", "line"]

_POLL_S = 0.5


def line(event: dict[str, Any]) -> str:
    """One event as a log line."""
    at = datetime.datetime.fromtimestamp(event["at"], tz=datetime.UTC)
    parts = [at.strftime("%H:%M:%S.%f")[:-3], event["kind"].upper()]
    parts += [event[k] for k in ("node_id", "type", "version") if event[k]]
    if event["message"]:
        parts.append(f"- {event['message']}")
    return " ".join(parts)


def command(
    ctx: typer.Context,
    follow: Annotated[
        bool, typer.Option("--follow", "-f", help="Keep printing events as they come.")
    ] = False,
    limit: Annotated[int, typer.Option(help="At most this many past events (0: all kept).")] = 50,
) -> None:
    """Recent events from the control plane's ring (the newest 1,000 are kept); with
    --follow and -o json, one JSON object per line."""
    app: XdsctlApp = ctx.obj
    events = app.client.get("/v1/events", limit=limit)
    if not follow and app.output is not OutputFormat.TABLE:
        app.print_data(events)
        return
    while True:
        for event in events:
            if app.output is OutputFormat.TABLE:
                app.console.print(line(event), markup=False, highlight=False)
            else:  # following: one JSON document per line
                app.console.print(json.dumps(event), markup=False, highlight=False)
        if not follow:
            return
        after = events[-1]["seq"] if events else 0
        time.sleep(_POLL_S)
        events = app.client.get("/v1/events", after=after)
