"""One ADS stream's state of the world: what Envoy asked for, what it has, what it rejected.

Pure logic with no gRPC in it, no clock and nothing shared (``session.py``): requests and
snapshot changes go in, serialised ``DiscoveryResponse`` bytes come out. The gRPC handler only
moves bytes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable

from envoy.service.discovery.v3 import discovery_pb2
from google.protobuf.message import Message

from xds_control.cache.protocol import ChangedNames
from xds_control.server.metrics import REQUESTS
from xds_control.server.session import XdsStream
from xds_control.server.state import Entries, SentResponse, TypeState
from xds_control.xds import PreparedResource, ResourceSet, Snapshot
from xds_control.xds import type_urls as urls
from xds_control.xds.snapshot import empty_assignment, sotw_header, sotw_response

__all__ = ["AdsStream"]

_UNKNOWN = "?"
"""The digest of a resource a reconnecting Envoy has in an older version: anything differs."""


class AdsStream(XdsStream):
    """State-of-the-world ADS for one Envoy."""

    variant = "sotw"

    def on_request(
        self, request: discovery_pb2.DiscoveryRequest, *, group: str, now: float
    ) -> list[bytes]:
        """Handle one request, received at ``now`` (epoch seconds); return the responses it
        calls for (zero, one, or a CDS response too when an ACKed route table lets a dropped
        cluster go)."""
        self._bind(request.node, group)
        type_url = request.type_url
        short = urls.SHORT_NAMES.get(type_url, "other")
        state = self.types.get(type_url) or self.types.setdefault(type_url, TypeState(type_url))
        first = not state.requested
        if request.response_nonce and request.response_nonce != state.nonce:
            return self._stale(state, request, now=now)
        state.requested = True
        _subscribe(state, request)
        answered = state.in_flight.pop(request.response_nonce, None)
        snapshot = self._snapshot_of(self.group)
        if request.HasField("error_detail"):
            rejected = answered or SentResponse(version=state.sent_version, entries={})
            self._reject(state, rejected, error=request.error_detail.message, now=now)
            return self._knock_on(state, snapshot, now=now)
        if answered is not None:
            self._accept(state, answered, now=now)
        elif not request.response_nonce:
            REQUESTS.labels(type=short, kind="initial").inc()
            state.acked_version = request.version_info
            if first and request.version_info and snapshot is not None:
                _resume(state, snapshot.resource_set(type_url), request.version_info, now=now)
        response = self._respond(state, snapshot, now=now)
        out = [response] if response is not None else []
        return out + self._knock_on(state, snapshot, now=now)

    def _stale(
        self, state: TypeState, request: discovery_pb2.DiscoveryRequest, *, now: float
    ) -> list[bytes]:
        # Not an answer to the newest response: nothing is sent for it (xDS protocol). Still,
        # its names are what Envoy subscribes to now, and an ACK says Envoy took that older
        # response, whose resources the newer one (carrying only changes) may not repeat.
        REQUESTS.labels(type=urls.SHORT_NAMES.get(state.type_url, "other"), kind="stale").inc()
        _subscribe(state, request)
        answered = state.in_flight.pop(request.response_nonce, None)
        if answered is not None and not request.HasField("error_detail"):
            self._accept(state, answered, now=now)
        return self._knock_on(state, self._snapshot_of(self.group), now=now)

    def on_snapshot(self, *, now: float) -> list[bytes]:
        """The group's snapshot changed: push every type whose content changed, in order."""
        snapshot = self._snapshot_of(self.group)
        out = []
        for type_url in urls.ORDER:
            state = self.types.get(type_url)
            if state is not None and state.requested:
                response = self._respond(state, snapshot, now=now)
                if response is not None:
                    out.append(response)
        return out

    def _respond(self, state: TypeState, snapshot: Snapshot | None, *, now: float) -> bytes | None:
        # ``now`` is not needed here: a reconnect's version is known from its first request.
        if snapshot is None:
            return None
        resources = snapshot.resource_set(state.type_url)
        if state.synced == resources.version:
            return None  # in step with this version: nothing to send (the usual case)
        if state.wildcard:
            response, whole = self._complete(state, snapshot, resources)
        else:
            response, whole = _changes(
                state, resources, ready=self._settled, changed_names=self._changed_names
            )
        if response is None or response.version == state.nacked_version:
            if response is None and whole:
                state.synced = resources.version
            return None  # nothing new, or Envoy rejected exactly this content
        nonce = self._record(state, response)
        if whole:
            state.synced = resources.version
        if response.version == resources.version:
            header = resources.header
        else:
            header = sotw_header(type_url=state.type_url, version=response.version)
        return sotw_response(header=header, entries=response.entries.values(), nonce=nonce)

    def _complete(
        self, state: TypeState, snapshot: Snapshot, resources: ResourceSet[Message]
    ) -> tuple[SentResponse | None, bool]:
        # CDS and LDS carry the whole set; a dropped cluster some route still names stays in it.
        known = resources.resources
        version = resources.version
        held: dict[str, PreparedResource[Message]] = {}
        if state.type_url == urls.CLUSTER:
            held = {
                n: state.acked[n] for n in sorted(self.held_clusters(snapshot) & state.acked.keys())
            }
            if held:
                digests = "".join(f"{n}\0{p.digest}\0" for n, p in held.items())
                version = f"{version}+{hashlib.sha256(digests.encode()).hexdigest()[:8]}"
        # In step means exactly the snapshot's set, nothing held (what is held may go later).
        if state.sent_version and _has(state.sent, known, held):
            return None, not held  # only when something differs is the response built
        entries = {name: known[name] for name in sorted(known)}
        entries.update(held)  # held clusters are no longer in the snapshot: no name twice
        return SentResponse(version=version, entries=entries, complete=True), not held


