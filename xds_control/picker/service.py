"""The picker as Envoy's ``ext_proc`` gRPC service, and the servers that host it.

Thin on purpose: one ``Exchange`` per ``ext_proc`` stream (one HTTP request) reads the pool,
the gateway's hints and the body, asks ``Picker``, and answers in the Gateway API Inference
Extension's Endpoint Picker Protocol: the ``x-gateway-destination-endpoint`` header and the
same value under dynamic metadata ``envoy.lb``, ``IP:PORT`` best first, comma-separated.

Two kinds of client, told apart by whether the stream names its pool:

- Envoy as ``xds-control`` configures it names the pool in the stream's gRPC metadata
  (``x-xds-control-pool``), and the route's priority class where it has one
  (``x-xds-control-band``: the band of a request whose priority header names none), and fails
  open: a request the picker cannot place gets no answer and the pool's own policy (weighted
  MAGLEV) takes it.
- A gateway of the Inference Extension runs one picker per pool and names none: the pool is
  the one whose picker serves at the address the stream came to. It may restrict the pick to
  a subset (``envoy.lb.subset_hint``), and is answered 503 when there is no endpoint to name,
  as the protocol requires.

Both send the response's headers with the endpoint that served, as the protocol says:
``x-gateway-destination-endpoint-served`` under ``envoy.lb`` in the message's metadata. The
picker then ends the request's prefill in its ledger and, where it served elsewhere than
picked, records its prompt there. A gateway that sends the response's body in full duplex
(Istio's, GKE's) passes on only what the picker gives back: every piece is given back as it
came.

Nothing here raises into gRPC: a message the picker cannot use is answered with no mutation.
Each address also serves gRPC health: ``liveness`` once started; ``readiness`` and the
``ext_proc`` service once ``mark_ready`` (the control loop's first publish).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

import grpc
import structlog
from envoy.config.core.v3 import base_pb2
from envoy.extensions.filters.http.ext_proc.v3 import processing_mode_pb2
from envoy.service.ext_proc.v3 import external_processor_pb2 as ext
from envoy.type.v3 import http_status_pb2
from google.protobuf import struct_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc

# The asyncio servicer's public name (grpcio-health-checking exports it as ``health.aio``);
# grpc-stubs' health.pyi predates it, hence the one ignore.
from grpc_health.v1.health import aio as health_aio  # type: ignore[attr-defined]

from xds_control.config.flow import HOLD_MARGIN_S, FlowControl
from xds_control.flow import Band, Charge, FlowController, Refused, estimate_tokens
from xds_control.flow.metrics import FLOW_CHECK_SECONDS
from xds_control.picker.metrics import PICK_SECONDS, PICKS
from xds_control.picker.picker import Picker
from xds_control.picker.usage import UsageReader
from xds_control.xds.picker import (
    BAND_METADATA,
    DESTINATION_HEADER,
    POOL_METADATA,
    SERVED_KEY,
    usage_mode,
)

__all__ = [
    "PROCESS_METHOD",
    "Exchange",
    "PickerServer",
    "add_ext_proc",
    "whole_body_answers",
]

log = structlog.get_logger(__name__)

PROCESS_METHOD = "/envoy.service.ext_proc.v3.ExternalProcessor/Process"
_METADATA_NAMESPACE = "envoy.lb"
SUBSET_NAMESPACE = "envoy.lb.subset_hint"
SUBSET_KEY = "x-gateway-destination-endpoint-subset"
"""Under ``envoy.lb.subset_hint`` in the request's ``metadata_context``: the only addresses the
picker may name."""
HEALTH_SERVICES = ("liveness", "readiness", "envoy.service.ext_proc.v3.ExternalProcessor")
"""The health services the protocol names; ``""`` (the whole server) follows readiness."""


def _destination(addresses: Sequence[str]) -> tuple[ext.CommonResponse, struct_pb2.Struct]:
    """The protocol's two carriers of one answer: the header and the ``envoy.lb`` metadata."""
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
    return common, metadata


def _picked(addresses: Sequence[str]) -> ext.ProcessingResponse:
    """A buffered body's answer: the destination set on the body's response."""
    common, metadata = _destination(addresses)
    return ext.ProcessingResponse(
        request_body=ext.BodyResponse(response=common), dynamic_metadata=metadata
    )


