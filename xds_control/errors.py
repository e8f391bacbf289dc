"""The exception tree of xds-control.

    XdsControlError
    ├── ConfigError            a config file or environment value is invalid (fatal at start-up,
    │                          rejected on reload: the last good config keeps being served)
    ├── DiscoveryError         an endpoint source failed (the last good endpoint set is kept)
    ├── SignalError            a signal source failed (the last good weights are kept)
    ├── SnapshotError          a snapshot is not self-consistent and is never published
    └── ServeError             a server cannot listen on its address (fatal at start-up)

Third-party errors are translated where they enter, with ``raise OurError(...) from exc``.
"""

from __future__ import annotations

__all__ = [
    "ConfigError",
    "DiscoveryError",
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


class SnapshotError(XdsControlError):
    """A snapshot references a resource it does not hold, or holds one nothing references."""


class ServeError(XdsControlError):
    """A server (ADS gRPC or admin HTTP) cannot listen on its address: taken, or not an
    address of this host."""
