"""One incremental (delta) ADS stream: subscriptions, per-resource versions, removals.

Pure logic with no gRPC in it, no clock and nothing shared, like ``stream.py`` for the state
of the world: requests and snapshot changes go in, serialised ``DeltaDiscoveryResponse``
bytes come out. A resource's version is its content digest, so a response carries exactly
the resources whose digest differs from what this Envoy has: a weight change in one pool
sends one ClusterLoadAssignment.
A reconnecting Envoy names what it has (``initial_resource_versions``); what matches is not
sent again.
"""

from __future__ import annotations

from envoy.service.discovery.v3 import discovery_pb2
from google.protobuf.message import Message

from xds_control.cache.protocol import ChangedNames
from xds_control.server.metrics import REQUESTS
from xds_control.server.session import XdsStream
from xds_control.server.state import SentResponse, TypeState
from xds_control.xds import PreparedResource, ResourceSet, Snapshot
from xds_control.xds import type_urls as urls
from xds_control.xds.snapshot import delta_response, empty_assignment

__all__ = ["DeltaStream"]

WILDCARD = "*"

_REMOVABLE = frozenset({urls.CLUSTER, urls.LISTENER})
"""Types whose removals the server announces. An EDS or RDS name goes when Envoy unsubscribes
(its cluster or listener went first); removing a ClusterLoadAssignment under a live cluster
would empty it."""


class DeltaStream(XdsStream):
    """Incremental ADS for one Envoy."""

    variant = "delta"

    def on_request(
        self, request: discovery_pb2.DeltaDiscoveryRequest, *, group: str, now: float
    ) -> list[bytes]:
        """Handle one request (an ACK, a NACK, a subscription change, or several at once),
        received at ``now`` (epoch seconds); return the responses it calls for."""
        self._bind(request.node, group)
        type_url = request.type_url
        first = type_url not in self.types
        state = self.types.get(type_url) or self.types.setdefault(type_url, TypeState(type_url))
        self._answer(state, request, now=now)
        snapshot = self._snapshot_of(self.group)
        _subscribe(state, request, first=first, snapshot=snapshot)
        self._learn(snapshot)
        response = self._respond(state, snapshot, now=now)
        out = [response] if response is not None else []
        return out + self._knock_on(state, snapshot, now=now)

    def on_snapshot(self, *, now: float) -> list[bytes]:
        """The group's snapshot changed: push what changed, type by type in order."""
        snapshot = self._snapshot_of(self.group)
        self._learn(snapshot)
        out = []
        for type_url in urls.ORDER:
            state = self.types.get(type_url)
            if state is not None:
                response = self._respond(state, snapshot, now=now)
                if response is not None:
                    out.append(response)
        return out

    def _learn(self, snapshot: Snapshot | None) -> None:
        # Before any response: a route table Envoy claimed on reconnect may now be known, and
        # with it which dropped clusters no route names any more (``TypeState.learn``).
        if snapshot is None:
            return
        for state in self.types.values():
            if state.claimed:
                state.learn(snapshot.resource_set(state.type_url).resources)

    def _answer(
        self, state: TypeState, request: discovery_pb2.DeltaDiscoveryRequest, *, now: float
    ) -> None:
        # An ACK or NACK names the response by nonce; any number may be in flight.
        short = urls.SHORT_NAMES.get(state.type_url, "other")
        if not request.response_nonce:
            REQUESTS.labels(type=short, kind="initial").inc()
            return
        answered = state.in_flight.pop(request.response_nonce, None)
        if answered is None:
            REQUESTS.labels(type=short, kind="stale").inc()
        elif request.HasField("error_detail"):
            self._reject(state, answered, error=request.error_detail.message, now=now)
        else:
            self._accept(state, answered, now=now)

    def _respond(self, state: TypeState, snapshot: Snapshot | None, *, now: float) -> bytes | None:
        if snapshot is None or not state.requested or state.type_url not in snapshot.types:
            return None  # nothing to say yet, or a type this server does not serve
        resources = snapshot.resource_set(state.type_url)
        if resources.version == state.nacked_version:
            return None  # Envoy rejected exactly this content; wait for a new version.
        first_answer = state.wildcard and state.responses == 0 and not state.sent
        if state.synced == resources.version and not first_answer:
            return None  # in step with this version (the usual case for all but one type)
        changed = _changed(state, resources, changed_names=self._changed_names)
        entries = self._settled(state, changed)
        removed, held = self._removed(state, snapshot, resources)
        whole = len(entries) == len(changed) and not held  # nothing waits: in step after this
        if not entries and not removed and not first_answer:
            if whole:
                state.synced = resources.version
                if not state.sent_version and state.acked:
                    # Nothing ever sent, and what Envoy named on reconnect is what is served:
                    # it holds this version (a delta request names no version of its own).
                    state.hold(resources.version, now=now)
            return None
        response = SentResponse(version=resources.version, entries=entries, removed=removed)
        nonce = self._record(state, response)
        if whole:
            state.synced = resources.version
        return delta_response(
            header=resources.delta_header,
            entries=entries.values(),
            removed=removed,
            nonce=nonce,
        )

    def _removed(
        self, state: TypeState, snapshot: Snapshot, resources: ResourceSet[Message]
    ) -> tuple[tuple[str, ...], bool]:
        """Names to announce as removed, and whether some must wait (a route names them)."""
        if state.type_url not in _REMOVABLE:
            return (), False
        gone = {
            name
            for name in state.sent.keys() - resources.resources.keys()
            if state.wildcard or name in state.names
        }
        held = frozenset[str]()
        if state.type_url == urls.CLUSTER and gone:
            held = self.held_clusters(snapshot) & gone
            gone -= held
        return tuple(sorted(gone)), bool(held)


