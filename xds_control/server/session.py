"""What both ADS variants do alike for one Envoy's stream: bind its node, book responses,
take ACKs and NACKs, hold back what must wait (``ordering.py``), and describe it all.

``AdsStream`` (state of the world, ``stream.py``) and ``DeltaStream`` (incremental,
``delta.py``) differ in how requests and responses look; this is the part they share.

The state machines read no clock and share nothing between streams: the time comes with each
request (``now``), the snapshot from ``snapshot_of`` and which names changed between two
versions from ``changed_names`` (the cache's, worked out once for every stream). What they do
besides return bytes: count into the process's Prometheus metrics, log, and tell ``events``.
"""

from __future__ import annotations

import abc
import functools
import itertools
from collections.abc import Callable
from typing import Any, Protocol

import structlog
from envoy.config.core.v3 import base_pb2
from google.protobuf.message import Message
from prometheus_client import Counter

from xds_control.cache.protocol import ChangedNames
from xds_control.server.metrics import NACKS, REQUESTS, RESPONSES
from xds_control.server.ordering import held_clusters, warming_clusters
from xds_control.server.state import Entries, SentResponse, TypeState
from xds_control.xds import PreparedResource, Snapshot
from xds_control.xds import type_urls as urls

__all__ = ["StreamEvents", "TypeState", "XdsStream"]  # TypeState: from state.py

log = structlog.get_logger(__name__)

_IN_FLIGHT_LIMIT = 64
"""Unanswered responses kept per type; Envoy answers each, so this only bounds a stuck peer."""

_WAITS_FOR = {
    urls.ROUTE: urls.CLUSTER,
    urls.LISTENER: urls.CLUSTER,
    urls.CLUSTER: urls.ROUTE,
    urls.ENDPOINT: urls.ROUTE,
}
"""After a request of the key's type, the value's type may have a response that was waiting:
a dropped cluster waits for route tables, a route table for new clusters' endpoints."""


class StreamEvents(Protocol):
    """Who hears what happens on a stream (``registry.StreamRegistry``): called synchronously,
    once per event, never per stream and change when nothing happens."""

    def connected(self, stream: XdsStream) -> None: ...

    def pushed(self, stream: XdsStream, state: TypeState) -> None: ...

    def acked(self, stream: XdsStream, state: TypeState) -> None: ...

    def nacked(self, stream: XdsStream, state: TypeState) -> None: ...


@functools.cache
def _child(metric: Counter, *labels: str) -> Counter:
    """``metric.labels(*labels)``, looked up once: responses and ACKs count it per stream and
    change. Bounded: the labels are short type names (or ``other``) and request kinds."""
    return metric.labels(*labels)


