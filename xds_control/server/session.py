"""What both ADS variants know about one Envoy's stream: its node, what each type was sent and
accepted, its NACKs, and which clusters its routes still need.

``AdsStream`` (state of the world, ``stream.py``) and ``DeltaStream`` (incremental,
``delta.py``) differ in how requests and responses look; this is the part they share.
"""

from __future__ import annotations

import abc
import itertools
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import structlog
from envoy.config.core.v3 import base_pb2
from google.protobuf.message import Message

from xds_control.server.metrics import NACKS, REQUESTS, RESPONSES
from xds_control.xds import PreparedResource, Snapshot
from xds_control.xds import type_urls as urls

__all__ = ["Entries", "SentResponse", "TypeState", "XdsStream"]

log = structlog.get_logger(__name__)

Entries = Mapping[str, PreparedResource[Message]]

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


@dataclass(frozen=True)
class SentResponse:
    """One response waiting for Envoy's ACK or NACK."""

    version: str
    entries: Entries
    removed: tuple[str, ...] = ()
    complete: bool = False
    """The response carries the whole set (state-of-the-world CDS and LDS): what it lacks,
    Envoy drops."""


@dataclass
class TypeState:
    """Per type URL on one stream."""

    type_url: str
    requested: bool = False
    wildcard: bool = False
    names: frozenset[str] = frozenset()
    nonce: str = ""
    sent_version: str = ""
    acked_version: str = ""
    acked_at: float = 0.0
    nacked_version: str | None = None
    last_error: str | None = None
    responses: int = 0
    nacks: int = 0
    sent: dict[str, str] = field(default_factory=dict)
    """Name -> digest of what Envoy has (or is being sent) on this stream: only resources whose
    digest differs are sent again."""
    acked: dict[str, PreparedResource[Message]] = field(default_factory=dict)
    """What Envoy accepted, with content: the routes it runs name the clusters it still needs."""
    in_flight: dict[str, SentResponse] = field(default_factory=dict)
    """Responses by nonce that Envoy has not answered yet."""
    rejected: set[str] = field(default_factory=set)
    """Names whose last response Envoy NACKed: nothing waits for them."""

    def describe(self) -> dict[str, Any]:
        """JSON view for the admin API."""
        return {
            "type": urls.SHORT_NAMES.get(self.type_url, self.type_url),
            "acked_version": self.acked_version,
            "acked_at": self.acked_at,
            "sent_version": self.sent_version,
            "resources": "*" if self.wildcard else sorted(self.names),
            "responses": self.responses,
            "nacks": self.nacks,
            "nacked_version": self.nacked_version,
            "last_error": self.last_error,
        }

    def adopt(self, resources: Entries, versions: Mapping[str, str]) -> None:
        """Envoy says it has ``versions`` (name -> digest): what matches the snapshot is known
        content, as good as sent and accepted on this stream."""
        for name, version in versions.items():
            self.sent[name] = version
            prepared = resources.get(name)
            if prepared is not None and prepared.digest == version:
                self.acked[name] = prepared


