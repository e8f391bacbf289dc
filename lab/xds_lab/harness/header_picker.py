"""The Inference Extension conformance suite's test endpoint picker: it names the endpoints a
request lists in its ``test-epp-endpoint-selection`` header, so a test can tell whether the
gateway sends each request where the picker said. Lab only, never the product: there a client
must not choose its server.

On the response path it answers as the suite's picker does: the endpoint the gateway reported
as served (``envoy.lb`` metadata) goes back in the ``x-conformance-test-served-endpoint``
response header, so a test sees what the picker was told.

It answers the protocol's FULL_DUPLEX_STREAMED body mode as the product's picker does
(``xds_control.picker.messages.whole_body_answers``): the headers' answer is held until the body
has arrived, and the body is given back in one piece."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

import grpc
import yaml
from envoy.config.core.v3 import base_pb2
from envoy.service.ext_proc.v3 import external_processor_pb2 as ext

from xds_control.config import Pool, parse_config
from xds_control.picker.messages import whole_body_answers
from xds_control.picker.server import add_ext_proc
from xds_control.xds.picker import DESTINATION_METADATA_NAMESPACE, SERVED_KEY

__all__ = ["SELECTION_HEADER", "SERVED_RESULT_HEADER", "HeaderPicker"]

SELECTION_HEADER = "test-epp-endpoint-selection"
SERVED_RESULT_HEADER = "x-conformance-test-served-endpoint"


def _served_result(message: ext.ProcessingRequest) -> ext.ProcessingResponse:
    lb = message.metadata_context.filter_metadata.get(DESTINATION_METADATA_NAMESPACE)
    served = lb.fields[SERVED_KEY].string_value if lb and SERVED_KEY in lb.fields else ""
    headers = ext.HeadersResponse()
    headers.response.header_mutation.set_headers.append(
        base_pb2.HeaderValueOption(
            header=base_pb2.HeaderValue(key=SERVED_RESULT_HEADER, raw_value=served.encode())
        )
    )
    return ext.ProcessingResponse(response_headers=headers)


def _listed(headers: ext.HttpHeaders) -> list[str]:
    for header in headers.headers.headers:
        if header.key == SELECTION_HEADER:
            raw = header.raw_value.decode() or header.value
            return [a.strip() for a in raw.split(",") if a.strip()]
    return []


def _answers(message: ext.ProcessingRequest, state: dict[str, Any]) -> list[ext.ProcessingResponse]:
    kind = message.WhichOneof("request")
    if kind == "request_headers":
        state["listed"], state["body"] = _listed(message.request_headers), []
        if not message.request_headers.end_of_stream:
            return []
    elif kind == "request_body":
        state["body"].append(message.request_body.body)
        if not message.request_body.end_of_stream:
            return []
    elif kind == "response_headers":
        return [_served_result(message)]
    elif kind != "request_trailers":
        return [ext.ProcessingResponse()]
    return whole_body_answers(state["listed"], body=b"".join(state["body"]), ended_by=kind)


class HeaderPicker:
    """The test picker's grpc.aio server on ``address``."""

    def __init__(self, *, address: str) -> None:
        self.address = address
        self._server = grpc.aio.server()
        add_ext_proc(self._server, self._process)
        self._server.add_insecure_port(address)

    async def _process(
        self,
        requests: AsyncIterator[ext.ProcessingRequest],
        context: grpc.aio.ServicerContext[Any, Any],
    ) -> AsyncIterator[ext.ProcessingResponse]:
        state: dict[str, Any] = {"listed": [], "body": []}
        async for message in requests:
            for answer in _answers(message, state):
                yield answer

    def pool(self, endpoints: Sequence[str], *, name: str = "primary") -> Pool:
        """The pool a gateway serves ``endpoints`` of through this picker (waiting a second
        for its answers, as the suite's gateways do), as config would make it."""
        data = {
            "pools": [
                {
                    "name": name,
                    "endpoints": [{"address": a} for a in endpoints],
                    "picker": {"address": self.address, "message_timeout_ms": 1000},
                }
            ],
            "listeners": [
                {
                    "name": "gw",
                    "address": "127.0.0.1:10000",
                    "routes": [{"name": "r", "pool": name}],
                }
            ],
        }
        return parse_config(text=yaml.safe_dump(data)).pools[0]

    async def start(self) -> None:
        """Start serving."""
        await self._server.start()

    async def stop(self) -> None:
        """Stop at once."""
        await self._server.stop(0)
