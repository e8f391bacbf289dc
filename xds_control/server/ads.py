"""The gRPC face of ADS: one task reads requests, one loop writes responses, per stream."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator
from typing import Any

import grpc
import structlog
from envoy.service.discovery.v3 import discovery_pb2

from xds_control.cache import SnapshotCache
from xds_control.server.registry import StreamRegistry
from xds_control.server.stream import AdsStream
from xds_control.xds import type_urls

__all__ = ["AdsHandler"]

log = structlog.get_logger(__name__)
_WAKE = object()
_CLOSED = object()


class AdsHandler:
    """Serves ``StreamAggregatedResources``; responses are prepared bytes (identity serializer)."""

    def __init__(self, *, cache: SnapshotCache, registry: StreamRegistry) -> None:
        self._cache = cache
        self._registry = registry
        self._ids = itertools.count(1)

    def generic_handler(self) -> grpc.GenericRpcHandler[Any, Any]:
        """The handler to add to a grpc.aio server."""
        service, _, method = type_urls.ADS_METHOD.strip("/").partition("/")
        handler = grpc.stream_stream_rpc_method_handler(
            self._stream,
            request_deserializer=discovery_pb2.DiscoveryRequest.FromString,
            response_serializer=None,  # responses are already serialised bytes
        )
        return grpc.method_handlers_generic_handler(service, {method: handler})

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
        inbox: asyncio.Queue[object] = asyncio.Queue()
        wake_pending = False

        def wake() -> None:
            nonlocal wake_pending
            if not wake_pending:
                wake_pending = True
                inbox.put_nowait(_WAKE)

        async def read() -> None:
            try:
                async for request in requests:
                    inbox.put_nowait(request)
            except (asyncio.CancelledError, grpc.aio.AioRpcError):
                pass
            finally:
                inbox.put_nowait(_CLOSED)

        reader = asyncio.create_task(read(), name=f"ads-reader-{stream.stream_id}")
        unsubscribe = None
        self._registry.add(stream)
        try:
            while True:
                item = await inbox.get()
                if item is _CLOSED:
                    break
                if item is _WAKE:
                    wake_pending = False
                    out = stream.on_snapshot()
                else:
                    assert isinstance(item, discovery_pb2.DiscoveryRequest)
                    if stream.node is None and not item.node.id:
                        await context.abort(
                            grpc.StatusCode.INVALID_ARGUMENT,
                            "the first DiscoveryRequest must carry a node with an id",
                        )
                    out = stream.on_request(item, group=self._cache.group_of(item.node))
                    if unsubscribe is None:
                        unsubscribe = self._cache.subscribe(stream.group, wake)
                        log.info("envoy connected", stream=stream.stream_id, node_id=item.node.id)
                for response in out:
                    await context.write(response)
        finally:
            if unsubscribe is not None:
                unsubscribe()
            self._registry.remove(stream)
            reader.cancel()
            node_id = stream.node.id if stream.node is not None else ""
            log.info("envoy disconnected", stream=stream.stream_id, node_id=node_id)