class XdsStream(abc.ABC):
    """One Envoy's stream, either variant. Not thread-safe; one event loop drives it."""

    variant: str
    """``sotw`` or ``delta``: what the admin API shows as the stream's ``ads``."""

    def __init__(
        self,
        *,
        stream_id: int,
        snapshot_of: Callable[[str], Snapshot | None],
        on_ack: Callable[[XdsStream, TypeState], None] | None = None,
    ) -> None:
        self.stream_id = stream_id
        self._on_ack = on_ack
        self.node: base_pb2.Node | None = None
        self.group = ""
        self.types: dict[str, TypeState] = {}
        self._snapshot_of = snapshot_of
        self._nonces = itertools.count(1)
        self._log = log.bind(stream=stream_id)

    @abc.abstractmethod
    def on_snapshot(self) -> list[bytes]:
        """The group's snapshot changed: the responses that brings, in ``ORDER``."""

    def _bind(self, node: base_pb2.Node, group: str) -> None:
        if self.node is None:
            self.node = node
            self.group = group
            self._log = self._log.bind(node_id=node.id)

    def _record(self, state: TypeState, response: SentResponse) -> str:
        """Book a response about to be written; return its nonce."""
        nonce = str(next(self._nonces))
        state.nonce = nonce
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
        RESPONSES.labels(type=urls.SHORT_NAMES.get(state.type_url, "other")).inc()
        self._log.debug(
            "response",
            type_url=state.type_url,
            version=response.version,
            resources=len(response.entries),
            removed=len(response.removed),
            nonce=nonce,
        )
        return nonce

    def _accept(self, state: TypeState, response: SentResponse) -> None:
        """Envoy ACKed ``response``."""
        REQUESTS.labels(type=urls.SHORT_NAMES.get(state.type_url, "other"), kind="ack").inc()
        if response.complete:
            state.acked = dict(response.entries)
        else:
            state.acked.update(response.entries)
        for name in response.removed:
            state.acked.pop(name, None)
        state.rejected -= response.entries.keys()
        state.acked_version = response.version
        state.acked_at = time.time()
        if self._on_ack is not None:
            self._on_ack(self, state)

    def _reject(self, state: TypeState, response: SentResponse, error: str) -> None:
        """Envoy NACKed ``response``: count it, keep Envoy's words, never loop on it."""
        short = urls.SHORT_NAMES.get(state.type_url, "other")
        REQUESTS.labels(type=short, kind="nack").inc()
        NACKS.labels(type=short).inc()
        state.nacks += 1
        state.nacked_version = response.version
        state.last_error = error
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

    def _routes(self) -> dict[str, list[PreparedResource[Message]]]:
        # Route tables Envoy runs or may be about to run: ACKed, or sent and not answered yet.
        routes = self.types.get(urls.ROUTE)
        if routes is None:
            return {}
        out = {name: [p] for name, p in routes.acked.items()}
        for response in routes.in_flight.values():
            for name, prepared in response.entries.items():
                out.setdefault(name, []).append(prepared)
        return out

    def _routes_known(self) -> bool:
        # Whether this stream knows the content of every route table Envoy runs: until then,
        # any cluster Envoy has may still be routed to.
        routes = self.types.get(urls.ROUTE)
        if routes is not None and routes.names:
            # A table sent but not yet ACKed may be replacing one whose content is unknown.
            return routes.names & routes.sent.keys() <= routes.acked.keys()
        listeners = self.types.get(urls.LISTENER)
        if listeners is None or not listeners.acked_version:
            return False
        return not any(p.references for p in listeners.acked.values())

    def warming_clusters(self) -> frozenset[str]:
        """Clusters Envoy may still be warming, as far as this stream can tell: sent in a CDS
        response not answered yet, or accepted while their endpoints are still to come. A route
        table naming one waits (make-before-break); a rejected one holds nothing up."""
        clusters = self.types.get(urls.CLUSTER)
        endpoints = self.types.get(urls.ENDPOINT)
        if clusters is None:
            return frozenset()
        warming = {name for sent in clusters.in_flight.values() for name in sent.entries}
        if endpoints is None:
            return frozenset(warming)  # a client that takes no endpoints over xDS
        # Settled: Envoy has some version (ACKed, or named on reconnect), or rejected it.
        coming = {name for sent in endpoints.in_flight.values() for name in sent.entries}
        settled = endpoints.acked.keys() | (endpoints.sent.keys() - coming) | endpoints.rejected
        for name, prepared in clusters.acked.items():
            if prepared.references - settled:
                warming.add(name)
        return frozenset(warming)

    def _settled(self, state: TypeState, entries: Entries) -> dict[str, PreparedResource[Message]]:
        """``entries`` without the route tables that must wait for a warming cluster."""
        if state.type_url != urls.ROUTE:
            return dict(entries)
        warming = self.warming_clusters()
        return {name: p for name, p in entries.items() if not p.references & warming}

    def _knock_on(self, state: TypeState, snapshot: Snapshot | None) -> list[bytes]:
        """After a request of ``state``'s type (an answer, a subscription): the type that may
        have waited for what it tells (CDS for route tables and listeners, RDS for clusters
        and their endpoints)."""
        waiting = _WAITS_FOR.get(state.type_url)
        other = self.types.get(waiting) if waiting is not None else None
        if other is None or not other.requested:
            return []
        response = self._respond(other, snapshot)
        return [response] if response is not None else []

    @abc.abstractmethod
    def _respond(self, state: TypeState, snapshot: Snapshot | None) -> bytes | None:
        """The response ``state`` needs now, if any."""

    def held_clusters(self, snapshot: Snapshot) -> frozenset[str]:
        """Clusters the snapshot dropped that a route Envoy runs, or is being sent, may name:
        they stay (make-before-break) until Envoy has ACKed route tables that no longer name
        them."""
        clusters = self.types.get(urls.CLUSTER)
        if clusters is None:
            return frozenset()
        gone = clusters.sent.keys() - snapshot.clusters.resources.keys()
        if not gone or not self._routes_known():
            return frozenset(gone)
        named = {c for tables in self._routes().values() for p in tables for c in p.references}
        return frozenset(gone & named)

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
