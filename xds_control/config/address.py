"""Socket addresses as they appear in config: ``IP:PORT`` or ``[IPv6]:PORT``."""

from __future__ import annotations

import ipaddress
from typing import Annotated, NamedTuple

from pydantic import AfterValidator

__all__ = ["HostPort", "IpPort", "canonical_address", "parse_host_port"]


class HostPort(NamedTuple):
    """A parsed address; ``host`` is an IP literal (EDS endpoints must be IPs, not names)."""

    host: str
    port: int


def parse_host_port(value: str) -> HostPort:
    """Split ``IP:PORT``; raise ``ValueError`` with a plain reason for anything else."""
    host, sep, port_text = value.rpartition(":")
    if not sep or not host:
        raise ValueError(f"{value!r} is not IP:PORT")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        raise ValueError(f"{host!r} in {value!r} is not an IPv4 or IPv6 address") from None
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise ValueError(f"port {port_text!r} in {value!r} is not in 1..65535")
    return HostPort(host=str(ip), port=int(port_text))


def canonical_address(value: str) -> str:
    """One spelling per socket address (``::1`` and ``0:0::1`` alike, IPv6 in brackets), so
    two spellings of one server are seen as one; ``ValueError`` as ``parse_host_port``."""
    host, port = parse_host_port(value)
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _check(value: str) -> str:
    parse_host_port(value)
    return value


IpPort = Annotated[str, AfterValidator(_check)]
"""A config string validated as ``IP:PORT``."""
