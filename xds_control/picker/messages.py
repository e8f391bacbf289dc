"""The Endpoint Picker Protocol's messages, on Envoy's ``ext_proc``: builders and readers.

The answer names the servers in the Gateway API Inference Extension's way: the
``x-gateway-destination-endpoint`` header and the same value under dynamic metadata
``envoy.lb``, ``IP:PORT`` best first, comma-separated. A gateway may restrict the pick to a
subset (``envoy.lb.subset_hint``), and reports the endpoint that served on the response
headers' message (``x-gateway-destination-endpoint-served`` under ``envoy.lb``). Flow
control's answers are here too: the timeout that makes Envoy wait for a held body, the
refusal with its status and reason. For a pool with per-response load, the answer also asks
the server for its load (``endpoint-load-metrics-format: TEXT``), and the response headers'
answer removes the server's report (``endpoint-load-metrics``) before the client sees it.

Pure: protobuf messages in and out, no gRPC, no clock.
"""

from __future__ import annotations

from collections.abc import Sequence

from envoy.config.core.v3 import base_pb2
from envoy.extensions.filters.http.ext_proc.v3 import processing_mode_pb2
from envoy.service.ext_proc.v3 import external_processor_pb2 as ext
from envoy.type.v3 import http_status_pb2
from google.protobuf import struct_pb2

from xds_control.config.flow import HOLD_MARGIN_S
from xds_control.flow.refused import Refused
from xds_control.signals.load_report import FORMAT_HEADER, REPORT_HEADER
from xds_control.xds.picker import DESTINATION_HEADER, SERVED_KEY, usage_mode

__all__ = [
    "METADATA_NAMESPACE",
    "REASON_HEADER",
    "SUBSET_KEY",
    "SUBSET_NAMESPACE",
    "body_modes",
    "given_back",
    "header_values",
    "hold_timeout",
    "load_report",
    "no_endpoint",
    "passed",
    "picked",
    "refusal",
    "served",
    "stripped",
    "subset",
    "usage_asked",
    "whole_body_answers",
]

METADATA_NAMESPACE = "envoy.lb"
SUBSET_NAMESPACE = "envoy.lb.subset_hint"
SUBSET_KEY = "x-gateway-destination-endpoint-subset"
"""Under ``envoy.lb.subset_hint`` in the request's ``metadata_context``: the only addresses the
picker may name."""
REASON_HEADER = "x-xds-control-flow"
"""On a refusal by flow control: why (``queue-full``, ``max-wait``, ``no-ready-endpoint``)."""

_FULL_DUPLEX = processing_mode_pb2.ProcessingMode.FULL_DUPLEX_STREAMED
_BUFFERED = processing_mode_pb2.ProcessingMode.BUFFERED_PARTIAL


def _destination(
    addresses: Sequence[str], *, ask_load: bool
) -> tuple[ext.CommonResponse, struct_pb2.Struct]:
    """The protocol's two carriers of one answer: the header and the ``envoy.lb`` metadata;
    ``ask_load``: the request also asks the server for its load with the response."""
    value = ",".join(addresses)
    common = ext.CommonResponse()
    headers = [(DESTINATION_HEADER, value)] + ([(FORMAT_HEADER, "TEXT")] if ask_load else [])
    for key, text in headers:
        common.header_mutation.set_headers.append(
            base_pb2.HeaderValueOption(
                header=base_pb2.HeaderValue(key=key, raw_value=text.encode()),
                append_action=base_pb2.HeaderValueOption.OVERWRITE_IF_EXISTS_OR_ADD,
            )
        )
    metadata = struct_pb2.Struct()
    metadata.fields[METADATA_NAMESPACE].struct_value.fields[DESTINATION_HEADER].string_value = value
    return common, metadata


def picked(addresses: Sequence[str], *, ask_load: bool = False) -> ext.ProcessingResponse:
    """A buffered body's answer: the destination set on the body's response (``ask_load``:
    and the request for the server's load)."""
    common, metadata = _destination(addresses, ask_load=ask_load)
    return ext.ProcessingResponse(
        request_body=ext.BodyResponse(response=common), dynamic_metadata=metadata
    )


def given_back(kind: str, body: bytes, *, end: bool) -> ext.ProcessingResponse:
    """Full duplex: ``body`` (a piece of the request's or the response's, by ``kind``) sent
    back as the processor's own, unchanged; ``end``: it is the last."""
    returned = ext.BodyResponse()
    streamed = returned.response.body_mutation.streamed_response
    streamed.body = body
    streamed.end_of_stream = end
    return ext.ProcessingResponse(**{kind: returned})


def whole_body_answers(
    addresses: Sequence[str], *, body: bytes, ended_by: str, ask_load: bool = False
) -> list[ext.ProcessingResponse]:
    """Full duplex, once the body is whole: the headers' answer with the destination (none:
    no mutation), then the body given back in one piece (in this mode what the processor does
    not send back never reaches the server), then the trailers' answer if they ended it.
    ``ended_by``: the message kind that ended the request (``request_headers`` for a request
    with no body, ``request_body`` or ``request_trailers``). ``ask_load``: as ``picked``."""
    headers = ext.HeadersResponse()
    metadata = None
    if addresses:
        common, metadata = _destination(addresses, ask_load=ask_load)
        headers.response.CopyFrom(common)
    out = [ext.ProcessingResponse(request_headers=headers, dynamic_metadata=metadata)]
    if ended_by != "request_headers":
        out.append(given_back("request_body", body, end=ended_by == "request_body"))
    if ended_by == "request_trailers":
        out.append(ext.ProcessingResponse(request_trailers=ext.TrailersResponse()))
    return out