def _given_back(kind: str, body: bytes, *, end: bool) -> ext.ProcessingResponse:
    """Full duplex: ``body`` (a piece of the request's or the response's, by ``kind``) sent
    back as the processor's own, unchanged; ``end``: it is the last."""
    returned = ext.BodyResponse()
    streamed = returned.response.body_mutation.streamed_response
    streamed.body = body
    streamed.end_of_stream = end
    return ext.ProcessingResponse(**{kind: returned})


def whole_body_answers(
    addresses: Sequence[str], *, body: bytes, ended_by: str
) -> list[ext.ProcessingResponse]:
    """Full duplex, once the body is whole: the headers' answer with the destination (none:
    no mutation), then the body given back in one piece (in this mode what the processor does
    not send back never reaches the server), then the trailers' answer if they ended it.
    ``ended_by``: the message kind that ended the request (``request_headers`` for a request
    with no body, ``request_body`` or ``request_trailers``)."""
    headers = ext.HeadersResponse()
    metadata = None
    if addresses:
        common, metadata = _destination(addresses)
        headers.response.CopyFrom(common)
    out = [ext.ProcessingResponse(request_headers=headers, dynamic_metadata=metadata)]
    if ended_by != "request_headers":
        out.append(_given_back("request_body", body, end=ended_by == "request_body"))
    if ended_by == "request_trailers":
        out.append(ext.ProcessingResponse(request_trailers=ext.TrailersResponse()))
    return out


