"""One ADS stream's state of the world: what Envoy asked for, what it has, what it rejected.

Pure logic with no gRPC in it: requests and snapshot changes go in, serialised
``DiscoveryResponse`` bytes come out. The gRPC handler only moves bytes.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import structlog
from envoy.config.core.v3 import base_pb2
from envoy.service.discovery.v3 import discovery_pb2

from xds_control.server.metrics import NACKS, REQUESTS, RESPONSES
from xds_control.xds import Snapshot
from xds_control.xds import type_urls as urls

__all__ = ["AdsStream", "TypeState"]

log = structlog.get_logger(__name__)


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
    """Name -> digest of what Envoy has (or is being sent) on this stream: EDS and RDS
    responses carry only resources whose digest differs."""
    last_names: tuple[str, ...] = ()

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


class AdsStream:
    """State-of-the-world ADS for one Envoy. Not thread-safe; one event loop drives it."""

    def __init__(
        self,
        *,
        stream_id: int,
        snapshot_of: Callable[[str], Snapshot | None],
        on_ack: Callable[[AdsStream, TypeState], None] | None = None,
    ) -> None:
        self.stream_id = stream_id
        self._on_ack = on_ack
        self.node: base_pb2.Node | None = None
        self.group = ""
        self.types: dict[str, TypeState] = {}
        self._snapshot_of = snapshot_of
        self._nonces = itertools.count(1)
        self._log = log.bind(stream=stream_id)

    def on_request(self, request: discovery_pb2.DiscoveryRequest, *, group: str) -> list[bytes]:
        """Handle one request; return the responses it calls for (zero or one)."""
        if self.node is None:
            self.node = request.node
            self.group = group
            self._log = self._log.bind(node_id=request.node.id)
        type_url = request.type_url
        short = urls.SHORT_NAMES.get(type_url, "other")
        state = self.types.setdefault(type_url, TypeState(type_url=type_url))
        if request.response_nonce and request.response_nonce != state.nonce:
            REQUESTS.labels(type=short, kind="stale").inc()
            return []
        names = frozenset(request.resource_names)
        state.requested = True
        state.wildcard = type_url in urls.WILDCARD_TYPES and (not names or "*" in names)
        state.names = names
        if request.HasField("error_detail"):
            self._nack(state, request)
            return []
        snapshot = self._snapshot_of(self.group)
        if request.response_nonce:
            REQUESTS.labels(type=short, kind="ack").inc()
            state.acked_version = request.version_info
            state.acked_at = time.time()
            if self._on_ack is not None:
                self._on_ack(self, state)
        else:
            REQUESTS.labels(type=short, kind="initial").inc()
            state.acked_version = request.version_info
            if snapshot is not None and type_url in snapshot.types:
                self._adopt(state, snapshot, request.version_info)
        out = self._respond(state, snapshot)
        return [out] if out is not None else []

    def on_snapshot(self) -> list[bytes]:
        """The group's snapshot changed: push every type whose content changed."""
        snapshot = self._snapshot_of(self.group)
        out = []
        for type_url in urls.ORDER:
            state = self.types.get(type_url)
            if state is not None and state.requested:
                response = self._respond(state, snapshot)
                if response is not None:
                    out.append(response)
        return out

    def _adopt(self, state: TypeState, snapshot: Snapshot, version: str) -> None:
        # A reconnecting Envoy that already has this version needs nothing re-sent: same
        # content hash, same resources (this is what makes a control-plane restart churn-free).
        resources = snapshot.resource_set(state.type_url)
        if version and version == resources.version:
            state.sent_version = version
            state.sent = {name: p.digest for name, p in resources.resources.items()}

    def _nack(self, state: TypeState, request: discovery_pb2.DiscoveryRequest) -> None:
        short = urls.SHORT_NAMES.get(state.type_url, "other")
        REQUESTS.labels(type=short, kind="nack").inc()
        NACKS.labels(type=short).inc()
        state.nacks += 1
        state.nacked_version = state.sent_version
        state.last_error = request.error_detail.message
        for name in state.last_names:
            state.sent.pop(name, None)
        self._log.warning(
            "envoy rejected a response",
            type_url=state.type_url,
            rejected_version=state.sent_version,
            kept_version=request.version_info,
            error=request.error_detail.message,
        )

    def _respond(self, state: TypeState, snapshot: Snapshot | None) -> bytes | None:
        if snapshot is None:
            return None
        resources = snapshot.resource_set(state.type_url)
        if resources.version == state.nacked_version:
            return None  # Envoy rejected exactly this content; wait for a new version.
        if state.wildcard:
            if resources.version == state.sent_version:
                return None
            names = sorted(resources.resources)
        else:
            names = [
                name
                for name in sorted(state.names)
                if name in resources.resources
                and state.sent.get(name) != resources.resources[name].digest
            ]
            if not names:
                return None
        nonce = str(next(self._nonces))
        state.nonce = nonce
        state.sent_version = resources.version
        state.last_names = tuple(names)
        state.responses += 1
        for name in names:
            state.sent[name] = resources.resources[name].digest
        RESPONSES.labels(type=urls.SHORT_NAMES.get(state.type_url, "other")).inc()
        self._log.debug(
            "response",
            type_url=state.type_url,
            version=resources.version,
            resources=len(names),
            nonce=nonce,
        )
        return resources.response(names=names, nonce=nonce)

    def describe(self) -> dict[str, Any]:
        """JSON view for the admin API (what ``xdsctl proxy-status`` shows)."""
        node = self.node
        return {
            "stream": self.stream_id,
            "node_id": node.id if node is not None else "",
            "node_cluster": node.cluster if node is not None else "",
            "group": self.group,
            "types": [self.types[t].describe() for t in urls.ORDER if t in self.types],
        }
