"""The picker as Envoy's ``ext_proc`` gRPC service, and the server that hosts it.

Thin on purpose: read the pool from the stream's metadata and the body from each message, ask
``Picker``, answer in the Gateway API Inference Extension's terms (the ``x-gateway-destination-
endpoint`` header and the same value under dynamic metadata ``envoy.lb``, ``IP:PORT`` best
first, comma-separated). Nothing here raises into gRPC: a message the picker cannot use is
answered with no mutation, and the pool's fallback policy decides.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Hashable, Sequence
from typing import Any

import grpc
import structlog
from envoy.config.core.v3 import base_pb2
from envoy.service.ext_proc.v3 import external_processor_pb2 as ext
from google.protobuf import struct_pb2

from xds_control.picker.metrics import PICK_SECONDS, PICKS
from xds_control.picker.picker import Picker
from xds_control.xds.picker import DESTINATION_HEADER, POOL_METADATA

__all__ = ["PROCESS_METHOD", "PickerServer", "answer"]

log = structlog.get_logger(__name__)

PROCESS_METHOD = "/envoy.service.ext_proc.v3.ExternalProcessor/Process"
_METADATA_NAMESPACE = "envoy.lb"


def _picked(addresses: Sequence[str]) -> ext.ProcessingResponse:
    value = ",".join(addresses)
    common = ext.CommonResponse()
    common.header_mutation.set_headers.append(
        base_pb2.HeaderValueOption(
            header=base_pb2.HeaderValue(key=DESTINATION_HEADER, raw_value=value.encode()),
            append_action=base_pb2.HeaderValueOption.OVERWRITE_IF_EXISTS_OR_ADD,
        )
    )
    metadata = struct_pb2.Struct()
    metadata.fields[_METADATA_NAMESPACE].struct_value.fields[
        DESTINATION_HEADER
    ].string_value = value
    return ext.ProcessingResponse(
        request_body=ext.BodyResponse(response=common), dynamic_metadata=metadata
    )


def _pass(request: ext.ProcessingRequest) -> ext.ProcessingResponse:
    """The empty answer to whatever ``request`` is: carry on unchanged."""
    kind = request.WhichOneof("request")
    if kind in ("request_headers", "response_headers"):
        return ext.ProcessingResponse(**{kind: ext.HeadersResponse()})
    if kind in ("request_body", "response_body"):
        return ext.ProcessingResponse(**{kind: ext.BodyResponse()})
    if kind in ("request_trailers", "response_trailers"):
        return ext.ProcessingResponse(**{kind: ext.TrailersResponse()})
    return ext.ProcessingResponse()


def answer(
    picker: Picker,
    *,
    pool: str,
    request: ext.ProcessingRequest,
    stream: Hashable | None = None,
) -> ext.ProcessingResponse:
    """The response to one ``ext_proc`` message for a request to ``pool``; ``stream`` names
    the HTTP request (one ``ext_proc`` stream each) so its end can be told to the picker."""
    if request.WhichOneof("request") != "request_body" or not pool:
        return _pass(request)
    try:
        with PICK_SECONDS.time():
            chosen = picker.pick(pool=pool, body=request.request_body.body, request=stream)
    except Exception:  # never into gRPC: a failed pick is a request without a pick
        log.exception("pick failed", pool=pool)
        PICKS.labels(pool=pool, outcome="error").inc()
        return _pass(request)
    return _picked(chosen) if chosen else _pass(request)


class PickerServer:
    """A grpc.aio server with the ``ext_proc`` service on each of ``addresses``."""

    def __init__(self, *, picker: Picker, addresses: Sequence[str]) -> None:
        self.picker = picker
        self.addresses = tuple(addresses)
        self.ports: list[int] = []
        self._server = grpc.aio.server()
        service, _, method = PROCESS_METHOD.strip("/").partition("/")
        handler = grpc.stream_stream_rpc_method_handler(
            self._process,
            request_deserializer=ext.ProcessingRequest.FromString,
            response_serializer=ext.ProcessingResponse.SerializeToString,
        )
        self._server.add_generic_rpc_handlers(
            [grpc.method_handlers_generic_handler(service, {method: handler})]
        )
        self.ports = [self._server.add_insecure_port(a) for a in self.addresses]

    async def _process(
        self,
        requests: AsyncIterator[ext.ProcessingRequest],
        context: grpc.aio.ServicerContext[Any, Any],
    ) -> AsyncIterator[ext.ProcessingResponse]:
        metadata = dict(context.invocation_metadata() or ())
        pool = str(metadata.get(POOL_METADATA, ""))
        stream = object()
        started = time.monotonic()
        try:
            async for request in requests:
                yield answer(self.picker, pool=pool, request=request, stream=stream)
        finally:
            # Envoy closes the stream when the HTTP request ends (checked with Envoy 1.40):
            # the request no longer queues on its server.
            if pool:
                self.picker.end(pool=pool, request=stream)
            log.debug(
                "picker stream closed", pool=pool, seconds=round(time.monotonic() - started, 4)
            )

    async def start(self) -> None:
        """Start serving."""
        await self._server.start()
        log.info("picker serving", addresses=self.addresses)

    async def stop(self, *, grace: float = 1.0) -> None:
        """Stop; streams open after ``grace`` seconds are cancelled (Envoy then fails open)."""
        await self._server.stop(grace)
