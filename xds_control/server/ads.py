"""The gRPC face of ADS, both variants (state of the world and incremental): one task reads
requests, one loop writes responses, per stream."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Callable
from enum import Enum
from typing import Any, Generic, Protocol, TypeVar

import grpc
import structlog
from envoy.config.core.v3 import base_pb2
from envoy.service.discovery.v3 import discovery_pb2
from google.protobuf.message import DecodeError

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
        self.invalid: str | None = None
        """Why the request stream ended early: bytes that are not a request of its kind."""

    async def put(self, request: R) -> None:
        await self._room.acquire()
        self._queue.put_nowait(request)

    def wake(self) -> None:
        if not self._wake_pending:
            self._wake_pending = True
            self._queue.put_nowait(_Signal.WAKE)

    def close(self, *, invalid: str | None = None) -> None:
        self.invalid = invalid
        self._queue.put_nowait(_Signal.CLOSED)

    async def get(self) -> R | _Signal:
        item = await self._queue.get()
        if item is _Signal.WAKE:
            self._wake_pending = False
        elif item is not _Signal.CLOSED:
            self._room.release()
        return item


async def _read(
    requests: AsyncIterator[bytes], parse: Callable[[bytes], R], inbox: _Inbox[R]
) -> None:
    # Requests arrive as bytes and are parsed here, so that garbage is the client's error
    # (INVALID_ARGUMENT), not a crash of the reader. After garbage, what follows is read and
    # dropped while the writer refuses the stream (see REFUSAL_DRAIN_S).
    closed = False
    try:
        async for data in requests:
            if closed:
                continue
            try:
                request = parse(data)
            except DecodeError as exc:
                inbox.close(invalid=f"not a {_kind(parse)}: {exc}")
                closed = True
                continue
            await inbox.put(request)
    except (grpc.aio.AioRpcError, grpc.aio.AbortError):
        pass  # the peer went away, or the writer refused the stream: an ordinary end
    finally:
        if not closed:
            inbox.close()  # always, so that the writer loop never waits for a dead reader


def _kind(parse: Callable[[bytes], Any]) -> str:
    return getattr(parse, "__self__", type(None)).__name__


REFUSAL_DRAIN_S = 0.05
"""Before a refusal, how long the reader may go on taking what the client has already sent
(and is dropped): aborting with requests still arriving, the client often sees INTERNAL
("Internal error from Core") instead of the refusal's status and reason."""


class _Refused(Exception):
    """The stream is refused: the client's doing, not a fault here."""

    def __init__(
        self,
        code: grpc.StatusCode,
        reason: str,
        *,
        node_id: str = "",
        event: str = "stream refused",
    ) -> None:
        super().__init__(reason)
        self.code, self.reason, self.node_id, self.event = code, reason, node_id, event


async def _refuse(
    refused: _Refused, reader: asyncio.Task[None], context: grpc.aio.ServicerContext[Any, Any]
) -> None:
    # One warning line, no traceback: a client sending garbage must not flood the log.
    await asyncio.wait([reader], timeout=REFUSAL_DRAIN_S)
    reader.cancel()
    await asyncio.wait([reader])
    log.warning(
        refused.event,
        peer=context.peer(),
        node_id=refused.node_id,
        code=refused.code.name,
        reason=refused.reason,
    )
    await context.abort(refused.code, refused.reason)


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
                request_deserializer=None,  # bytes: _read parses them
                response_serializer=None,  # responses are already serialised bytes
            ),
            delta_method: grpc.stream_stream_rpc_method_handler(
                self._delta_stream, request_deserializer=None, response_serializer=None
            ),
        }
        return grpc.method_handlers_generic_handler(service, handlers)

    async def _group(self, node: base_pb2.Node, context: grpc.aio.ServicerContext[Any, Any]) -> str:
        refused = self._node_check(node, context) if self._node_check is not None else None
        if refused is not None:
            raise _Refused(
                grpc.StatusCode.PERMISSION_DENIED, refused, node_id=node.id, event="node refused"
            )
        group = self._cache.group_of(node)  # a refusal: the cache logs it, naming the node
        if group is None:
            raise _Refused(
                grpc.StatusCode.PERMISSION_DENIED,
                f"node {node.id!r} (cluster {node.cluster!r}) matches no node group, "
                "and this control plane refuses unknown nodes (unknown_nodes: refuse)",
                node_id=node.id,
                event="node refused",
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
            events=self._registry,
        )
        parse = discovery_pb2.DiscoveryRequest.FromString
        await self._serve(stream, stream.on_request, parse, requests, context)

    async def _delta_stream(
        self,
        requests: AsyncIterator[discovery_pb2.DeltaDiscoveryRequest],
        context: grpc.aio.ServicerContext[Any, Any],
    ) -> None:
        stream = DeltaStream(
            stream_id=next(self._ids),
            snapshot_of=self._cache.snapshot,
            events=self._registry,
        )
        parse = discovery_pb2.DeltaDiscoveryRequest.FromString
        await self._serve(stream, stream.on_request, parse, requests, context)

    async def _serve(
        self,
        stream: XdsStream,
        on_request: _OnRequest[R],
        parse: Callable[[bytes], R],
        requests: AsyncIterator[bytes],
        context: grpc.aio.ServicerContext[Any, Any],
    ) -> None:
        inbox: _Inbox[R] = _Inbox()
        reader = guarded_task(_read(requests, parse, inbox), name=f"ads-reader-{stream.stream_id}")
        unsubscribe = None
        self._registry.add(stream, peer=context.peer() or "")
        try:
            while (item := await inbox.get()) is not _Signal.CLOSED:
                if item is _Signal.WAKE:
                    out = stream.on_snapshot()
                else:
                    if stream.node is None and not item.node.id:
                        raise _Refused(
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
            if inbox.invalid is not None:
                node_id = stream.node.id if stream.node is not None else ""
                raise _Refused(grpc.StatusCode.INVALID_ARGUMENT, inbox.invalid, node_id=node_id)
            await _end_of_requests(reader, context)
        except _Refused as refused:
            await _refuse(refused, reader, context)
        finally:
            if unsubscribe is not None:
                unsubscribe()
            self._registry.remove(stream)
            reader.cancel()
            node_id = stream.node.id if stream.node is not None else ""
            log.info("envoy disconnected", stream=stream.stream_id, node_id=node_id)
