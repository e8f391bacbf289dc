"""``xds-control bootstrap``: print an Envoy bootstrap that pulls everything over ADS."""

from __future__ import annotations

import json
from typing import Annotated, Literal

import typer
import yaml

from xds_control.cli.app import App, OutputFormat
from xds_control.config import parse_host_port
from xds_control.xds import build_bootstrap
from xds_control.xds.bootstrap import AdsVariant

__all__ = ["command"]


def command(
    ctx: typer.Context,
    node_id: Annotated[str, typer.Option(help="Envoy node id (overridable by --service-node).")],
    node_cluster: Annotated[str, typer.Option(help="Envoy node cluster.")] = "gateway",
    xds_address: Annotated[
        str, typer.Option(help="Control plane IP:PORT, or NAME:PORT with --dns.")
    ] = "127.0.0.1:18000",
    admin_port: Annotated[int, typer.Option(help="Envoy admin port (on 127.0.0.1).")] = 9901,
    dns: Annotated[bool, typer.Option(help="Resolve the control plane by DNS.")] = False,
    ads: Annotated[
        str,
        typer.Option(
            help="xDS variant: sotw (state of the world) or delta (incremental: only changed "
            "resources are sent)."
        ),
    ] = "sotw",
) -> None:
    """Print the bootstrap (JSON, or YAML with ``-o yaml``)."""
    app: App = ctx.obj
    host, _, port = xds_address.rpartition(":")
    if not dns:
        try:
            host, port_int = parse_host_port(xds_address)
        except ValueError as exc:
            app.abort(f"--xds-address: {exc}", 2)
    elif not port.isdigit():
        app.abort(f"--xds-address: {xds_address!r} is not NAME:PORT", 2)
    else:
        port_int = int(port)
    if ads not in ("sotw", "delta"):
        app.abort(f"--ads: {ads!r} is not sotw or delta", 2)
    variant: AdsVariant = "delta" if ads == "delta" else "sotw"
    discovery: Literal["static", "dns"] = "dns" if dns else "static"
    bootstrap = build_bootstrap(
        node_id=node_id,
        node_cluster=node_cluster,
        xds_host=host,
        xds_port=port_int,
        admin_port=admin_port,
        discovery=discovery,
        ads=variant,
    )
    if app.output is OutputFormat.YAML:
        typer.echo(yaml.safe_dump(bootstrap, sort_keys=False), nl=False)
    else:
        typer.echo(json.dumps(bootstrap, indent=2))
