"""The open ADS streams (either variant), for the admin API, and what happens on them as it
happens (``StreamListener``): a connect, a push, an ACK, a NACK, a disconnect.

Why events and not a periodic look: a look costs time per open stream however idle the fleet
is; an event costs only when something happens, and nothing when no one listens."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from envoy.config.core.v3 import health_check_pb2
from envoy.config.endpoint.v3 import endpoint_pb2
from google.protobuf.message import Message

from xds_control.server.metrics import STREAMS
from xds_control.server.session import TypeState, XdsStream
from xds_control.xds import PreparedResource
from xds_control.xds import type_urls as urls

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
        self._everywhere: dict[str, tuple[frozenset[str], frozenset[str]]] = {}
        """Cluster -> the digests of the assignments the streams held, and what all of them
        name (``endpoints_everywhere``)."""

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

    def endpoints_everywhere(self, cluster: str) -> frozenset[str] | None:
        """The endpoints (``IP:PORT``) of ``cluster`` that every stream asking for its
        ClusterLoadAssignment has ACKed, not marked unhealthy, draining or timed out: where
        a request Envoy sends now can land whichever Envoy sends it. ``None``: no stream asks
        for it.

        Flow control asks on every request: the answer is kept per cluster for the set of
        assignments the streams hold (Envoys on one version hold one), so a call costs a look
        at each stream, not at each endpoint."""
        held: dict[str, PreparedResource[Message] | None] = {}
        for stream in self._streams.values():
            state = stream.types.get(urls.ENDPOINT)
            if state is None or not (
                state.wildcard or cluster in state.names or cluster in state.acked
            ):
                continue
            acked = state.acked.get(cluster)
            held["" if acked is None else acked.digest] = acked
        if not held:
            return None
        key = frozenset(held)
        kept = self._everywhere.get(cluster)
        if kept is None or kept[0] != key:
            sets = [frozenset() if p is None else _usable(p.message) for p in held.values()]
            kept = self._everywhere[cluster] = (key, frozenset.intersection(*sets))
        return kept[1]

    def origin(self, stream_id: int) -> Origin:
        """Where and when an open stream came from."""
        return self._origins.get(stream_id, Origin(peer="", connected_at=0.0))

    def describe(self) -> list[dict[str, Any]]:
        """Every open stream's view, by node id."""
        views = [s.describe() for s in self._streams.values()]
        return sorted(views, key=lambda v: (v["node_id"], v["stream"]))


_UNUSABLE = frozenset(
    {health_check_pb2.UNHEALTHY, health_check_pb2.DRAINING, health_check_pb2.TIMEOUT}
)


def _usable(assignment: object) -> frozenset[str]:
    """The ``IP:PORT`` of each endpoint of a ClusterLoadAssignment Envoy would send to."""
    if not isinstance(assignment, endpoint_pb2.ClusterLoadAssignment):
        return frozenset()
    out = set()
    for locality in assignment.endpoints:
        for lb in locality.lb_endpoints:
            if lb.health_status in _UNUSABLE:
                continue
            socket = lb.endpoint.address.socket_address
            host = f"[{socket.address}]" if ":" in socket.address else socket.address
            out.add(f"{host}:{socket.port_value}")
    return frozenset(out)
