"""``xdsctl diff NODE --envoy-admin URL``: what Envoy runs against what it is served."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Annotated, Any

import typer
from rich.table import Table

from xds_control.cli.app import OutputFormat
from xds_control.cli.xdsctl.context import XdsctlApp
from xds_control.cli.xdsctl.nodes import served_for, stream_of

__all__ = ["EXIT_DIFFERENT", "command"]

EXIT_DIFFERENT = 3
"""``diff``'s exit code when Envoy does not run what it is served (0: in sync)."""


def _config_dump(app: XdsctlApp, url: str) -> dict[str, Any]:
    target = url.rstrip("/") + "/config_dump?include_eds"
    try:
        with urllib.request.urlopen(target, timeout=app.client.timeout) as response:
            return dict(json.loads(response.read()))
    except (urllib.error.URLError, OSError, json.JSONDecodeError) as exc:
        app.abort(f"xdsctl: cannot read Envoy's config dump at {target}: {exc}", 1)


def command(
    ctx: typer.Context,
    node: Annotated[str, typer.Argument(help="The Envoy's node id.")],
    envoy_admin: Annotated[
        str, typer.Option("--envoy-admin", help="That Envoy's admin URL, e.g. http://HOST:9901.")
    ],
) -> None:
    """Compare what the control plane serves NODE with Envoy's /config_dump: each resource
    Envoy lacks, runs otherwise (a weight, a route it rejected) or still has though no longer
    served, and each type Envoy NACKed with its words. Exit 0 in sync, 3 when different."""
    app: XdsctlApp = ctx.obj
    # Imported here: comparing needs the typed configs' descriptors (every builder module), and
    # the commands that only ask the admin API should not load them at start-up.
    from xds_control.cli.xdsctl.drift import differences, envoy_resources

    stream = stream_of(app, node)
    found = differences(served_for(app, stream), envoy_resources(_config_dump(app, envoy_admin)))
    for t in stream["types"]:
        if t.get("sync") == "NACKED" or (
            t["nacked_version"] and t["nacked_version"] == t["sent_version"]
        ):
            message = f"Envoy rejected version {t['nacked_version']}: {t['last_error']}"
            found.append({"type": t["type"], "name": "", "problem": message})
    if app.output is not OutputFormat.TABLE:
        app.print_data(found)
    elif not found:
        app.console.print(f"{node}: in sync with what the control plane serves", markup=False)
    else:
        table = Table("TYPE", "NAME", "DIFFERENCE", box=None)
        for d in found:
            table.add_row(d["type"], d["name"], d["problem"])
        app.console.print(table)
    if found:
        raise typer.Exit(EXIT_DIFFERENT)
