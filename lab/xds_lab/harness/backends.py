"""Tiny HTTP backends that say who they are: stand-ins where inference does not matter."""

from __future__ import annotations

from collections import Counter

from aiohttp import web

__all__ = ["BACKEND_HEADER", "BODY_HEADER", "PICKED_HEADER", "EchoBackends"]

BACKEND_HEADER = "x-backend"
BODY_HEADER = "x-request-body-bytes"
PICKED_HEADER = "x-picked-endpoints"
"""The request's ``x-gateway-destination-endpoint`` (what the picker named), given back."""
"""How many bytes of request body the backend received (what a filter in between left)."""


class EchoBackends:
    """``count`` aiohttp servers in this process on loopback; each answers every request with
    its own name (in ``x-backend`` and the JSON body), the size of the body it received
    (``x-request-body-bytes``) and the endpoints a picker named for the request
    (``x-picked-endpoints``, empty when none), and counts what it served. ``hosts`` (default
    127.0.0.1 for all) puts backends on other loopback addresses, so several can share one port
    as the pods of one Kubernetes pool do."""

    def __init__(self, *, ports: list[int], hosts: list[str] | None = None) -> None:
        self.ports = ports
        self.hosts = hosts or ["127.0.0.1"] * len(ports)
        self.served: Counter[str] = Counter()
        self._runners: list[web.AppRunner] = []

    def address(self, index: int) -> str:
        """``IP:PORT`` of backend ``index``."""
        return f"{self.hosts[index]}:{self.ports[index]}"

    @property
    def addresses(self) -> dict[str, str]:
        """Name -> ``IP:PORT``; a backend's name is its address (what it answers with)."""
        return {a: a for a in map(self.address, range(len(self.ports)))}

    async def start(self) -> None:
        """Bind every backend."""
        for host, port in zip(self.hosts, self.ports, strict=True):
            name = f"{host}:{port}"

            async def handle(request: web.Request, name: str = name) -> web.Response:
                self.served[name] += 1
                size = str(len(await request.read()))
                picked = request.headers.get("x-gateway-destination-endpoint", "")
                headers = {BACKEND_HEADER: name, BODY_HEADER: size, PICKED_HEADER: picked}
                return web.json_response({"backend": name}, headers=headers)

            app = web.Application()
            app.router.add_route("*", "/{tail:.*}", handle)
            runner = web.AppRunner(app, access_log=None)
            await runner.setup()
            await web.TCPSite(runner, host, port).start()
            self._runners.append(runner)

    async def stop(self) -> None:
        """Close every backend."""
        for runner in self._runners:
            await runner.cleanup()
        self._runners.clear()
