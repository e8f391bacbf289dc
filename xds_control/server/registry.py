"""The open ADS streams (either variant), for the admin API."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from xds_control.server.metrics import STREAMS
from xds_control.server.session import TypeState, XdsStream

__all__ = ["StreamRegistry"]


class StreamRegistry:
    """Open streams by id."""

    def __init__(self) -> None:
        self._streams: dict[int, XdsStream] = {}
        self._ack_listeners: list[Callable[[XdsStream, TypeState], None]] = []

    def add_ack_listener(self, listener: Callable[[XdsStream, TypeState], None]) -> None:
        """Call ``listener`` (synchronously, cheaply, never raising) on every ACK."""
        self._ack_listeners.append(listener)

    def notify_ack(self, stream: XdsStream, state: TypeState) -> None:
        """An Envoy accepted a response."""
        for listener in self._ack_listeners:
            listener(stream, state)

    def add(self, stream: XdsStream) -> None:
        """Track an open stream."""
        self._streams[stream.stream_id] = stream
        STREAMS.set(len(self._streams))

    def remove(self, stream: XdsStream) -> None:
        """Forget a closed stream."""
        self._streams.pop(stream.stream_id, None)
        STREAMS.set(len(self._streams))

    def streams(self) -> list[XdsStream]:
        """The open streams, oldest first."""
        return list(self._streams.values())

    def describe(self) -> list[dict[str, Any]]:
        """Every open stream's view, by node id."""
        views = [s.describe() for s in self._streams.values()]
        return sorted(views, key=lambda v: (v["node_id"], v["stream"]))
