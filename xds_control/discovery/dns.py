"""Endpoints from host names: every A and AAAA address of a name is an endpoint.

Outside Kubernetes operators list servers by name (``vllm-0.internal:8000``); Envoy's EDS takes
IP addresses only, and the engine weights each address, so the control plane resolves names
itself. A name that fails to resolve keeps its last good addresses: a resolver hiccup must not
empty a pool.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import structlog

from xds_control.config.discovery import DnsDiscovery, parse_host_name_port
from xds_control.discovery.endpoint import Endpoint
from xds_control.errors import DiscoveryError

__all__ = ["DnsSource", "Resolver", "system_resolver"]

log = structlog.get_logger(__name__)


class Resolver(Protocol):
    """Resolves a host name to IP address strings (IPv4 and IPv6, in any order).

    Raises ``OSError`` (``socket.gaierror`` included) when the name cannot be resolved now;
    an empty answer counts as a failure too. It must not block the event loop."""

    async def __call__(self, host: str, port: int) -> tuple[str, ...]: ...


async def system_resolver(host: str, port: int) -> tuple[str, ...]:
    """The system's resolver through the event loop's ``getaddrinfo``, which runs it in the
    default executor: /etc/hosts, search domains and nsswitch apply, and the loop never
    blocks."""
    infos = await asyncio.get_running_loop().getaddrinfo(
        host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP
    )
    return tuple(str(info[4][0]) for info in infos)


@dataclass
class _Name:
    host: str
    port: int
    addresses: tuple[str, ...] = ()
    due: float = 0.0
    """When to resolve it next (monotonic seconds)."""
    error: str | None = None


class DnsSource:
    """The addresses of ``settings.hosts``, resolved when due: every ``refresh_s`` after a
    success, ``retry_s`` after a failure. Resolution happens inside ``fetch``, which the control
    loop calls every reconcile period, so no task outlives the source."""

    def __init__(
        self,
        settings: DnsDiscovery,
        *,
        resolver: Resolver = system_resolver,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._settings = settings
        self._resolver = resolver
        self._clock = clock
        self._names = [_Name(*parse_host_name_port(entry)) for entry in settings.hosts]

    @property
    def settings(self) -> DnsDiscovery:
        """What it was built from: a reload with the same settings keeps this source."""
        return self._settings

    async def fetch(self) -> tuple[Endpoint, ...]:
        """Every address of every name; ``DiscoveryError`` only when no name has ever
        resolved (one that did keeps its last good addresses)."""
        now = self._clock()
        due = [name for name in self._names if name.due <= now]
        if due:
            await asyncio.gather(*(self._resolve(name, now=now) for name in due))
        if not any(name.addresses for name in self._names):
            problems = "; ".join(f"{n.host}: {n.error}" for n in self._names if n.error)
            raise DiscoveryError(f"no host name resolved yet: {problems}")
        return self._endpoints()

    async def _resolve(self, name: _Name, *, now: float) -> None:
        settings = self._settings
        try:
            async with asyncio.timeout(settings.timeout_s):
                answer = await self._resolver(name.host, name.port)
            addresses = _unique_ips(answer)
            if not addresses:
                raise OSError("no A or AAAA address")
        except (OSError, TimeoutError) as exc:
            error = str(exc) or f"timed out after {settings.timeout_s} s"
            if error != name.error:
                log.error(
                    "DNS resolution failed; keeping the last good addresses",
                    host=name.host,
                    error=error,
                    kept=list(name.addresses),
                    retry_in_s=settings.retry_s,
                )
            name.error, name.due = error, now + min(settings.retry_s, settings.refresh_s)
            return
        if addresses != name.addresses or name.error is not None:
            log.info("DNS name resolved", host=name.host, addresses=list(addresses))
        name.addresses, name.error, name.due = addresses, None, now + settings.refresh_s

    def _endpoints(self) -> tuple[Endpoint, ...]:
        seen: dict[str, Endpoint] = {}
        for name in self._names:
            for ip in name.addresses:
                address = f"[{ip}]:{name.port}" if ":" in ip else f"{ip}:{name.port}"
                seen.setdefault(
                    address,
                    Endpoint(
                        address=address,
                        host=ip,
                        port=name.port,
                        weight=self._settings.weight,
                        batch_slots=self._settings.batch_slots,
                    ),
                )
        return tuple(seen.values())


def _unique_ips(answer: tuple[str, ...]) -> tuple[str, ...]:
    """Valid IP literals, deduplicated (getaddrinfo repeats an address per socket type) and
    sorted, so the same answer in another order is no change."""
    ips = set()
    for text in answer:
        try:
            ips.add(ipaddress.ip_address(text.split("%", 1)[0]))
        except ValueError:
            continue
    return tuple(str(ip) for ip in sorted(ips, key=lambda ip: (ip.version, ip)))
