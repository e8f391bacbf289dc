"""The exception tree of xds-control.

    XdsControlError
    ├── ConfigError            a config file or environment value is invalid (fatal at start-up,
    │                          rejected on reload: the last good config keeps being served)
    ├── DiscoveryError         an endpoint source failed (the last good endpoint set is kept)
    ├── SignalError            a signal source failed (the last good weights are kept)
    │   └── QueryError         one request for signals failed (a PromQL query, a /metrics
    │                          scrape); ``outcome`` says how: timeout, http, error, garbage
    │   └── KvLayoutError      a KV-event payload in no layout this build decodes (refused,
    │                          logged once per server, the subscriber goes on)
    │   └── LoadReportError    a response's ``endpoint-load-metrics`` header in no form this
    │                          build reads (refused, the response passes on unchanged)
    ├── SnapshotError          a snapshot is not self-consistent and is never published
    └── ServeError             a server cannot listen on its address (fatal at start-up)

Third-party errors are translated where they enter, with ``raise OurError(...) from exc``.
"""

from __future__ import annotations

from typing import Literal

__all__ = [
    "ConfigError",
    "DiscoveryError",
    "KvLayoutError",
    "LoadReportError",
    "QueryError",
    "ServeError",
    "SignalError",
    "SnapshotError",
    "XdsControlError",
]


class XdsControlError(Exception):
    """Base of every error raised on purpose by xds-control."""


class ConfigError(XdsControlError):
    """A config is invalid; ``problems`` holds one ``(field_path, message)`` per error."""

    def __init__(self, problems: list[tuple[str, str]], *, source: str = "") -> None:
        self.problems = problems
        self.source = source
        where = f"{source}: " if source else ""
        lines = [f"{path}: {message}" if path else message for path, message in problems]
        super().__init__(where + "; ".join(lines))


class DiscoveryError(XdsControlError):
    """An endpoint source could not produce endpoints."""


class SignalError(XdsControlError):
    """A signal source could not produce samples."""


class QueryError(SignalError):
    """One request for signals failed. ``outcome`` names how, as the query and scrape counters
    label it: ``timeout`` (no answer in time), ``http`` (a status other than 200), ``error``
    (the transport: refused, reset, DNS) or ``garbage`` (an answer that does not parse)."""

    def __init__(
        self, outcome: Literal["timeout", "http", "error", "garbage"], detail: str
    ) -> None:
        super().__init__(detail)
        self.outcome = outcome


class KvLayoutError(SignalError):
    """A KV-event payload matches no layout this build decodes (``signals/kv_wire.py``): not
    msgpack, an unknown tag or field, a value of the wrong type."""


class LoadReportError(SignalError):
    """A response's ``endpoint-load-metrics`` header is in no form this build reads
    (``signals/load_report.py``): an unknown format or field, a value that is not a number
    or out of its range."""


class SnapshotError(XdsControlError):
    """A snapshot references a resource it does not hold, or holds one nothing references."""


class ServeError(XdsControlError):
    """A server (ADS gRPC or admin HTTP) cannot listen on its address: taken, or not an
    address of this host."""
