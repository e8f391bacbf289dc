"""``xdsctl``: the operator's view of the control plane, in the manner of istioctl."""

from __future__ import annotations

from typing import Annotated

import typer

from xds_control.cli.app import OutputFormat
from xds_control.cli.xdsctl import endpoints, proxy_status
from xds_control.cli.xdsctl.client import AdminClient, AdminUnreachable
from xds_control.cli.xdsctl.context import XdsctlApp

__all__ = ["app", "main"]

app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    help="Inspect an xds-control control plane: connected Envoys, versions, weights.",
)


@app.callback()
def root(
    ctx: typer.Context,
    admin: Annotated[
        str,
        typer.Option(
            help="Admin URL of the control plane.", envvar="XDSCTL_ADMIN_URL", show_default=True
        ),
    ] = "http://127.0.0.1:9902",
    output: Annotated[
        OutputFormat, typer.Option("--output", "-o", help="table, json or yaml.")
    ] = OutputFormat.TABLE,
) -> None:
    """Global options."""
    ctx.obj = XdsctlApp(output=output, client=AdminClient(admin))


app.command("proxy-status")(proxy_status.command)
app.command("endpoints")(endpoints.command)


def main() -> None:
    """Entry point: an unreachable control plane is one line on stderr and exit 1."""
    try:
        app(standalone_mode=True)
    except AdminUnreachable as exc:
        typer.echo(f"xdsctl: cannot reach the control plane: {exc}", err=True)
        raise SystemExit(1) from None
