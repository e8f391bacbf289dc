"""The open ADS streams, for the admin API."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from xds_control.server.metrics import STREAMS
from xds_control.server.stream import AdsStream, TypeState

__all__ = ["StreamRegistry"]


class StreamRegistry:
    """Open streams by id."""

    def __init__(self) -> None:
        self._streams: dict[int, AdsStream] = {}
        self._ack_listeners: list[Callable[[AdsStream, TypeState], None]] = []

    def add_ack_listener(self, listener: Callable[[AdsStream, TypeState], None]) -> None:
        """Call ``listener`` (synchronously, cheaply, never raising) on every ACK."""
        self._ack_listeners.append(listener)

    def notify_ack(self, stream: AdsStream, state: TypeState) -> None:
        """An Envoy accepted a response."""
        for listener in self._ack_listeners:
            listener(stream, state)

    def add(self, stream: AdsStream) -> None:
        """Track an open stream."""
        self._streams[stream.stream_id] = stream
        STREAMS.set(len(self._streams))

    def remove(self, stream: AdsStream) -> None:
        """Forget a closed stream."""
        self._streams.pop(stream.stream_id, None)
        STREAMS.set(len(self._streams))

    def describe(self) -> list[dict[str, Any]]:
        """Every open stream's view, by node id."""
        views = [s.describe() for s in self._streams.values()]
        return sorted(views, key=lambda v: (v["node_id"], v["stream"]))
