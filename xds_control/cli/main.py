"""The ``xds-control`` command: one module per subcommand."""

from __future__ import annotations

import sys
from importlib.metadata import entry_points
from typing import Annotated

import typer

from xds_control.cli import bootstrap, serve, validate
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


def _add_plugins(root: typer.Typer) -> None:
    """Commands other distributions register in the ``xds_control.commands`` entry-point group
    (the lab's ``sim``, ``demo`` and ``bench``): a Typer app becomes a group, a function a
    command. A plugin that fails to load is reported and skipped; the product's own commands
    never depend on one."""
    for entry in entry_points(group="xds_control.commands"):
        try:
            plugin = entry.load()
        except Exception as exc:  # a broken plugin must not take `serve` down with it
            print(f"xds-control: skipping command {entry.name!r}: {exc}", file=sys.stderr)
            continue
        if isinstance(plugin, typer.Typer):
            root.add_typer(plugin, name=entry.name)
        else:
            root.command(entry.name)(plugin)


_add_plugins(app)
