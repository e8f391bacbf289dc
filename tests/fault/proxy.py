"""A TCP proxy the test controls: it forwards to a target port until ``cut``, which closes
every connection and refuses new ones (the port stops listening), until ``restore``. The
target can be moved (``retarget``) to put a restarted process behind the same address."""

from __future__ import annotations

import asyncio
import contextlib
import time


class CuttableProxy:
    """Loopback ``port`` -> loopback ``target``; ``port`` is known once started."""

    def __init__(self, *, target: int) -> None:
        self.port = 0
        """Chosen by the OS at the first ``start`` (a port picked ahead could be taken by a
        process that binds first); kept across ``cut`` and ``restore``."""
        self.target = target
        self.connections = 0
        """Connections accepted so far (a reconnect shows as one more)."""
        self.accepted_at: list[float] = []
        """When each was accepted (monotonic seconds)."""
        self._server: asyncio.Server | None = None
        self._pipes: set[asyncio.Task[None]] = set()
        self._writers: set[asyncio.StreamWriter] = set()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> None:
        self._server = await asyncio.start_server(
            self._accept, "127.0.0.1", self.port, reuse_address=True
        )
        self.port = self._server.sockets[0].getsockname()[1]

    def retarget(self, target: int) -> None:
        """New connections go to ``target``; open ones stay where they are."""
        self.target = target

    async def cut(self) -> None:
        """Refuse new connections and close the open ones (both directions)."""
        server, self._server = self._server, None
        if server is not None:
            server.close()
        for writer in list(self._writers):
            writer.transport.abort()
        for task in list(self._pipes):
            task.cancel()
        await asyncio.gather(*self._pipes, return_exceptions=True)
        if server is not None:
            await server.wait_closed()

    async def restore(self) -> None:
        """Listen again on the same port."""
        await self.start()

    async def close(self) -> None:
        await self.cut()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.accepted_at.append(time.monotonic())
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target)
        except OSError:
            writer.transport.abort()
            return
        self._writers |= {writer, up_writer}
        pipes = [
            asyncio.create_task(_pipe(reader, up_writer), name="proxy-up"),
            asyncio.create_task(_pipe(up_reader, writer), name="proxy-down"),
        ]
        self._pipes.update(pipes)
        try:
            await asyncio.gather(*pipes, return_exceptions=True)
        finally:
            self._pipes.difference_update(pipes)
            for w in (writer, up_writer):
                self._writers.discard(w)
                w.transport.abort()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(ConnectionError, OSError):
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    # One side ended: end the other, so the peer sees the connection go as it would for real.
    writer.transport.abort()