def _subscribe(
    state: TypeState,
    request: discovery_pb2.DeltaDiscoveryRequest,
    *,
    first: bool,
    snapshot: Snapshot | None,
) -> None:
    subscribe = set(request.resource_names_subscribe)
    unsubscribe = set(request.resource_names_unsubscribe)
    has = dict(request.initial_resource_versions) if first else {}
    if first:
        state.requested = True
        # Legacy wildcard: the first request for CDS or LDS names nothing.
        state.wildcard = state.type_url in urls.WILDCARD_TYPES and not subscribe
        known = snapshot.resource_set(state.type_url).resources if snapshot is not None else {}
        state.adopt(known, has)
    if WILDCARD in subscribe:
        state.wildcard = True
    if WILDCARD in unsubscribe:
        state.wildcard = False
    if first or subscribe or unsubscribe:
        state.synced = ""  # names asked for anew (or dropped): look at each of them
    subscribe.discard(WILDCARD)
    unsubscribe.discard(WILDCARD)
    # A name subscribed again is sent again (Envoy dropped it when it unsubscribed).
    for name in (subscribe - has.keys()) | unsubscribe:
        state.sent.pop(name, None)
        state.acked.pop(name, None)
        state.claimed.pop(name, None)
    state.names = frozenset((state.names | subscribe) - unsubscribe)


def _changed(
    state: TypeState, resources: ResourceSet[Message], *, changed_names: ChangedNames
) -> dict[str, PreparedResource[Message]]:
    # A cluster the snapshot does not know gets an empty assignment, so that it finishes
    # warming instead of waiting for ever. A stream in step with an earlier version looks only
    # at the names that changed since (the cache's diffs): for a one-pool change, one name.
    known = resources.resources
    changed = changed_names(state.synced, resources) if state.synced else None
    if changed is None:
        wanted = state.names | known.keys() if state.wildcard else state.names
    elif state.wildcard:
        wanted = frozenset(n for n in changed if n in state.names or n in known)
    else:
        wanted = changed & state.names
    entries: dict[str, PreparedResource[Message]] = {}
    for name in sorted(wanted):
        prepared = known.get(name)
        if prepared is None and state.type_url == urls.ENDPOINT and name not in state.sent:
            prepared = empty_assignment(name)
        if prepared is not None and state.sent.get(name) != prepared.digest:
            entries[name] = prepared
    return entries