def passed(request: ext.ProcessingRequest) -> ext.ProcessingResponse:
    """The empty answer to whatever ``request`` is: carry on unchanged."""
    kind = request.WhichOneof("request")
    if kind in ("request_headers", "response_headers"):
        return ext.ProcessingResponse(**{kind: ext.HeadersResponse()})
    if kind in ("request_body", "response_body"):
        return ext.ProcessingResponse(**{kind: ext.BodyResponse()})
    if kind in ("request_trailers", "response_trailers"):
        return ext.ProcessingResponse(**{kind: ext.TrailersResponse()})
    return ext.ProcessingResponse()


def no_endpoint(reason: str) -> ext.ProcessingResponse:
    """The protocol's answer when there is no endpoint to name: 503, said at once."""
    return ext.ProcessingResponse(
        immediate_response=ext.ImmediateResponse(
            status=http_status_pb2.HttpStatus(code=http_status_pb2.StatusCode.ServiceUnavailable),
            body=reason.encode(),
            details=reason,
        )
    )


def hold_timeout(max_wait_s: float) -> ext.ProcessingResponse:
    """The answer that makes Envoy wait for a held body's (up to the filter's
    ``max_message_timeout``)."""
    response = ext.ProcessingResponse()
    response.override_message_timeout.FromMilliseconds(int((max_wait_s + HOLD_MARGIN_S) * 1000))
    return response


def refusal(refused: Refused, *, pool: str) -> ext.ProcessingResponse:
    """Flow control's refusal, said at once: its status, ``retry-after`` and the reason."""
    immediate = ext.ImmediateResponse(
        status=http_status_pb2.HttpStatus(code=refused.status),
        body=f"pool {pool}: {refused.reason}".encode(),
        details=f"flow_control_{refused.reason}",
    )
    for key, value in (
        ("retry-after", str(refused.retry_after_s)),
        (REASON_HEADER, refused.reason),
    ):
        immediate.headers.set_headers.append(
            base_pb2.HeaderValueOption(
                header=base_pb2.HeaderValue(key=key, raw_value=value.encode())
            )
        )
    return ext.ProcessingResponse(immediate_response=immediate)


def usage_asked(*, duplex: bool) -> ext.ProcessingResponse:
    """The response headers' answer that asks for the response's body too, for its usage
    (the filter allows this one override), in the request body's mode (``duplex``)."""
    return ext.ProcessingResponse(
        response_headers=ext.HeadersResponse(),
        mode_override=usage_mode(_FULL_DUPLEX if duplex else _BUFFERED),
    )


def header_values(headers: ext.HttpHeaders) -> dict[str, str]:
    """Name -> value of the message's headers (raw values decoded, bad bytes replaced)."""
    return {
        h.key: (h.raw_value.decode(errors="replace") if h.raw_value else h.value)
        for h in headers.headers.headers
    }


def body_modes(request: ext.ProcessingRequest) -> tuple[bool, bool]:
    """Whether the request's and the response's bodies come in full duplex, as the stream's
    first message (``protocol_config``) says."""
    config = request.protocol_config
    return config.request_body_mode == _FULL_DUPLEX, config.response_body_mode == _FULL_DUPLEX


def subset(request: ext.ProcessingRequest) -> frozenset[str] | None:
    """The gateway's subset hint: the only addresses the picker may name (``None``: any)."""
    hint = request.metadata_context.filter_metadata.get(SUBSET_NAMESPACE)
    if hint is None or SUBSET_KEY not in hint.fields:
        return None
    values = hint.fields[SUBSET_KEY].list_value.values
    return frozenset(v.string_value for v in values if v.string_value)


def served(request: ext.ProcessingRequest) -> str:
    """The endpoint that served, on the response headers' message (empty: none reported, or
    Envoy's ``-`` for a reply that no upstream made)."""
    lb = request.metadata_context.filter_metadata.get(METADATA_NAMESPACE)
    if lb is None or SERVED_KEY not in lb.fields:
        return ""
    value = str(lb.fields[SERVED_KEY].string_value)
    return "" if value == "-" else value


def load_report(request: ext.ProcessingRequest) -> str | None:
    """The server's ``endpoint-load-metrics`` on the response headers' message (``None``: it
    sent none)."""
    for header in request.response_headers.headers.headers:
        if header.key == REPORT_HEADER:
            raw: bytes = header.raw_value
            return raw.decode(errors="replace") if raw else str(header.value)
    return None


def stripped(answer: ext.ProcessingResponse) -> ext.ProcessingResponse:
    """``answer`` to the response headers, also removing the server's load report: it is
    for the picker, not the client."""
    answer.response_headers.response.header_mutation.remove_headers.append(REPORT_HEADER)
    return answer
