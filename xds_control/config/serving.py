"""How the xDS port is served: a TCP address or a Unix socket, TLS, and gRPC's limits."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import AfterValidator, Field, model_validator

from xds_control.config.address import parse_host_port
from xds_control.config.strict import StrictModel

__all__ = ["UNIX_SCHEME", "GrpcConfig", "TlsConfig", "XdsAddress", "parse_xds_address"]

UNIX_SCHEME = "unix://"


def parse_xds_address(value: str) -> str | Path:
    """``IP:PORT`` (returned as is) or ``unix:///absolute/path`` (its path); ``ValueError``
    with a plain reason for anything else."""
    if value.startswith("unix:"):
        path = value.removeprefix(UNIX_SCHEME) if value.startswith(UNIX_SCHEME) else ""
        if not path.startswith("/"):
            raise ValueError(f"{value!r} is not unix:///absolute/path")
        return Path(path)
    parse_host_port(value)
    return value


def _check(value: str) -> str:
    parse_xds_address(value)
    return value


XdsAddress = Annotated[str, AfterValidator(_check)]
"""``IP:PORT`` or ``unix:///absolute/path``."""


class TlsConfig(StrictModel):
    """TLS on the TCP xDS port; with ``client_ca_file``, mutual TLS."""

    cert_file: Path = Field(description="The server's certificate chain (PEM).")
    key_file: Path = Field(description="The server's private key (PEM).")
    client_ca_file: Path | None = Field(
        default=None,
        description="CA bundle (PEM) client certificates must chain to. Set: mutual TLS, a "
        "client without a valid certificate is refused at the handshake. Unset: any client.",
    )
    verify_node_id: bool = Field(
        default=False,
        description="With mutual TLS: an Envoy's node id must be named by its certificate, as "
        "a SAN URI equal to the node id or ending in `/<node id>` (SPIFFE style, e.g. "
        "`spiffe://example.org/ns/llm/envoy-0`), or as a SAN DNS name equal to it. A mismatch "
        "ends the stream with PERMISSION_DENIED, so a certificate cannot fetch another "
        "node's config.",
    )

    @model_validator(mode="after")
    def _node_check_needs_client_certs(self) -> TlsConfig:
        if self.verify_node_id and self.client_ca_file is None:
            raise ValueError("verify_node_id needs client_ca_file (mutual TLS)")
        return self


class GrpcConfig(StrictModel):
    """Limits and keepalive of the xDS gRPC server."""

    max_concurrent_streams: int = Field(
        default=10_000,
        ge=1,
        description="Streams one HTTP/2 connection may open; an Envoy opens one ADS stream, "
        "so this only bounds a misbehaving client.",
    )
    keepalive_time_s: float = Field(
        default=60.0,
        gt=0,
        description="Ping an idle connection this often, so a peer that vanished (a node "
        "that lost power) is noticed and its stream closed.",
    )
    keepalive_timeout_s: float = Field(
        default=20.0, gt=0, description="How long a ping may go unanswered before closing."
    )
    min_client_ping_interval_s: float = Field(
        default=10.0,
        gt=0,
        description="Accept a client's keepalive pings this often at most (Envoy's default "
        "bootstrap here pings every 30 s); faster ones are answered with GOAWAY.",
    )
    socket_mode: int = Field(
        default=0o660,
        ge=0,
        le=0o777,
        description="File mode of a Unix-socket `xds_address` (0o660: the owner and its group, "
        "e.g. an Envoy sidecar run under the same group; never world-writable, so no other "
        "local user can connect).",
    )

    @model_validator(mode="after")
    def _not_world_writable(self) -> GrpcConfig:
        if self.socket_mode & 0o002:
            raise ValueError("socket_mode must not be world-writable (any user could connect)")
        return self
