"""``xdsctl config NODE [--type cds|eds|lds|rds]``: what the control plane serves that Envoy."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any

import typer

from xds_control.cli.xdsctl.context import XdsctlApp
from xds_control.cli.xdsctl.nodes import served_for, stream_of

__all__ = ["XdsType", "command"]


class XdsType(StrEnum):
    """The xDS types, by the names Envoy's docs use."""

    CDS = "cds"
    EDS = "eds"
    LDS = "lds"
    RDS = "rds"


def command(
    ctx: typer.Context,
    node: Annotated[str, typer.Argument(help="The Envoy's node id.")],
    type_: Annotated[XdsType | None, typer.Option("--type", "-t", help="Only this type.")] = None,
) -> None:
    """The resources the control plane serves NODE's node group, as Envoy JSON, with versions.
    Always JSON or YAML (a table would hide the content)."""
    app: XdsctlApp = ctx.obj
    snapshot = served_for(app, stream_of(app, node))
    types: list[dict[str, Any]] = [
        t for t in snapshot["types"] if type_ is None or t["type"] == type_.value.upper()
    ]
    data = {
        "node_id": node,
        "version": snapshot["version"],
        "types": [
            {"type": t["type"], "version": t["version"], "resources": t.get("resources", [])}
            for t in types
        ],
    }
    if app.output.value == "yaml":
        app.print_data(data)
    else:
        app.console.print_json(data=data)
