"""``xdsctl``: the operator's view of the control plane, in the manner of istioctl.

Exit codes (docs/xdsctl.md): 0 done; 1 the control plane is unreachable, refused the token,
or does not know the pool, endpoint or node asked for; 2 bad flags or arguments (and an invalid
file for ``validate``); 3 ``diff`` found Envoy not running what it is served.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from xds_control.cli.app import OutputFormat
from xds_control.cli.xdsctl import (
    config,
    diff,
    endpoints,
    events,
    explain,
    kv_events,
    limits,
    proxy_status,
    status,
    validate,
    watch,
    weights,
)
from xds_control.cli.xdsctl.client import AdminClient, AdminError, Unauthorized
from xds_control.cli.xdsctl.context import XdsctlApp

__all__ = ["app", "main"]

app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    help="Inspect an xds-control control plane: connected Envoys, versions, weights, events.",
)


def _token(token_file: Path | None, token: str | None) -> str | None:
    if token_file is None:
        return token or None
    try:
        return token_file.read_text(encoding="utf-8").strip() or None
    except OSError as exc:
        raise typer.BadParameter(
            f"{token_file}: {exc.strerror}", param_hint="--token-file"
        ) from None


@app.callback()
def root(
    ctx: typer.Context,
    server: Annotated[
        str,
        typer.Option(
            "--server",
            "--admin",
            help="Admin URL of the control plane (env XDSCTL_SERVER; --admin and "
            "XDSCTL_ADMIN_URL are the older names).",
            envvar=["XDSCTL_SERVER", "XDSCTL_ADMIN_URL"],
            show_default=True,
        ),
    ] = "http://127.0.0.1:9902",
    token_file: Annotated[
        Path | None,
        typer.Option(
            help="File holding the admin bearer token (env XDSCTL_TOKEN_FILE).",
            envvar="XDSCTL_TOKEN_FILE",
        ),
    ] = None,
    token: Annotated[
        str | None,
        typer.Option(
            help="The admin bearer token itself (env XDSCTL_TOKEN).",
            envvar="XDSCTL_TOKEN",
            show_default=False,
        ),
    ] = None,
    output: Annotated[
        OutputFormat, typer.Option("--output", "-o", help="table, json or yaml.")
    ] = OutputFormat.TABLE,
) -> None:
    """Global options."""
    client = AdminClient(server, token=_token(token_file, token))
    ctx.obj = XdsctlApp(output=output, client=client)


app.command("status")(status.command)
app.command("proxy-status", help="The same as status (istioctl's name).")(proxy_status.command)
app.command("weights")(weights.command)
app.command("limits")(limits.command)
app.command("kv-events")(kv_events.command)
app.command("explain")(explain.command)
app.command("config")(config.command)
app.command("diff")(diff.command)
app.command("events")(events.command)
app.command("watch")(watch.command)
app.command("endpoints")(endpoints.command)
app.command("validate")(validate.command)


def main() -> None:
    """Entry point: a control plane that is unreachable or refuses is one line on stderr and
    exit 1, never a traceback."""
    try:
        app(standalone_mode=True)
    except Unauthorized as exc:
        typer.echo(f"xdsctl: {exc} (give --token-file or XDSCTL_TOKEN)", err=True)
        raise SystemExit(1) from None
    except AdminError as exc:
        typer.echo(f"xdsctl: cannot reach the control plane: {exc}", err=True)
        raise SystemExit(1) from None
