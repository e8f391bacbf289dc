"""The open ADS streams (either variant), for the admin API."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from xds_control.server.metrics import STREAMS
from xds_control.server.session import TypeState, XdsStream

__all__ = ["Origin", "StreamRegistry"]


@dataclass(frozen=True, slots=True)
class Origin:
    """Where and when a stream came from (the admin API's ListStreams shows it)."""

    peer: str
    connected_at: float


class StreamRegistry:
    """Open streams by id."""

    def __init__(self) -> None:
        self._streams: dict[int, XdsStream] = {}
        self._origins: dict[int, Origin] = {}
        self._ack_listeners: list[Callable[[XdsStream, TypeState], None]] = []

    def add_ack_listener(self, listener: Callable[[XdsStream, TypeState], None]) -> None:
        """Call ``listener`` (synchronously, cheaply, never raising) on every ACK."""
        self._ack_listeners.append(listener)

    def notify_ack(self, stream: XdsStream, state: TypeState) -> None:
        """An Envoy accepted a response."""
        for listener in self._ack_listeners:
            listener(stream, state)

    def add(self, stream: XdsStream, *, peer: str = "") -> None:
        """Track an open stream; ``peer`` is the Envoy's address as gRPC saw it."""
        self._streams[stream.stream_id] = stream
        self._origins[stream.stream_id] = Origin(peer=peer, connected_at=time.time())
        STREAMS.set(len(self._streams))

    def remove(self, stream: XdsStream) -> None:
        """Forget a closed stream."""
        self._streams.pop(stream.stream_id, None)
        self._origins.pop(stream.stream_id, None)
        STREAMS.set(len(self._streams))

    def streams(self) -> list[XdsStream]:
        """The open streams, oldest first."""
        return list(self._streams.values())

    def origin(self, stream_id: int) -> Origin:
        """Where and when an open stream came from."""
        return self._origins.get(stream_id, Origin(peer="", connected_at=0.0))

    def describe(self) -> list[dict[str, Any]]:
        """Every open stream's view, by node id."""
        views = [s.describe() for s in self._streams.values()]
        return sorted(views, key=lambda v: (v["node_id"], v["stream"]))
