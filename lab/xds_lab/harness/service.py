"""A Kubernetes Service on loopback: one port in front of several replicas, each new connection
to the next replica in turn, a replica that refuses skipped (as kube-proxy stops sending to a
pod whose endpoint is gone).

What it stands in for is connection-level balancing only: bytes are copied both ways
untouched, so gRPC streams (xDS, the picker's ext_proc) pass through as they would through a
ClusterIP.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import Sequence

from xds_lab.harness.ports import free_port

__all__ = ["ServiceProxy"]


class ServiceProxy:
    """``127.0.0.1:port`` -> ``backends`` (``IP:PORT``), round robin per connection."""

    def __init__(self, backends: Sequence[str]) -> None:
        self.backends = tuple(backends)
        self.port = free_port()
        self._turn = itertools.cycle(range(len(self.backends)))
        self._server: asyncio.Server | None = None
        self._pipes: set[asyncio.Task[None]] = set()
        self.connections: list[str] = []
        """The backend each accepted connection went to, in order."""

    @property
    def address(self) -> str:
        """``127.0.0.1:<port>``: what clients dial."""
        return f"127.0.0.1:{self.port}"

    async def start(self) -> None:
        """Listen."""
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", self.port)

    async def stop(self) -> None:
        """Stop listening and cut every connection."""
        if self._server is not None:
            self._server.close()
        for task in list(self._pipes):
            task.cancel()
        await asyncio.gather(*self._pipes, return_exceptions=True)
        if self._server is not None:
            with contextlib.suppress(Exception):
                await self._server.wait_closed()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._pipes.add(task)
        try:
            upstream = await self._connect()
            if upstream is None:
                return
            up_reader, up_writer = upstream
            await asyncio.gather(
                _copy(reader, up_writer), _copy(up_reader, writer), return_exceptions=True
            )
        finally:
            writer.close()
            self._pipes.discard(task)

    async def _connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
        for _ in self.backends:
            backend = self.backends[next(self._turn)]
            host, _, port = backend.rpartition(":")
            try:
                upstream = await asyncio.open_connection(host, int(port))
            except OSError:
                continue  # that replica is gone: the next one
            self.connections.append(backend)
            return upstream
        return None


async def _copy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65_536):
            writer.write(data)
            await writer.drain()
    finally:
        writer.close()
