"""The gRPC face of ADS, both variants (state of the world and incremental): one task reads
requests, one loop writes responses, per stream."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator
from enum import Enum
from typing import Any, Generic, Protocol, TypeVar

import grpc
import structlog
from envoy.config.core.v3 import base_pb2
from envoy.service.discovery.v3 import discovery_pb2

from xds_control.cache import SnapshotCache
from xds_control.server.delta import DeltaStream
from xds_control.server.peer import NodeCheck
from xds_control.server.registry import StreamRegistry
from xds_control.server.session import XdsStream
from xds_control.server.stream import AdsStream
from xds_control.tasks import guarded_task
from xds_control.xds import type_urls

__all__ = ["AdsHandler"]

log = structlog.get_logger(__name__)

R = TypeVar("R", discovery_pb2.DiscoveryRequest, discovery_pb2.DeltaDiscoveryRequest)
R_contra = TypeVar(
    "R_contra",
    discovery_pb2.DiscoveryRequest,
    discovery_pb2.DeltaDiscoveryRequest,
    contravariant=True,
)


class _OnRequest(Protocol[R_contra]):
    def __call__(self, request: R_contra, *, group: str) -> list[bytes]: ...


class _Signal(Enum):
    WAKE = "wake"  # the group's snapshot changed
    CLOSED = "closed"  # the request stream ended, or reading it failed


MAX_QUEUED_REQUESTS = 64
"""Requests read ahead of the writer loop. Beyond that the reader waits, gRPC stops granting the
client HTTP/2 window, and the client's sends block: a client that keeps sending while it never
reads responses (so the writer is stuck in flow control) holds bounded memory here."""


class _Inbox(Generic[R]):
    """What the writer loop acts on, in order: requests (at most ``MAX_QUEUED_REQUESTS``
    waiting), snapshot changes (coalesced: one pending wake-up at a time), and the end of the
    request stream."""

    def __init__(self) -> None:
        self._queue: asyncio.Queue[R | _Signal] = asyncio.Queue()
        self._room = asyncio.Semaphore(MAX_QUEUED_REQUESTS)
        self._wake_pending = False

    async def put(self, request: R) -> None:
        await self._room.acquire()
        self._queue.put_nowait(request)

    def wake(self) -> None:
        if not self._wake_pending:
            self._wake_pending = True
            self._queue.put_nowait(_Signal.WAKE)

    def close(self) -> None:
        self._queue.put_nowait(_Signal.CLOSED)

    async def get(self) -> R | _Signal:
        item = await self._queue.get()
        if item is _Signal.WAKE:
            self._wake_pending = False
        elif item is not _Signal.CLOSED:
            self._room.release()
        return item


async def _read(requests: AsyncIterator[R], inbox: _Inbox[R]) -> None:
    try:
        async for request in requests:
            await inbox.put(request)
    except grpc.aio.AioRpcError:
        pass  # the peer went away: an ordinary end of the stream
    finally:
        inbox.close()  # always, so that the writer loop never waits for a dead reader


async def _end_of_requests(
    reader: asyncio.Task[None], context: grpc.aio.ServicerContext[Any, Any]
) -> None:
    # The reader has put CLOSED, so it is done or about to be. If it crashed, guarded_task has
    # logged why; the Envoy gets a status that says the stream failed, not an OK end.
    try:
        await reader
    except Exception as exc:  # any crash of the reader ends the stream the same way
        await context.abort(
            grpc.StatusCode.INTERNAL, f"reading the request stream failed: {type(exc).__name__}"
        )


class AdsHandler:
    """Serves ``StreamAggregatedResources`` and ``DeltaAggregatedResources``; responses are
    prepared bytes (identity serializer)."""

    def __init__(
        self, *, cache: SnapshotCache, registry: StreamRegistry, node_check: NodeCheck | None = None
    ) -> None:
        self._cache = cache
        self._registry = registry
        self._node_check = node_check
        self._ids = itertools.count(1)

    def generic_handler(self) -> grpc.GenericRpcHandler[Any, Any]:
        """The handler to add to a grpc.aio server."""
        service, _, method = type_urls.ADS_METHOD.strip("/").partition("/")
        delta_method = type_urls.DELTA_ADS_METHOD.rpartition("/")[2]
        handlers = {
            method: grpc.stream_stream_rpc_method_handler(
                self._stream,
                request_deserializer=discovery_pb2.DiscoveryRequest.FromString,
                response_serializer=None,  # responses are already serialised bytes
            ),
            delta_method: grpc.stream_stream_rpc_method_handler(
                self._delta_stream,
                request_deserializer=discovery_pb2.DeltaDiscoveryRequest.FromString,
                response_serializer=None,
            ),
        }
        return grpc.method_handlers_generic_handler(service, handlers)

    async def _group(self, node: base_pb2.Node, context: grpc.aio.ServicerContext[Any, Any]) -> str:
        refused = self._node_check(node, context) if self._node_check is not None else None
        if refused is not None:
            log.warning("node refused", node_id=node.id, reason=refused)
            await context.abort(grpc.StatusCode.PERMISSION_DENIED, refused)
        # The cache has logged the refusal; the Envoy's log shows this message.
        group = self._cache.group_of(node)
        if group is None:
            await context.abort(
                grpc.StatusCode.PERMISSION_DENIED,
                f"node {node.id!r} (cluster {node.cluster!r}) matches no node group, "
                "and this control plane refuses unknown nodes (unknown_nodes: refuse)",
            )
        return group

    async def _stream(
        self,
        requests: AsyncIterator[discovery_pb2.DiscoveryRequest],
        context: grpc.aio.ServicerContext[Any, Any],
    ) -> None:
        stream = AdsStream(
            stream_id=next(self._ids),
            snapshot_of=self._cache.snapshot,
            on_ack=self._registry.notify_ack,
        )
        await self._serve(stream, stream.on_request, requests, context)

    async def _delta_stream(
        self,
        requests: AsyncIterator[discovery_pb2.DeltaDiscoveryRequest],
        context: grpc.aio.ServicerContext[Any, Any],
    ) -> None:
        stream = DeltaStream(
            stream_id=next(self._ids),
            snapshot_of=self._cache.snapshot,
            on_ack=self._registry.notify_ack,
        )
        await self._serve(stream, stream.on_request, requests, context)

    async def _serve(
        self,
        stream: XdsStream,
        on_request: _OnRequest[R],
        requests: AsyncIterator[R],
        context: grpc.aio.ServicerContext[Any, Any],
    ) -> None:
        inbox: _Inbox[R] = _Inbox()
        reader = guarded_task(_read(requests, inbox), name=f"ads-reader-{stream.stream_id}")
        unsubscribe = None
        self._registry.add(stream, peer=context.peer() or "")
        try:
            while (item := await inbox.get()) is not _Signal.CLOSED:
                if item is _Signal.WAKE:
                    out = stream.on_snapshot()
                else:
                    if stream.node is None and not item.node.id:
                        await context.abort(
                            grpc.StatusCode.INVALID_ARGUMENT,
                            "the first DiscoveryRequest must carry a node with an id",
                        )
                    group = (
                        stream.group
                        if stream.node is not None
                        else await self._group(item.node, context)
                    )
                    out = on_request(item, group=group)
                    if unsubscribe is None:
                        unsubscribe = self._cache.subscribe(stream.group, inbox.wake)
                        log.info("envoy connected", stream=stream.stream_id, node_id=item.node.id)
                for response in out:
                    await context.write(response)
            await _end_of_requests(reader, context)
        finally:
            if unsubscribe is not None:
                unsubscribe()
            self._registry.remove(stream)
            reader.cancel()
            node_id = stream.node.id if stream.node is not None else ""
            log.info("envoy disconnected", stream=stream.stream_id, node_id=node_id)
