"""Tiny HTTP backends that say who they are: stand-ins where inference does not matter."""

from __future__ import annotations

from collections import Counter

from aiohttp import web

__all__ = ["BACKEND_HEADER", "EchoBackends"]

BACKEND_HEADER = "x-backend"


class EchoBackends:
    """``count`` aiohttp servers in this process on loopback; each answers every request with
    its own name (in ``x-backend`` and the JSON body) and counts what it served."""

    def __init__(self, *, ports: list[int]) -> None:
        self.ports = ports
        self.served: Counter[str] = Counter()
        self._runners: list[web.AppRunner] = []

    def address(self, index: int) -> str:
        """``IP:PORT`` of backend ``index``."""
        return f"127.0.0.1:{self.ports[index]}"

    @property
    def addresses(self) -> dict[str, str]:
        """Name -> ``IP:PORT``; a backend's name is its address (what it answers with)."""
        return {a: a for a in map(self.address, range(len(self.ports)))}

    async def start(self) -> None:
        """Bind every backend."""
        for port in self.ports:
            name = f"127.0.0.1:{port}"

            async def handle(request: web.Request, name: str = name) -> web.Response:
                self.served[name] += 1
                return web.json_response({"backend": name}, headers={BACKEND_HEADER: name})

            app = web.Application()
            app.router.add_route("*", "/{tail:.*}", handle)
            runner = web.AppRunner(app, access_log=None)
            await runner.setup()
            await web.TCPSite(runner, "127.0.0.1", port).start()
            self._runners.append(runner)

    async def stop(self) -> None:
        """Close every backend."""
        for runner in self._runners:
            await runner.cleanup()
        self._runners.clear()