def _has(sent: dict[str, str], *parts: Entries) -> bool:
    # Whether ``sent`` is exactly ``parts`` (disjoint), by digest; plain loops, so that it
    # allocates nothing (per stream and change, garbage collections add up).
    if len(sent) != sum(map(len, parts)):
        return False
    for part in parts:
        for name, prepared in part.items():
            if sent.get(name) != prepared.digest:
                return False
    return True


def _changes(
    state: TypeState,
    resources: ResourceSet[Message],
    *,
    ready: Callable[[TypeState, Entries], Entries],
    changed_names: ChangedNames,
) -> tuple[SentResponse | None, bool]:
    # EDS and RDS carry only what differs from what this Envoy has (xDS protocol, "Grouping
    # Resources into Responses"). A cluster the snapshot does not know gets an empty assignment,
    # so that it finishes warming instead of waiting for ever. Also says whether the response
    # (if any) leaves the stream in step with ``resources``: nothing that differs held back.
    # Every stream runs this on every change, mostly to find one name or none: a stream in step
    # with an earlier version looks only at the names that changed since (the cache's diffs).
    known, sent = resources.resources, state.sent
    names: frozenset[str] = state.names
    if state.synced and (changed := changed_names(state.synced, resources)) is not None:
        names = changed & names if len(changed) < len(names) else names & changed
    differs: dict[str, PreparedResource[Message]] = {}
    for name in names:
        prepared = known.get(name)
        if prepared is None and state.type_url == urls.ENDPOINT and name not in sent:
            prepared = empty_assignment(name)
        if prepared is not None and sent.get(name) != prepared.digest:
            differs[name] = prepared
    if not differs:
        return None, True
    entries = dict(ready(state, {name: differs[name] for name in sorted(differs)}))
    whole = len(entries) == len(differs)
    return (SentResponse(version=resources.version, entries=entries) if entries else None), whole


def _subscribe(state: TypeState, request: discovery_pb2.DiscoveryRequest) -> None:
    # Envoy repeats every name in every ACK: compared as sent (no set built, no string hashed),
    # the same list as last time means the same subscription, the usual case.
    if state.asked is None or request.resource_names != state.asked:
        state.asked = list(request.resource_names)
        names = frozenset(state.asked)
        wildcard = state.type_url in urls.WILDCARD_TYPES and (not names or "*" in names)
        if names != state.names or wildcard != state.wildcard:
            state.synced = ""  # names asked for anew: look at each of them
        state.wildcard, state.names = wildcard, names
    if not state.wildcard:
        # Envoy drops what it no longer asks for: asked again, it is sent again (checked on
        # every request: an ACK of an older response may have brought back a name since).
        names = state.names
        for known in (state.sent, state.acked):
            if not known.keys() <= names:  # usually so: Envoy asks for the same names again
                for name in known.keys() - names:
                    del known[name]
        state.rejected &= names


def _resume(state: TypeState, resources: ResourceSet[Message], version: str, *, now: float) -> None:
    # A reconnecting Envoy that already has this version needs nothing re-sent: same content
    # hash, same resources (this is what makes a control-plane restart churn-free). With another
    # version, it still has *some* version of each name it asks for: none of them is unknown.
    if version == resources.version:
        state.hold(version, now=now)
        wanted = resources.resources.keys() if state.wildcard else state.names
        has = {n: p.digest for n, p in resources.resources.items() if n in wanted}
        state.adopt(resources.resources, has)
    elif not state.wildcard:
        state.sent.update(dict.fromkeys(state.names, _UNKNOWN))
        state.synced = ""
