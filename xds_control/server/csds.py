"""Client Status Discovery Service (``envoy.service.status.v3``): what each connected Envoy
runs, per resource, in Envoy's own status protocol, so ``istioctl``-style tools and Envoy's
``config_dump``-minded operators read our view without learning our admin API.

Per node and resource (``GenericXdsConfig``): ``version_info`` is the version of the response
Envoy last ACKed for that type, or the one it reconnected holding (``TypeState.hold``);
``last_updated`` when; ``config_status`` compares what Envoy
runs with what we serve now: SYNCED (it ACKed the content we serve), STALE (it runs other
content, or what we sent is not answered yet), ERROR (it NACKed the last one: ``error_state``
has Envoy's words, the version it refused and when, ``last_update_attempt``), NOT_SENT (we
serve it, it asked, nothing went out yet). ``client_status`` is ACKED, NACKED or REQUESTED.
``xds_config`` is the content Envoy ACKed, unless the request sets
``exclude_resource_contents``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from typing import Any

import grpc
from envoy.admin.v3 import config_dump_shared_pb2 as dump
from envoy.service.status.v3 import csds_pb2
from envoy.type.matcher.v3 import node_pb2, string_pb2
from google.protobuf import any_pb2, timestamp_pb2
from google.protobuf.message import Message

from xds_control.cache.protocol import SnapshotCache
from xds_control.server.registry import StreamRegistry
from xds_control.server.session import TypeState, XdsStream
from xds_control.xds import PreparedResource, Snapshot
from xds_control.xds import type_urls as urls

__all__ = ["CSDS_SERVICE", "CsdsServicer", "client_config", "resource_status"]

CSDS_SERVICE = "envoy.service.status.v3.ClientStatusDiscoveryService"

_ORDER = (urls.CLUSTER, urls.ENDPOINT, urls.LISTENER, urls.ROUTE)

Status = tuple["csds_pb2.ConfigStatus.ValueType", "dump.ClientResourceStatus.ValueType"]


def resource_status(
    *, state: TypeState, name: str, served: PreparedResource[Message] | None
) -> Status:
    """Config status (ours against Envoy's) and client status (what Envoy said) of one
    resource on one stream."""
    acked = state.acked.get(name)
    if name in state.rejected:
        return csds_pb2.ERROR, dump.NACKED
    if acked is not None:
        synced = served is not None and acked.digest == served.digest
        return (csds_pb2.SYNCED if synced else csds_pb2.STALE), dump.ACKED
    if name in state.sent:
        return csds_pb2.STALE, dump.REQUESTED
    return csds_pb2.NOT_SENT, dump.REQUESTED


def _names(state: TypeState, served: Iterable[str]) -> list[str]:
    wanted = set(served) if state.wildcard else set(served) & state.names
    return sorted(wanted | state.acked.keys() | state.sent.keys() | state.rejected)


def _timestamp(seconds: float) -> timestamp_pb2.Timestamp:
    stamp = timestamp_pb2.Timestamp()
    stamp.FromNanoseconds(int(seconds * 1e9))
    return stamp


def _resource(
    state: TypeState, name: str, served: PreparedResource[Message] | None, *, contents: bool
) -> csds_pb2.ClientConfig.GenericXdsConfig:
    config_status, client_status = resource_status(state=state, name=name, served=served)
    out = csds_pb2.ClientConfig.GenericXdsConfig(
        type_url=state.type_url,
        name=name,
        version_info=state.acked_version,
        config_status=config_status,
        client_status=client_status,
    )
    acked = state.acked.get(name)
    if acked is not None:
        out.last_updated.CopyFrom(_timestamp(state.acked_at))
        if contents:
            out.xds_config.CopyFrom(
                any_pb2.Any(type_url=state.type_url, value=acked.message.SerializeToString())
            )
    if client_status == dump.NACKED:
        out.error_state.details = state.last_error or ""
        out.error_state.version_info = state.nacked_version or ""
        if state.nacked_at:
            out.error_state.last_update_attempt.CopyFrom(_timestamp(state.nacked_at))
    return out


def client_config(
    stream: XdsStream, snapshot: Snapshot | None, *, contents: bool = True
) -> csds_pb2.ClientConfig:
    """One Envoy's ``ClientConfig``: every resource of every type its stream asked for."""
    config = csds_pb2.ClientConfig()
    if stream.node is not None:
        config.node.CopyFrom(stream.node)
    for type_url in _ORDER:
        state = stream.types.get(type_url)
        if state is None:
            continue
        served = snapshot.resource_set(type_url).resources if snapshot is not None else {}
        for name in _names(state, served):
            config.generic_xds_configs.append(
                _resource(state, name, served.get(name), contents=contents)
            )
    return config


def _string_matches(matcher: string_pb2.StringMatcher, value: str) -> bool:
    kind = matcher.WhichOneof("match_pattern")
    pattern = getattr(matcher, kind) if kind in ("exact", "prefix", "suffix", "contains") else ""
    if matcher.ignore_case:
        pattern, value = pattern.lower(), value.lower()
    if kind == "exact":
        return value == pattern
    if kind == "prefix":
        return value.startswith(pattern)
    if kind == "suffix":
        return value.endswith(pattern)
    if kind == "contains":
        return pattern in value
    return kind is None  # no pattern: any node; a regex or custom matcher is not supported


def _node_matches(matchers: Iterable[node_pb2.NodeMatcher], stream: XdsStream) -> bool:
    node_id = stream.node.id if stream.node is not None else ""
    return all(_string_matches(m.node_id, node_id) for m in matchers if m.HasField("node_id"))


class CsdsServicer:
    """Answers from the stream registry and the snapshots being served; both RPCs."""

    def __init__(self, *, cache: SnapshotCache, registry: StreamRegistry) -> None:
        self._cache = cache
        self._registry = registry

    def generic_handler(self) -> grpc.GenericRpcHandler[Any, Any]:
        """The handler to add to a grpc.aio server."""
        request = csds_pb2.ClientStatusRequest.FromString
        response = csds_pb2.ClientStatusResponse.SerializeToString
        return grpc.method_handlers_generic_handler(
            CSDS_SERVICE,
            {
                "FetchClientStatus": grpc.unary_unary_rpc_method_handler(
                    self._fetch, request_deserializer=request, response_serializer=response
                ),
                "StreamClientStatus": grpc.stream_stream_rpc_method_handler(
                    self._stream, request_deserializer=request, response_serializer=response
                ),
            },
        )

    def status(self, request: csds_pb2.ClientStatusRequest) -> csds_pb2.ClientStatusResponse:
        """Every connected Envoy that ``request.node_matchers`` (node id only) selects."""
        response = csds_pb2.ClientStatusResponse()
        contents = not request.exclude_resource_contents
        for stream in self._registry.streams():
            if stream.node is None or not _node_matches(request.node_matchers, stream):
                continue
            snapshot = self._cache.snapshot(stream.group)
            response.config.append(client_config(stream, snapshot, contents=contents))
        return response

    async def _fetch(
        self,
        request: csds_pb2.ClientStatusRequest,
        context: grpc.aio.ServicerContext[Any, Any],
    ) -> csds_pb2.ClientStatusResponse:
        """One answer."""
        return self.status(request)

    async def _stream(
        self,
        request_iterator: AsyncIterator[csds_pb2.ClientStatusRequest],
        context: grpc.aio.ServicerContext[Any, Any],
    ) -> AsyncIterator[csds_pb2.ClientStatusResponse]:
        """One answer per request."""
        async for request in request_iterator:
            yield self.status(request)
