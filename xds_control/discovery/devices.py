"""Refuse a single-device pool's endpoint set when its MIG slices sit on different GPUs."""

from __future__ import annotations

from xds_control.config.devices import single_device_problem
from xds_control.discovery.endpoint import Endpoint
from xds_control.discovery.protocol import EndpointSource
from xds_control.errors import DiscoveryError

__all__ = ["SingleDeviceSource"]


class SingleDeviceSource:
    """Another source's endpoints, checked to share one GPU; wraps any ``EndpointSource``.

    A set that does not is an error like an invalid file: the control loop keeps the last good
    set, logs the message, which names the endpoints on each GPU, and shows it in
    ``/v1/status`` ``discovery_errors``. A Kubernetes source's next event is checked anew, so
    removing the stray pod lets updates flow again."""

    def __init__(self, source: EndpointSource, *, pool: str) -> None:
        self._source = source
        self._pool = pool

    @property
    def source(self) -> EndpointSource:
        """The wrapped source (a watching one is kept across reloads and closed by its owner)."""
        return self._source

    async def fetch(self) -> tuple[Endpoint, ...]:
        """The wrapped source's endpoints; ``DiscoveryError`` when they span several GPUs or
        one does not say which GPU it is on."""
        endpoints = await self._source.fetch()
        problem = single_device_problem(
            pool=self._pool, endpoints=((e.address, e.device) for e in endpoints)
        )
        if endpoints and problem is not None:
            raise DiscoveryError(problem)
        return endpoints
