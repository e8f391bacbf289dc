"""The gRPC face of ADS, both variants (state of the world and incremental): per stream, the
handler reads each request and writes its answers; a ``Pusher`` task writes what a snapshot
change brings."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections.abc import AsyncIterator, Callable
from typing import Any, Protocol, TypeVar

import grpc
import structlog
from envoy.config.core.v3 import base_pb2
from envoy.service.discovery.v3 import discovery_pb2
from google.protobuf.message import DecodeError

from xds_control.cache.protocol import SnapshotCache
from xds_control.server.delta import DeltaStream
from xds_control.server.peer import NodeCheck
from xds_control.server.pusher import Pusher
from xds_control.server.registry import StreamRegistry
from xds_control.server.session import XdsStream
from xds_control.server.stream import AdsStream
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
    def __call__(self, request: R_contra, *, group: str, now: float) -> list[bytes]: ...


_EOF: object = grpc.aio.EOF  # type: ignore[attr-defined]  # what read() gives after the last request


def _kind(parse: Callable[[bytes], Any]) -> str:
    return getattr(parse, "__self__", type(None)).__name__


REFUSAL_DRAIN_S = 0.05
"""Before a refusal, how long the handler goes on reading what the client has already sent
(and drops it): aborting with requests still arriving, the client often sees INTERNAL
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


async def _refuse(refused: _Refused, context: grpc.aio.ServicerContext[Any, Any]) -> None:
    # One warning line, no traceback: a client sending garbage must not flood the log.
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(_drain(context), REFUSAL_DRAIN_S)
    log.warning(
        refused.event,
        peer=context.peer(),
        node_id=refused.node_id,
        code=refused.code.name,
        reason=refused.reason,
    )
    await context.abort(refused.code, refused.reason)


async def _drain(context: grpc.aio.ServicerContext[Any, Any]) -> None:
    try:
        while await context.read() is not _EOF:
            pass
    except (grpc.aio.AioRpcError, grpc.aio.AbortError):
        pass


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
                request_deserializer=None,  # bytes: _parse parses them
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
        _requests: AsyncIterator[bytes],  # unused: ``_serve`` reads with ``context.read()``
        context: grpc.aio.ServicerContext[Any, Any],
    ) -> None:
        stream = AdsStream(
            stream_id=next(self._ids),
            snapshot_of=self._cache.snapshot,
            changed_names=self._cache.changed_names,
            events=self._registry,
        )
        parse = discovery_pb2.DiscoveryRequest.FromString
        await self._serve(stream, stream.on_request, parse, context)

    async def _delta_stream(
        self,
        _requests: AsyncIterator[bytes],  # unused, as above
        context: grpc.aio.ServicerContext[Any, Any],
    ) -> None:
        stream = DeltaStream(
            stream_id=next(self._ids),
            snapshot_of=self._cache.snapshot,
            changed_names=self._cache.changed_names,
            events=self._registry,
        )
        parse = discovery_pb2.DeltaDiscoveryRequest.FromString
        await self._serve(stream, stream.on_request, parse, context)

    async def _serve(
        self,
        stream: XdsStream,
        on_request: _OnRequest[R],
        parse: Callable[[bytes], R],
        context: grpc.aio.ServicerContext[Any, Any],
    ) -> None:
        lock = asyncio.Lock()
        pusher: Pusher | None = None
        unsubscribe = None
        self._registry.add(stream, peer=context.peer() or "")
        try:
            while (data := await _next(context)) is not None:
                request = _parse(parse, data, stream)
                if stream.node is None and not request.node.id:
                    raise _Refused(
                        grpc.StatusCode.INVALID_ARGUMENT,
                        "the first DiscoveryRequest must carry a node with an id",
                    )
                group = (
                    stream.group
                    if stream.node is not None
                    else await self._group(request.node, context)
                )
                async with lock:
                    out = on_request(request, group=group, now=time.time())
                    if pusher is None:
                        pusher = Pusher(stream=stream, lock=lock, context=context)
                        unsubscribe = self._cache.subscribe(stream.group, pusher.wake)
                        log.info(
                            "envoy connected", stream=stream.stream_id, node_id=request.node.id
                        )
                    for response in out:
                        await context.write(response)
        except _Refused as refused:
            await _refuse(refused, context)
        finally:
            if unsubscribe is not None:
                unsubscribe()
            if pusher is not None:
                pusher.stop()
            self._registry.remove(stream)
            node_id = stream.node.id if stream.node is not None else ""
            log.info("envoy disconnected", stream=stream.stream_id, node_id=node_id)


async def _next(context: grpc.aio.ServicerContext[Any, Any]) -> bytes | None:
    """The next request's bytes; ``None`` once the Envoy is done sending or gone."""
    try:
        data = await context.read()
    except (grpc.aio.AioRpcError, grpc.aio.AbortError):
        return None  # the peer went away: an ordinary end
    return None if data is _EOF else data


def _parse(parse: Callable[[bytes], R], data: bytes, stream: XdsStream) -> R:
    # Requests arrive as bytes and are parsed here, so that garbage is the client's error
    # (INVALID_ARGUMENT), not a crash; what it sends after is read and dropped while the stream
    # is refused (see REFUSAL_DRAIN_S).
    try:
        return parse(data)
    except DecodeError as exc:
        node_id = stream.node.id if stream.node is not None else ""
        raise _Refused(
            grpc.StatusCode.INVALID_ARGUMENT, f"not a {_kind(parse)}: {exc}", node_id=node_id
        ) from None
