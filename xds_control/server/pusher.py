"""Pushes snapshot changes down one stream: the part of a stream that acts without a request.

The stream's handler reads requests and answers them itself; this task only wakes when the
group's snapshot changed. Why not one queue that both feed, as before: every ACK then cost a
queue item and a switch to the writer task, on each of a thousand streams per change.
Wake-ups coalesce (one pending at a time), so a slow stream gets only the newest version.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

import grpc
import structlog

from xds_control.server.session import XdsStream
from xds_control.tasks import guarded_task

__all__ = ["Pusher"]

log = structlog.get_logger(__name__)


class Pusher:
    """One stream's push task. ``lock`` is held around each state change and its writes, by
    this task and by the handler alike, so that responses go out in the order they were made."""

    def __init__(
        self,
        *,
        stream: XdsStream,
        lock: asyncio.Lock,
        context: grpc.aio.ServicerContext[Any, Any],
    ) -> None:
        self._stream = stream
        self._lock = lock
        self._context = context
        self._woken: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._task = guarded_task(self._run(), name=f"ads-push-{stream.stream_id}")

    def wake(self) -> None:
        """The snapshot changed (the cache calls this, once per change and stream)."""
        if not self._woken.done():
            self._woken.set_result(None)

    def stop(self) -> None:
        """The stream ended."""
        self._task.cancel()

    async def _run(self) -> None:
        try:
            await self._push_forever()
        except (grpc.aio.AbortError, grpc.aio.UsageError, grpc.RpcError) as exc:
            # The stream ended while a push was on its way: the handler sees the end too.
            log.debug("push ended with the stream", stream=self._stream.stream_id, error=str(exc))
        except Exception as exc:  # a bug: end the stream (the Envoy reconnects), say why
            log.error(
                "pushing a snapshot change failed", stream=self._stream.stream_id, exc_info=exc
            )
            reason = f"pushing a snapshot change failed: {type(exc).__name__}"
            with contextlib.suppress(grpc.aio.AbortError):  # how abort ends: status sent
                await self._context.abort(grpc.StatusCode.INTERNAL, reason)

    async def _push_forever(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await self._woken
            self._woken = loop.create_future()
            async with self._lock:
                for response in self._stream.on_snapshot(now=time.time()):
                    await self._context.write(response)
