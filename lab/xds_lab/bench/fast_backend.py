"""A backend that answers every HTTP/1.1 request with a fixed 200, in a process of its own.

For measuring what Envoy adds: the in-process aiohttp echo backends share the load
generator's CPU and event loop, so at hundreds of requests per second their own queueing would
be most of the latency measured. This one is a bare ``asyncio.Protocol`` (no HTTP library),
reads each request's headers and ``content-length`` bytes of body, and answers ``{}``.
"""

from __future__ import annotations

import asyncio
import sys

from xds_lab.harness.ports import free_port

__all__ = ["FastBackend"]

_SERVER = r"""
import asyncio, sys

RESPONSE = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}"


class Answer(asyncio.Protocol):
    def connection_made(self, transport):
        self.transport, self.buffer, self.need = transport, b"", None

    def data_received(self, data):
        self.buffer += data
        while True:
            if self.need is None:
                end = self.buffer.find(b"\r\n\r\n")
                if end < 0:
                    return
                length = 0
                for line in self.buffer[:end].split(b"\r\n")[1:]:
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value)
                self.buffer, self.need = self.buffer[end + 4:], length
            if len(self.buffer) < self.need:
                return
            self.buffer, self.need = self.buffer[self.need:], None
            self.transport.write(RESPONSE)


async def main(port):
    server = await asyncio.get_running_loop().create_server(Answer, "127.0.0.1", port)
    print("ready", flush=True)
    await server.serve_forever()


asyncio.run(main(int(sys.argv[1])))
"""


class FastBackend:
    """One such backend (the harness's ``Backends``): ``start`` returns once it listens."""

    def __init__(self) -> None:
        self.port = free_port()
        self._process: asyncio.subprocess.Process | None = None

    @property
    def addresses(self) -> dict[str, str]:
        """Name -> ``IP:PORT`` (one backend, named by its address)."""
        address = f"127.0.0.1:{self.port}"
        return {address: address}

    async def start(self) -> None:
        """Start the process and wait for it to listen."""
        self._process = await asyncio.create_subprocess_exec(
            sys.executable, "-c", _SERVER, str(self.port), stdout=asyncio.subprocess.PIPE
        )
        assert self._process.stdout is not None
        line = await asyncio.wait_for(self._process.stdout.readline(), timeout=10)
        if line.strip() != b"ready":
            raise RuntimeError(f"fast backend did not start: {line!r}")

    async def stop(self) -> None:
        """Stop the process."""
        if self._process is not None and self._process.returncode is None:
            self._process.terminate()
            await self._process.wait()
        self._process = None
