"""``xds-control bootstrap``: print an Envoy bootstrap that pulls everything over ADS."""

from __future__ import annotations

import json
from typing import Annotated

import typer
import yaml

from xds_control.cli.app import App, OutputFormat
from xds_control.config import parse_host_port
from xds_control.xds import build_bootstrap
from xds_control.xds.bootstrap import AdsVariant, XdsTls

__all__ = ["DEFAULT_SOCKET", "command"]

DEFAULT_SOCKET = "/var/run/xds-control/ads.sock"
"""Where ``--sidecar`` looks for the control plane: a folder both containers mount."""


NodeId = Annotated[str, typer.Option(help="Envoy node id (overridable by --service-node).")]
NodeCluster = Annotated[str, typer.Option(help="Envoy node cluster.")]
XdsAddress = Annotated[str, typer.Option(help="Control plane IP:PORT, or NAME:PORT with --dns.")]
AdminPort = Annotated[int, typer.Option(help="Envoy admin port (on 127.0.0.1).")]
Dns = Annotated[bool, typer.Option(help="Resolve the control plane by DNS.")]
Ads = Annotated[
    str,
    typer.Option(
        help="xDS variant: sotw (state of the world) or delta (incremental: only changed "
        "resources are sent)."
    ),
]
Sidecar = Annotated[
    bool,
    typer.Option(
        help="Reach the control plane over a Unix socket (--socket) instead of "
        "--xds-address: serve it with xds_address: unix:///PATH."
    ),
]
Socket = Annotated[str, typer.Option(help="The control plane's Unix socket, with --sidecar.")]
TlsCa = Annotated[
    str | None,
    typer.Option(help="CA file (PEM) Envoy checks the control plane's certificate with."),
]
TlsCert = Annotated[
    str | None,
    typer.Option(help="Envoy's client certificate (PEM), for mutual TLS; with --tls-key."),
]
TlsKey = Annotated[str | None, typer.Option(help="Envoy's client key (PEM).")]
TlsServerName = Annotated[
    str | None, typer.Option(help="SNI, and the DNS name the server's certificate must carry.")
]


def command(
    ctx: typer.Context,
    node_id: NodeId,
    node_cluster: NodeCluster = "gateway",
    xds_address: XdsAddress = "127.0.0.1:18000",
    admin_port: AdminPort = 9901,
    dns: Dns = False,
    ads: Ads = "sotw",
    sidecar: Sidecar = False,
    socket: Socket = DEFAULT_SOCKET,
    tls_ca: TlsCa = None,
    tls_cert: TlsCert = None,
    tls_key: TlsKey = None,
    tls_server_name: TlsServerName = None,
) -> None:
    """Print the bootstrap (JSON, or YAML with ``-o yaml``)."""
    app: App = ctx.obj
    tls = _tls(app, ca=tls_ca, cert=tls_cert, key=tls_key, server_name=tls_server_name)
    if sidecar and not socket.startswith("/"):
        app.abort(f"--socket: {socket!r} is not an absolute path", 2)
    host, port = _control_plane(app, xds_address, dns=dns)
    bootstrap = build_bootstrap(
        node_id=node_id,
        node_cluster=node_cluster,
        xds_host=host,
        xds_port=port,
        admin_port=admin_port,
        discovery="dns" if dns else "static",
        ads=_variant(app, ads),
        xds_pipe=socket if sidecar else None,
        tls=tls,
    )
    if app.output is OutputFormat.YAML:
        typer.echo(yaml.safe_dump(bootstrap, sort_keys=False), nl=False)
    else:
        typer.echo(json.dumps(bootstrap, indent=2))


def _control_plane(app: App, xds_address: str, *, dns: bool) -> tuple[str, int]:
    """``--xds-address`` as host and port: an IP's checked, a DNS name's kept as written."""
    if not dns:
        try:
            return parse_host_port(xds_address)
        except ValueError as exc:
            app.abort(f"--xds-address: {exc}", 2)
    host, _, port = xds_address.rpartition(":")
    if not port.isdigit():
        app.abort(f"--xds-address: {xds_address!r} is not NAME:PORT", 2)
    return host, int(port)


def _variant(app: App, ads: str) -> AdsVariant:
    if ads not in ("sotw", "delta"):
        app.abort(f"--ads: {ads!r} is not sotw or delta", 2)
    return "delta" if ads == "delta" else "sotw"


def _tls(
    app: App, *, ca: str | None, cert: str | None, key: str | None, server_name: str | None
) -> XdsTls | None:
    if (cert is None) != (key is None):
        app.abort("--tls-cert and --tls-key go together", 2)
    if ca is None:
        if cert is not None or server_name is not None:
            app.abort("--tls-cert, --tls-key and --tls-server-name need --tls-ca", 2)
        return None
    return XdsTls(ca_file=ca, cert_file=cert, key_file=key, server_name=server_name)
