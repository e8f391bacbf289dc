"""One request as Envoy served it, from its gRPC access-log entry (``HTTPAccessLogEntry``).

What the data path measured, the same for every OpenAI-compatible server: which endpoint
answered, when its first and last bytes came back, how much it sent, and whether the request
failed. Nothing here reads a server's own metrics.

A request still running is seen too: Envoy logs each open stream every ``PERIODIC_S``
(``access_log_flush_interval``), and each such entry is a ``Progress``: its endpoint, its
start, its first byte if one came, and the bytes sent so far. The entry carries no time of its
own; the n-th one of a stream is written ``n x PERIODIC_S`` after the stream began (Envoy's
per-stream timer), which the window counts without reading any clock of ours.
"""

from __future__ import annotations

from dataclasses import dataclass

from envoy.config.core.v3 import address_pb2
from envoy.data.accesslog.v3 import accesslog_pb2 as al
from google.protobuf import duration_pb2

__all__ = ["PERIODIC_S", "STREAM_HEADER", "Observation", "Progress", "from_entry"]

STREAM_HEADER = "content-type"
"""The response header the access log is configured to carry (``xds/access_log.py``): an
event stream (``text/event-stream``) is a streamed answer."""

_STREAMED_TYPE = "text/event-stream"

PERIODIC_S = 1.0
"""How often Envoy logs each stream still open (``xds/access_log.py``)."""

# Response flags that mean the endpoint did not serve the request: resets, timeouts, no
# healthy or reachable upstream, overflow. Flags of the downstream side (the client went away)
# or of our own filters (rate limited, fault injected) are not the endpoint's failures.
_FAILURE_FLAGS = frozenset(
    {
        "no_healthy_upstream",
        "upstream_request_timeout",
        "local_reset",
        "upstream_remote_reset",
        "upstream_connection_failure",
        "upstream_connection_termination",
        "upstream_overflow",
        "upstream_retry_limit_exceeded",
        "stream_idle_timeout",
        "upstream_max_stream_duration_reached",
        "duration_timeout",
        "upstream_protocol_error",
    }
)


@dataclass(frozen=True, slots=True)
class Observation:
    """One request Envoy sent to an endpoint, as its access log saw it."""

    cluster: str
    """The upstream cluster: the pool's name."""
    address: str
    """The endpoint, ``IP:PORT``: the identity everywhere downstream."""
    finished_at: float
    """Unix time (Envoy's clock) the request ended: its start plus its last upstream byte,
    or its start when nothing came back."""
    ttfb_s: float | None
    """Seconds from the request's start to the endpoint's first response byte; ``None`` when
    none came."""
    duration_s: float | None
    """Seconds from the request's start to the endpoint's last response byte; ``None`` when
    none came."""
    response_bytes: int
    """Response body bytes sent downstream."""
    request_bytes: int
    """Request body bytes received downstream: the prompt, in the API's own encoding."""
    status: int
    """HTTP status code (0 when Envoy sent none, e.g. a reset before the headers)."""
    failed: bool
    """5xx, or a reset, timeout or no upstream by the response flags."""
    streamed: bool
    """An event stream by its content type; without the header, whether the body kept coming
    after the first byte (last byte later than the first)."""
    stream_id: str = ""
    """Envoy's id of the downstream stream: its ``Progress`` entries carry the same."""

    @property
    def stream_s(self) -> float | None:
        """Seconds between the first and the last response byte (``None``: no byte)."""
        if self.ttfb_s is None or self.duration_s is None:
            return None
        return max(0.0, self.duration_s - self.ttfb_s)


@dataclass(frozen=True, slots=True)
class Progress:
    """A request still running, as one of its periodic access-log entries saw it."""

    address: str
    """The endpoint serving it, ``IP:PORT``."""
    stream_id: str
    started_at: float
    """Unix time (Envoy's clock) the request began."""
    ttfb_s: float | None
    """Seconds from the start to the endpoint's first response byte; ``None``: none yet."""
    response_bytes: int
    """Response body bytes sent downstream so far."""
    request_bytes: int
    streamed: bool
    """An event stream by its content type."""


def _seconds(value: duration_pb2.Duration, *, present: bool) -> float | None:
    return value.seconds + value.nanos / 1e9 if present else None


def _address(address: address_pb2.Address) -> str | None:
    if not address.HasField("socket_address"):
        return None  # a pipe or an internal address names no endpoint of a pool
    socket = address.socket_address
    if not socket.address or not socket.port_value:
        return None
    host = f"[{socket.address}]" if ":" in socket.address else socket.address
    return f"{host}:{socket.port_value}"


def _failed(common: al.AccessLogCommon, status: int) -> bool:
    if status >= 500:
        return True
    # Only the flags set (usually none), not a look-up of each of ours.
    return any(f.name in _FAILURE_FLAGS for f, _ in common.response_flags.ListFields())


def from_entry(entry: al.HTTPAccessLogEntry) -> Observation | Progress | None:
    """The request in ``entry``: an ``Observation`` when it ended, a ``Progress`` when it
    is still running (a periodic entry); ``None`` when it names no upstream host (refused by a
    filter, no route, no cluster, or not routed yet: no endpoint serves it)."""
    common = entry.common_properties
    address = _address(common.upstream_remote_address)
    if address is None:
        return None
    ttfb = _seconds(
        common.time_to_first_upstream_rx_byte,
        present=common.HasField("time_to_first_upstream_rx_byte"),
    )
    started = common.start_time.seconds + common.start_time.nanos / 1e9
    response = entry.response
    content_type = response.response_headers.get(STREAM_HEADER)
    event_stream = content_type is not None and content_type.lower().startswith(_STREAMED_TYPE)
    if common.intermediate_log_entry:
        return Progress(
            address=address,
            stream_id=common.stream_id,
            started_at=started,
            ttfb_s=ttfb,
            response_bytes=int(response.response_body_bytes),
            request_bytes=int(entry.request.request_body_bytes),
            streamed=event_stream,
        )
    last = _seconds(
        common.time_to_last_upstream_rx_byte,
        present=common.HasField("time_to_last_upstream_rx_byte"),
    )
    if ttfb is not None and last is not None:
        last = max(last, ttfb)
    status = response.response_code.value if response.HasField("response_code") else 0
    if content_type is not None:
        streamed = event_stream
    else:
        streamed = ttfb is not None and last is not None and last > ttfb
    return Observation(
        cluster=common.upstream_cluster,
        address=address,
        finished_at=started + (last or 0.0),
        ttfb_s=ttfb,
        duration_s=last,
        response_bytes=int(response.response_body_bytes),
        request_bytes=int(entry.request.request_body_bytes),
        status=status,
        failed=_failed(common, status),
        streamed=streamed,
        stream_id=common.stream_id,
    )