def add_ext_proc(
    server: grpc.aio.Server,
    process: Callable[
        [AsyncIterator[ext.ProcessingRequest], grpc.aio.ServicerContext[Any, Any]],
        AsyncIterator[ext.ProcessingResponse],
    ],
) -> None:
    """Serve Envoy's ``ext_proc`` method on ``server`` with ``process``."""
    service, _, method = PROCESS_METHOD.strip("/").partition("/")
    handler = grpc.stream_stream_rpc_method_handler(
        process,
        request_deserializer=ext.ProcessingRequest.FromString,
        response_serializer=ext.ProcessingResponse.SerializeToString,
    )
    server.add_generic_rpc_handlers(
        [grpc.method_handlers_generic_handler(service, {method: handler})]
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


def _no_endpoint(reason: str) -> ext.ProcessingResponse:
    """The protocol's answer when there is no endpoint to name: 503, said at once."""
    return ext.ProcessingResponse(
        immediate_response=ext.ImmediateResponse(
            status=http_status_pb2.HttpStatus(code=http_status_pb2.StatusCode.ServiceUnavailable),
            body=reason.encode(),
            details=reason,
        )
    )


REASON_HEADER = "x-xds-control-flow"
"""On a refusal by flow control: why (``queue-full``, ``max-wait``, ``no-ready-endpoint``)."""


def _header_values(headers: ext.HttpHeaders) -> dict[str, str]:
    return {
        h.key: (h.raw_value.decode(errors="replace") if h.raw_value else h.value)
        for h in headers.headers.headers
    }


def _hold_timeout(max_wait_s: float) -> ext.ProcessingResponse:
    """The answer that makes Envoy wait for a held body's (up to the filter's
    ``max_message_timeout``)."""
    response = ext.ProcessingResponse()
    response.override_message_timeout.FromMilliseconds(int((max_wait_s + HOLD_MARGIN_S) * 1000))
    return response


def _refused(refused: Refused, *, pool: str) -> ext.ProcessingResponse:
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


def _subset(request: ext.ProcessingRequest) -> frozenset[str] | None:
    hint = request.metadata_context.filter_metadata.get(SUBSET_NAMESPACE)
    if hint is None or SUBSET_KEY not in hint.fields:
        return None
    values = hint.fields[SUBSET_KEY].list_value.values
    return frozenset(v.string_value for v in values if v.string_value)


def _served(request: ext.ProcessingRequest) -> str:
    """The endpoint that served, on the response headers' message (empty: none reported, or
    Envoy's ``-`` for a reply that no upstream made)."""
    lb = request.metadata_context.filter_metadata.get(_METADATA_NAMESPACE)
    if lb is None or SERVED_KEY not in lb.fields:
        return ""
    served = str(lb.fields[SERVED_KEY].string_value)
    return "" if served == "-" else served


_FULL_DUPLEX = processing_mode_pb2.ProcessingMode.FULL_DUPLEX_STREAMED
_BUFFERED = processing_mode_pb2.ProcessingMode.BUFFERED_PARTIAL
_CHECK_ADMIT, _CHECK_RELEASE, _CHECK_END = (
    FLOW_CHECK_SECONDS.labels(phase) for phase in ("admit", "release", "end")
)
"""Flow control's phase timers, bound once: a label lookup per request is a lock and a dict."""


@dataclass
class Exchange:
    """One ``ext_proc`` stream: the messages of one HTTP request to ``pool``, in order.
    ``gateway``: the stream named no pool (an Inference Extension gateway's), so an empty
    pick is answered 503 instead of left to a fallback policy.

    Two body modes, as Envoy says in the stream's first message (``protocol_config``):
    buffered (ours: the whole body in one message, answered with the destination) and full
    duplex streamed (the protocol's: the body in pieces, sent without waiting for answers; the
    picker holds the headers' answer until the body is whole, sets the destination on it, and
    sends the body back, since in this mode what it does not send back never reaches the
    server). The response's body comes to the picker streamed (ours, a budgeted request's
    only, each piece answered "unchanged") or in full duplex (``duplex_response``: each
    piece given back as it came, since the client gets only what the picker sends back)."""

    picker: Picker
    pool: str
    gateway: bool = False
    request: Hashable = field(default_factory=object)
    """Names the HTTP request to the picker (its pick, where it served, its end)."""
    subset: frozenset[str] | None = None
    duplex: bool = False
    duplex_response: bool = False
    """The response's body comes in full duplex: Envoy passes on only what is sent back."""
    flow: FlowController | None = None
    """Holds the request while the pool is saturated (pools with ``picker.flow``)."""
    band: Band = Band.MEDIUM
    """The band of a request whose priority header names none: its route's class."""
    _body: list[bytes] = field(default_factory=list)
    _headers: dict[str, str] = field(default_factory=dict)
    _held: bytes | None = None
    _ended_by: str = "request_body"
    _charge: Charge | None = None
    """What the request was charged against a token budget, until its usage settles it."""
    _usage: UsageReader | None = None

    @property
    def holding(self) -> bool:
        """The body's answer waits for flow control: ``resume`` gives it."""
        return self._held is not None

    def on(self, message: ext.ProcessingRequest) -> list[ext.ProcessingResponse]:
        """The responses to one message (none while a streamed body is still arriving)."""
        if message.HasField("protocol_config"):
            self.duplex = message.protocol_config.request_body_mode == _FULL_DUPLEX
            self.duplex_response = message.protocol_config.response_body_mode == _FULL_DUPLEX
        if message.HasField("metadata_context"):
            self.subset = _subset(message) if self.subset is None else self.subset
        kind = message.WhichOneof("request")
        if kind == "request_headers" and self.flow is not None:
            self._headers = _header_values(message.request_headers)
        if kind == "response_headers" and self.pool and (served := _served(message)):
            self.picker.served(pool=self.pool, request=self.request, address=served)
            if self.flow is not None:
                with _CHECK_RELEASE.time():
                    self.flow.release()
        if kind == "response_headers" and self._charge is not None:
            self._usage = UsageReader()
            if not self.duplex_response:
                # Budgeted: the body too, for its usage (the filter allows this one override).
                return [
                    ext.ProcessingResponse(
                        response_headers=ext.HeadersResponse(),
                        mode_override=usage_mode(_FULL_DUPLEX if self.duplex else _BUFFERED),
                    )
                ]
        if kind in ("response_body", "response_trailers") and self._usage is not None:
            # The body ends with its last piece, or with the trailers when it has them.
            piece = message.response_body
            end = piece.end_of_stream or kind == "response_trailers"
            self._usage.feed(piece.body, end=end)
            if end:
                self._settle()
        if self.duplex_response and kind == "response_body":
            piece = message.response_body
            return [_given_back(kind, piece.body, end=piece.end_of_stream)]
        if self.duplex and kind in ("request_headers", "request_body", "request_trailers"):
            return self._stream(message, kind=kind)
        if kind == "request_body":
            body = message.request_body.body
            return self._flow_step(body) or self._buffered_answers(body)
        return [_pass(message)]

    def _flow_step(
        self, body: bytes, *, ended_by: str = "request_body"
    ) -> list[ext.ProcessingResponse] | None:
        """Flow control's say on a whole body, in either body mode: the budget's refusal, or
        the answer that holds it (``resume`` gives the rest); ``None``: pick at once."""
        if (settings := self._flow_settings()) is None:
            return None
        with _CHECK_ADMIT.time():
            return self._admit(settings, body, ended_by=ended_by)

    def _admit(
        self, settings: FlowControl, body: bytes, *, ended_by: str
    ) -> list[ext.ProcessingResponse] | None:
        """``_flow_step`` for a pool with flow control (``settings``)."""
        if (refusal := self._charge_budget(settings, body)) is not None:
            return [refusal]
        tenant, band = self._tenant_band(settings)
        if self._hold(body, ended_by=ended_by):
            return [_hold_timeout(settings.wait_s(band.name.lower()))]
        if self.flow is not None:
            self.flow.let_through(pool=self.pool, tenant=tenant)
        return None

    def _tenant_band(self, settings: FlowControl) -> tuple[str, Band]:
        tenant = self._headers.get(settings.tenant_header, "")
        return tenant, Band.of(self._headers.get(settings.priority_header, ""), default=self.band)

    def _charge_budget(self, settings: FlowControl, body: bytes) -> ext.ProcessingResponse | None:
        """Charge the request's estimate to its token budget; the refusal if it does not fit."""
        if not settings.budgets or self.flow is None:
            return None
        tenant, band = self._tenant_band(settings)
        estimate = estimate_tokens(body, default=settings.estimate_tokens)
        try:
            self._charge = self.flow.budgets.charge(
                pool=self.pool,
                budgets=settings.budgets,
                tenant=tenant,
                band=band,
                estimate=estimate,
            )
        except Refused as refused:
            return _refused(refused, pool=self.pool)
        return None

    def _settle(self, *, tokens: int | None = None) -> None:
        """Settle the request's charge with ``tokens`` (unset: what its usage said, if it
        said; else the estimate stays charged)."""
        charge, self._charge = self._charge, None
        if charge is None or self.flow is None:
            return
        if tokens is None and self._usage is not None:
            tokens = self._usage.tokens
        self.flow.budgets.settle(charge, tokens=tokens)

    def _flow_settings(self) -> FlowControl | None:
        """The pool's flow control, when this exchange has a controller and the pool has it."""
        if self.flow is None or not self.pool:
            return None
        settings = self.picker.fleet.picker(self.pool)
        return settings.flow if settings is not None else None

    def _hold(self, body: bytes, *, ended_by: str = "request_body") -> bool:
        """Keep ``body`` for ``resume`` if flow control holds the request now."""
        if self.flow is None or not self.flow.holds(self.pool):
            return False
        self._held, self._ended_by = body, ended_by
        return True

    def _buffered_answers(self, body: bytes) -> list[ext.ProcessingResponse]:
        chosen = self._pick(body)
        if chosen:
            return [_picked(chosen)]
        if self.gateway:
            return [self._refusal()]
        return [ext.ProcessingResponse(request_body=ext.BodyResponse())]

    async def resume(self) -> list[ext.ProcessingResponse]:
        """The held body's answer, once flow control lets it go: the pick (none: the
        fallback policy), or the refusal (429 or 503 with the reason)."""
        body, self._held = self._held or b"", None
        settings = self._flow_settings()
        assert self.flow is not None
        tenant, band = self._tenant_band(settings) if settings is not None else ("", self.band)
        try:
            await self.flow.admit(
                pool=self.pool, band=band, tenant=tenant, size=len(body), request=self.request
            )
        except Refused as refused:
            self._settle(tokens=0)  # never served: it generated nothing
            return [_refused(refused, pool=self.pool)]
        if self.duplex:
            return self._duplex_answers(body, ended_by=self._ended_by)
        return self._buffered_answers(body)

    def _stream(self, message: ext.ProcessingRequest, *, kind: str) -> list[ext.ProcessingResponse]:
        """Full duplex: gather the body; once it is whole, answer the headers with the
        destination, then give the body back in one piece (and the trailers, if they ended it)."""
        if kind == "request_headers" and not message.request_headers.end_of_stream:
            return []
        if kind == "request_body":
            self._body.append(message.request_body.body)
            if not message.request_body.end_of_stream:
                return []
        body = b"".join(self._body)
        return self._flow_step(body, ended_by=kind) or self._duplex_answers(body, ended_by=kind)

    def _duplex_answers(self, body: bytes, *, ended_by: str) -> list[ext.ProcessingResponse]:
        chosen = self._pick(body)
        if not chosen and self.gateway:
            return [self._refusal()]
        return whole_body_answers(chosen, body=body, ended_by=ended_by)

    def _pick(self, body: bytes) -> list[str]:
        if not self.pool:
            return []
        try:
            with PICK_SECONDS.time():
                return self.picker.pick(
                    pool=self.pool, body=body, request=self.request, subset=self.subset
                )
        except Exception:  # never into gRPC: a failed pick is a request without a pick
            log.exception("pick failed", pool=self.pool)
            PICKS.labels(pool=self.pool, outcome="error").inc()
            return []

    def _refusal(self) -> ext.ProcessingResponse:
        if not self.pool:
            return _no_endpoint("no picker pool serves at this address")
        return _no_endpoint(f"no endpoint of pool {self.pool} to pick")

    def end(self) -> None:
        """The stream closed: Envoy ends it when the HTTP request ends (checked with Envoy
        1.40), so the request no longer queues on its server."""
        if self.pool:
            self.picker.end(pool=self.pool, request=self.request)
            if self.flow is not None:
                with _CHECK_END.time():
                    self._settle()
                    self.flow.release()


class PickerServer:
    """One grpc.aio server per address in ``addresses``, each with the ``ext_proc`` service
    and gRPC health; a stream that names no pool is for the pool whose picker is the only one
    at its address."""

    def __init__(
        self, *, picker: Picker, addresses: Sequence[str], flow: FlowController | None = None
    ) -> None:
        self.picker = picker
        self.flow = flow
        self.addresses = tuple(addresses)
        self.health = health_aio.HealthServicer()
        self._servers = [self._server(address) for address in self.addresses]
        self.ports = [port for _, port in self._servers]

    def _server(self, address: str) -> tuple[grpc.aio.Server, int]:
        server = grpc.aio.server()

        async def process(
            requests: AsyncIterator[ext.ProcessingRequest],
            context: grpc.aio.ServicerContext[Any, Any],
        ) -> AsyncIterator[ext.ProcessingResponse]:
            async for response in self._process(requests, context, address=address):
                yield response

        add_ext_proc(server, process)
        health_pb2_grpc.add_HealthServicer_to_server(self.health, server)
        return server, server.add_insecure_port(address)

    async def _process(
        self,
        requests: AsyncIterator[ext.ProcessingRequest],
        context: grpc.aio.ServicerContext[Any, Any],
        *,
        address: str,
    ) -> AsyncIterator[ext.ProcessingResponse]:
        metadata = dict(context.invocation_metadata() or ())
        named = str(metadata.get(POOL_METADATA, ""))
        pool = named or self.picker.fleet.sole_pool(address) or ""
        band = Band.of(str(metadata.get(BAND_METADATA, "")))
        exchange = Exchange(self.picker, pool=pool, gateway=not named, flow=self.flow, band=band)
        started = time.monotonic()
        try:
            async for request in requests:
                for response in exchange.on(request):
                    yield response
                if exchange.holding:
                    for response in await exchange.resume():
                        yield response
        finally:
            exchange.end()
            log.debug(
                "picker stream closed", pool=pool, seconds=round(time.monotonic() - started, 4)
            )

    async def start(self) -> None:
        """Start serving: alive at once, ready only after ``mark_ready``."""
        serving, not_serving = (
            health_pb2.HealthCheckResponse.SERVING,
            health_pb2.HealthCheckResponse.NOT_SERVING,
        )
        await self.health.set("liveness", serving)
        for service in ("", *HEALTH_SERVICES[1:]):
            await self.health.set(service, not_serving)
        for server, _ in self._servers:
            await server.start()
        log.info("picker serving", addresses=self.addresses)

    async def mark_ready(self) -> None:
        """The loop has published: the picker knows the pools' endpoints."""
        for service in ("", *HEALTH_SERVICES[1:]):
            await self.health.set(service, health_pb2.HealthCheckResponse.SERVING)

    async def stop(self, *, grace: float = 1.0) -> None:
        """Stop; streams open after ``grace`` seconds are cancelled (Envoy then fails open)."""
        for service in ("", *HEALTH_SERVICES):
            await self.health.set(service, health_pb2.HealthCheckResponse.NOT_SERVING)
        for server, _ in self._servers:
            await server.stop(grace)
