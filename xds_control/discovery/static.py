"""Endpoints listed inline in the config."""

from __future__ import annotations

from collections.abc import Iterable

from xds_control.config import EndpointConfig, parse_host_port
from xds_control.discovery.endpoint import Endpoint

__all__ = ["StaticSource", "to_endpoints"]


def to_endpoints(configs: Iterable[EndpointConfig]) -> tuple[Endpoint, ...]:
    """Validated endpoint configs -> endpoints."""
    out = []
    for item in configs:
        host, port = parse_host_port(item.address)
        out.append(
            Endpoint(
                address=item.address,
                host=host,
                port=port,
                weight=item.weight,
                batch_slots=item.batch_slots,
                device=item.device,
                engine=item.engine,
                kv_events=item.kv_events,
                role=item.role,
            )
        )
    return tuple(out)


class StaticSource:
    """The pool's inline ``endpoints``; never fails."""

    def __init__(self, endpoints: Iterable[EndpointConfig]) -> None:
        self._endpoints = to_endpoints(endpoints)

    async def fetch(self) -> tuple[Endpoint, ...]:
        """The inline endpoints."""
        return self._endpoints
