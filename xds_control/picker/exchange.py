"""One ``ext_proc`` stream: the messages of one HTTP request to a pool, a handler per phase.

The phases come in order: the request's headers, its body (in one piece or several), its
trailers, then the response's headers, body and trailers. Once the request's body is whole,
flow control has its say (``FlowController.admit``: go, hold or refuse), then the picker
picks and the answer names the servers (``messages``). The response's headers say which
server served (the picker's ledger ends the request's prefill there) and, for a pool with
per-response load, what load it reported (recorded, and removed before the client sees it);
for a request charged to a token budget, the answer asks for the body too, whose usage
settles the charge (``FlowController.finish``).

Two body modes, as Envoy says in the stream's first message (``protocol_config``): buffered
(ours: the whole body in one message, answered with the destination) and full duplex
streamed (the protocol's: the body in pieces, sent without waiting for answers; the
exchange keeps the headers' answer until the body is whole, sets the destination on it, and
sends the body back, since in this mode what it does not send back never reaches the
server). The response's body comes streamed (ours, a budgeted request's only, each piece
answered "unchanged") or in full duplex (each piece given back as it came, since the client
gets only what the picker sends back).

Nothing here raises: a pick that fails is a request without a pick.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass, field

import structlog
from envoy.service.ext_proc.v3 import external_processor_pb2 as ext

from xds_control.errors import LoadReportError
from xds_control.flow import Band, Charge, FlowController, Go, Hold, Refuse
from xds_control.picker import messages
from xds_control.picker.metrics import LOAD_REPORTS, PICK_SECONDS, PICKS
from xds_control.picker.pick import Pick
from xds_control.picker.picker import Picker
from xds_control.picker.usage import UsageReader
from xds_control.signals.load_report import parse_load_report

__all__ = ["Exchange"]

log = structlog.get_logger(__name__)

Answers = list[ext.ProcessingResponse]


@dataclass
class Exchange:
    """The messages of one HTTP request to ``pool``, in order. ``gateway``: the stream named
    no pool (an Inference Extension gateway's), so an empty pick is answered 503 instead of
    left to a fallback policy."""

    picker: Picker
    pool: str
    gateway: bool = False
    request: Hashable = field(default_factory=object)
    """Names the HTTP request to the picker (its pick, where it served, its end)."""
    subset: frozenset[str] | None = None
    duplex: bool = False
    """The request's body comes in full duplex."""
    duplex_response: bool = False
    """The response's body comes in full duplex: Envoy passes on only what is sent back."""
    flow: FlowController | None = None
    """Holds the request while the pool is saturated (pools with ``picker.flow``)."""
    band: Band = Band.MEDIUM
    """The band of a request whose priority header names none: its route's class."""
    _headers: dict[str, str] = field(default_factory=dict)
    _pieces: list[bytes] = field(default_factory=list)
    _hold: Hold | None = None
    """Flow control holds the request: ``resume`` answers once it lets it go."""
    _held_body: tuple[bytes, str] = (b"", "request_body")
    """The held request's body, and the message kind that ended it."""
    _charge: Charge | None = None
    """What the request was charged against a token budget, until its usage settles it."""
    _usage: UsageReader | None = None

    @property
    def holding(self) -> bool:
        """The body's answer waits for flow control: ``resume`` gives it."""
        return self._hold is not None

    def on(self, message: ext.ProcessingRequest) -> Answers:
        """The responses to one message (none while a streamed body is still arriving)."""
        if message.HasField("protocol_config"):
            self.duplex, self.duplex_response = messages.body_modes(message)
        if message.HasField("metadata_context") and self.subset is None:
            self.subset = messages.subset(message)
        phase = _PHASES.get(message.WhichOneof("request") or "")
        return [messages.passed(message)] if phase is None else phase(self, message)

    def _request_headers(self, message: ext.ProcessingRequest) -> Answers:
        if self.flow is not None:  # flow control reads the tenant and the band from them
            self._headers = messages.header_values(message.request_headers)
        if not self.duplex:
            return [messages.passed(message)]
        if not message.request_headers.end_of_stream:
            return []  # the answer waits for the body
        return self._whole(b"", ended_by="request_headers")

    def _request_body(self, message: ext.ProcessingRequest) -> Answers:
        piece = message.request_body
        if not self.duplex:
            return self._whole(piece.body, ended_by="request_body")
        self._pieces.append(piece.body)
        if not piece.end_of_stream:
            return []
        return self._whole(b"".join(self._pieces), ended_by="request_body")

    def _request_trailers(self, message: ext.ProcessingRequest) -> Answers:
        if not self.duplex:
            return [messages.passed(message)]
        return self._whole(b"".join(self._pieces), ended_by="request_trailers")

    def _whole(self, body: bytes, *, ended_by: str) -> Answers:
        """The request's body is whole: flow control's word, then the pick."""
        if self.flow is None or not self.pool:
            return self._answer(body, ended_by=ended_by)
        match self.flow.admit(
            pool=self.pool, request=self.request, headers=self._headers, body=body, band=self.band
        ):
            case Refuse(refused):
                return [messages.refusal(refused, pool=self.pool)]
            case Hold() as hold:
                self._hold, self._charge = hold, hold.charge
                self._held_body = (body, ended_by)
                return [messages.hold_timeout(hold.wait_s)]
            case Go(charge):
                self._charge = charge
                return self._answer(body, ended_by=ended_by)

    async def resume(self) -> Answers:
        """The held body's answer, once flow control lets it go: the pick (none: the
        fallback policy), or the refusal (429 or 503 with the reason)."""
        hold, self._hold = self._hold, None
        assert hold is not None
        assert self.flow is not None
        verdict = await self.flow.wait(hold)
        if isinstance(verdict, Refuse):
            self._charge = None  # refunded: never served
            return [messages.refusal(verdict.refused, pool=self.pool)]
        body, ended_by = self._held_body
        return self._answer(body, ended_by=ended_by)

    def _answer(self, body: bytes, *, ended_by: str) -> Answers:
        """The pick, in the body mode's answer; a gateway's empty pick is a 503."""
        pick = self._pick(body)
        if not pick and self.gateway:
            return [self._no_endpoint()]
        ask = bool(pick) and self.picker.asks_load(self.pool)
        if self.duplex:
            return messages.whole_body_answers(
                pick.addresses, body=body, ended_by=ended_by, ask_load=ask
            )
        if pick:
            return [messages.picked(pick.addresses, ask_load=ask)]
        return [ext.ProcessingResponse(request_body=ext.BodyResponse())]

    def _pick(self, body: bytes) -> Pick:
        if not self.pool:
            return Pick()
        try:
            with PICK_SECONDS.time():
                return self.picker.pick(
                    pool=self.pool, body=body, request=self.request, subset=self.subset
                )
        except Exception:  # never into gRPC: a failed pick is a request without a pick
            log.exception("pick failed", pool=self.pool)
            PICKS.labels(pool=self.pool, outcome="error").inc()
            return Pick()

    def _no_endpoint(self) -> ext.ProcessingResponse:
        if not self.pool:
            return messages.no_endpoint("no picker pool serves at this address")
        return messages.no_endpoint(f"no endpoint of pool {self.pool} to pick")

    def _response_headers(self, message: ext.ProcessingRequest) -> Answers:
        served = messages.served(message) if self.pool else ""
        if served:
            self.picker.served(pool=self.pool, request=self.request, address=served)
            if self.flow is not None:
                self.flow.answered()
        answer = messages.passed(message)
        if self._charge is not None:
            self._usage = UsageReader()
            if not self.duplex_response:
                answer = messages.usage_asked(duplex=self.duplex)
        if self.pool and self.picker.asks_load(self.pool):
            report = messages.load_report(message)
            if report is not None:
                self._record_load(report, served=served)
                answer = messages.stripped(answer)
        return [answer]

    def _record_load(self, report: str, *, served: str) -> None:
        """The served server's load report, into the picker's view of it; one it cannot read
        (or a response no server made) is logged and dropped."""
        if not served:
            return
        try:
            self.picker.report(address=served, report=parse_load_report(report))
        except LoadReportError as exc:
            LOAD_REPORTS.labels(pool=self.pool, outcome="refused").inc()
            log.warning("load report refused", pool=self.pool, address=served, error=str(exc))
        else:
            LOAD_REPORTS.labels(pool=self.pool, outcome="read").inc()

    def _response_body(self, message: ext.ProcessingRequest) -> Answers:
        piece = message.response_body
        self._read_usage(piece.body, end=piece.end_of_stream)
        if self.duplex_response:
            return [messages.given_back("response_body", piece.body, end=piece.end_of_stream)]
        return [messages.passed(message)]

    def _response_trailers(self, message: ext.ProcessingRequest) -> Answers:
        self._read_usage(b"", end=True)  # a body with trailers ends with them
        return [messages.passed(message)]

    def _read_usage(self, piece: bytes, *, end: bool) -> None:
        """A piece of a budgeted response's body: its usage settles the charge at the end."""
        if self._usage is None:
            return
        self._usage.feed(piece, end=end)
        if end and self.flow is not None:
            charge, self._charge = self._charge, None
            self.flow.finish(charge, tokens=self._usage.tokens)

    def end(self) -> None:
        """The stream closed: Envoy ends it when the HTTP request ends (checked with Envoy
        1.40), so the request no longer queues on its server."""
        if not self.pool:
            return
        self.picker.end(pool=self.pool, request=self.request)
        if self.flow is not None:
            charge, self._charge = self._charge, None
            self.flow.end(charge, tokens=None if self._usage is None else self._usage.tokens)


_PHASES: dict[str, Callable[[Exchange, ext.ProcessingRequest], Answers]] = {
    "request_headers": Exchange._request_headers,
    "request_body": Exchange._request_body,
    "request_trailers": Exchange._request_trailers,
    "response_headers": Exchange._response_headers,
    "response_body": Exchange._response_body,
    "response_trailers": Exchange._response_trailers,
}
"""The handler of each phase, by the message's kind (others are passed unchanged)."""
