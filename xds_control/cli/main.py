"""The ``xds-control`` command: one module per subcommand."""

from __future__ import annotations

from typing import Annotated

import typer

from xds_control.cli import bench, bootstrap, demo, serve, sim, validate
from xds_control.cli.app import App, OutputFormat
from xds_control.log import configure_logging

__all__ = ["app"]

app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    help="An Envoy xDS control plane for fleets of LLM inference servers.",
)


@app.callback()
def root(
    ctx: typer.Context,
    log_level: Annotated[
        str, typer.Option(help="debug, info, warning or error.", envvar="XDS_CONTROL_LOG_LEVEL")
    ] = "info",
    log_format: Annotated[
        str,
        typer.Option(
            help="json, console, or auto (console on a terminal).",
            envvar="XDS_CONTROL_LOG_FORMAT",
        ),
    ] = "auto",
    output: Annotated[
        OutputFormat, typer.Option("--output", "-o", help="table, json or yaml.")
    ] = OutputFormat.TABLE,
) -> None:
    """Global options."""
    configure_logging(level=log_level, json=None if log_format == "auto" else log_format == "json")
    ctx.obj = App(output=output)


app.command("serve")(serve.command)
app.command("validate")(validate.command)
app.command("bootstrap")(bootstrap.command)
app.command("demo")(demo.command)
app.command("sim")(sim.command)
app.add_typer(bench.bench_app, name="bench")
