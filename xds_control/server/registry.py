"""The open ADS streams (either variant), for the admin API, and what happens on them as it
happens (``StreamListener``): a connect, a push, an ACK, a NACK, a disconnect.

Why events and not a periodic look: a look costs time per open stream however idle the fleet
is; an event costs only when something happens, and nothing when no one listens."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from xds_control.server.metrics import STREAMS
from xds_control.server.session import TypeState, XdsStream

__all__ = ["Origin", "StreamListener", "StreamRegistry"]


class StreamListener(Protocol):
    """Told of what happens on every stream, synchronously on the event loop, so each call
    must be cheap and must not raise. ``state`` is the stream's state for the type concerned,
    already updated (``sent_version``, ``acked_version``, ``nacked_version`` and
    ``last_error``)."""

    def connected(self, stream: XdsStream) -> None:
        """The stream's first request named its node (``stream.node`` is set)."""

    def pushed(self, stream: XdsStream, state: TypeState) -> None:
        """A response with a new version of the type is about to be written."""

    def acked(self, stream: XdsStream, state: TypeState) -> None:
        """The Envoy accepted a response."""

    def nacked(self, stream: XdsStream, state: TypeState) -> None:
        """The Envoy rejected a response."""

    def disconnected(self, stream: XdsStream) -> None:
        """A stream that had named its node ended."""


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
        self._listeners: list[StreamListener] = []
        self._ack_listeners: list[Callable[[XdsStream, TypeState], None]] = []

    def add_listener(self, listener: StreamListener) -> None:
        """Tell ``listener`` of every connect, push, ACK, NACK and disconnect from now on."""
        self._listeners.append(listener)

    def add_ack_listener(self, listener: Callable[[XdsStream, TypeState], None]) -> None:
        """Call ``listener`` (synchronously, cheaply, never raising) on every ACK."""
        self._ack_listeners.append(listener)

    # What the streams report (``session.XdsStream`` calls these).

    def connected(self, stream: XdsStream) -> None:
        """A stream's first request named its node."""
        for listener in self._listeners:
            listener.connected(stream)

    def pushed(self, stream: XdsStream, state: TypeState) -> None:
        """A stream is sending a new version of a type."""
        for listener in self._listeners:
            listener.pushed(stream, state)

    def acked(self, stream: XdsStream, state: TypeState) -> None:
        """An Envoy accepted a response."""
        for ack_listener in self._ack_listeners:
            ack_listener(stream, state)
        for listener in self._listeners:
            listener.acked(stream, state)

    def nacked(self, stream: XdsStream, state: TypeState) -> None:
        """An Envoy rejected a response."""
        for listener in self._listeners:
            listener.nacked(stream, state)

    def add(self, stream: XdsStream, *, peer: str = "") -> None:
        """Track an open stream; ``peer`` is the Envoy's address as gRPC saw it."""
        self._streams[stream.stream_id] = stream
        self._origins[stream.stream_id] = Origin(peer=peer, connected_at=time.time())
        STREAMS.set(len(self._streams))

    def remove(self, stream: XdsStream) -> None:
        """Forget a closed stream (its listeners hear of it if it had named its node)."""
        if self._streams.pop(stream.stream_id, None) is not None and stream.node is not None:
            for listener in self._listeners:
                listener.disconnected(stream)
        self._origins.pop(stream.stream_id, None)
        STREAMS.set(len(self._streams))

    def streams(self) -> list[XdsStream]:
        """The open streams, oldest first."""
        return list(self._streams.values())

    def envoys_by_group(self) -> dict[str, int]:
        """Node group -> distinct Envoys (node ids) with a stream open in it: the Envoys that
        share the group's fleet-wide budgets (an Envoy may hold several streams)."""
        nodes: dict[str, set[str]] = {}
        for stream in self._streams.values():
            if stream.node is not None and stream.group:
                nodes.setdefault(stream.group, set()).add(stream.node.id)
        return {group: len(ids) for group, ids in nodes.items()}

    def origin(self, stream_id: int) -> Origin:
        """Where and when an open stream came from."""
        return self._origins.get(stream_id, Origin(peer="", connected_at=0.0))

    def describe(self) -> list[dict[str, Any]]:
        """Every open stream's view, by node id."""
        views = [s.describe() for s in self._streams.values()]
        return sorted(views, key=lambda v: (v["node_id"], v["stream"]))
