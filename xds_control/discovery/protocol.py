"""The seam between discovery and the rest: where a pool's endpoints come from."""

from __future__ import annotations

from typing import Protocol

from xds_control.discovery.endpoint import Endpoint

__all__ = ["EndpointSource"]


class EndpointSource(Protocol):
    """The endpoints of one pool.

    ``fetch`` returns the current set, cheaply when nothing changed (sources cache and watch).
    It raises ``DiscoveryError`` when the set cannot be known now (unreadable or invalid file,
    API error); callers then keep the last good set, so a bad edit never empties a pool.
    """

    async def fetch(self) -> tuple[Endpoint, ...]:
        """The pool's endpoints now."""
        ...