class XdsStream(abc.ABC):
    """One Envoy's stream, either variant. Not thread-safe; one event loop drives it."""

    variant: str
    """``sotw`` or ``delta``: what the admin API shows as the stream's ``ads``."""

    def __init__(
        self,
        *,
        stream_id: int,
        snapshot_of: Callable[[str], Snapshot | None],
        changed_names: ChangedNames,
        events: StreamEvents | None = None,
    ) -> None:
        self.stream_id = stream_id
        self._events = events
        self.node: base_pb2.Node | None = None
        self.group = ""
        self.types: dict[str, TypeState] = {}
        self._snapshot_of = snapshot_of
        self._changed_names = changed_names
        self._nonces = itertools.count(1)
        self._log = log.bind(stream=stream_id)

    @abc.abstractmethod
    def on_snapshot(self, *, now: float) -> list[bytes]:
        """The group's snapshot changed (noticed at ``now``, epoch seconds): the responses that
        brings, in ``ORDER``."""

    def _bind(self, node: base_pb2.Node, group: str) -> None:
        if self.node is None:
            self.node = node
            self.group = group
            self._log = self._log.bind(node_id=node.id)
            if self._events is not None:
                self._events.connected(self)

    def _record(self, state: TypeState, response: SentResponse) -> str:
        """Book a response about to be written; return its nonce."""
        nonce = str(next(self._nonces))
        state.nonce = nonce
        new_version = response.version != state.sent_version
        state.sent_version = response.version
        state.responses += 1
        state.in_flight[nonce] = response
        while len(state.in_flight) > _IN_FLIGHT_LIMIT:
            del state.in_flight[next(iter(state.in_flight))]
        if response.complete:
            state.sent.clear()
        for name, prepared in response.entries.items():
            state.sent[name] = prepared.digest
        for name in response.removed:
            state.sent.pop(name, None)
        _child(RESPONSES, urls.SHORT_NAMES.get(state.type_url, "other")).inc()
        self._log.debug(
            "response",
            type_url=state.type_url,
            version=response.version,
            resources=len(response.entries),
            removed=len(response.removed),
            nonce=nonce,
        )
        if new_version and self._events is not None:
            self._events.pushed(self, state)
        return nonce

    def _accept(self, state: TypeState, response: SentResponse, *, now: float) -> None:
        """Envoy ACKed ``response`` (at ``now``, epoch seconds)."""
        _child(REQUESTS, urls.SHORT_NAMES.get(state.type_url, "other"), "ack").inc()
        if response.complete:
            state.acked = dict(response.entries)
        else:
            state.acked.update(response.entries)
        for name in response.removed:
            state.acked.pop(name, None)
        state.rejected -= response.entries.keys()
        state.acked_version = response.version
        state.acked_at = now
        if self._events is not None:
            self._events.acked(self, state)

    def _reject(self, state: TypeState, response: SentResponse, *, error: str, now: float) -> None:
        """Envoy NACKed ``response`` at ``now``: count it, keep Envoy's words, never loop on
        it."""
        short = urls.SHORT_NAMES.get(state.type_url, "other")
        REQUESTS.labels(type=short, kind="nack").inc()
        NACKS.labels(type=short).inc()
        state.nacks += 1
        state.nacked_version = response.version
        state.last_error = error
        state.nacked_at = now
        state.synced = ""  # what it rejected is no longer as good as sent
        if self._events is not None:
            self._events.nacked(self, state)
        for name in response.entries:  # Envoy keeps its old one: a fixed version goes out
            state.sent.pop(name, None)
        state.rejected.update(response.entries)
        self._log.warning(
            "envoy rejected a response",
            type_url=state.type_url,
            rejected_version=response.version,
            kept_version=state.acked_version,
            error=error,
        )

    def _settled(self, state: TypeState, entries: Entries) -> dict[str, PreparedResource[Message]]:
        """``entries`` without the route tables that must wait for a warming cluster."""
        if state.type_url != urls.ROUTE or not entries:
            # Nothing to hold back: skip the scan of every cluster (this runs for each stream
            # on every change and every EDS ACK, mostly with nothing to send).
            return dict(entries)
        warming = warming_clusters(self.types)
        return {name: p for name, p in entries.items() if not p.references & warming}

    def _knock_on(self, state: TypeState, snapshot: Snapshot | None, *, now: float) -> list[bytes]:
        """After a request of ``state``'s type (an answer, a subscription): the type that may
        have waited for what it tells (CDS for route tables and listeners, RDS for clusters
        and their endpoints)."""
        waiting = _WAITS_FOR.get(state.type_url)
        other = self.types.get(waiting) if waiting is not None else None
        if other is None or not other.requested:
            return []
        response = self._respond(other, snapshot, now=now)
        return [response] if response is not None else []

    @abc.abstractmethod
    def _respond(self, state: TypeState, snapshot: Snapshot | None, *, now: float) -> bytes | None:
        """The response ``state`` needs at ``now``, if any."""

    def held_clusters(self, snapshot: Snapshot) -> frozenset[str]:
        """Clusters the snapshot dropped that stay for now (``ordering.held_clusters``)."""
        return held_clusters(self.types, snapshot)

    def describe(self) -> dict[str, Any]:
        """JSON view for the admin API (what ``xdsctl proxy-status`` shows)."""
        node = self.node
        return {
            "stream": self.stream_id,
            "node_id": node.id if node is not None else "",
            "node_cluster": node.cluster if node is not None else "",
            "group": self.group,
            "ads": self.variant,
            "types": [self.types[t].describe() for t in urls.ORDER if t in self.types],
        }
