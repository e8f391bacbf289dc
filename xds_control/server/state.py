"""Per type on one stream, both ADS variants: what Envoy asked for, was sent, accepted and
rejected, and the responses it has not answered yet."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from google.protobuf.message import Message

from xds_control.xds import PreparedResource
from xds_control.xds import type_urls as urls

__all__ = ["Entries", "SentResponse", "TypeState"]

Entries = Mapping[str, PreparedResource[Message]]


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
    nacked_at: float = 0.0
    """When Envoy last NACKed this type (epoch seconds; CSDS shows it)."""
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
    claimed: dict[str, str] = field(default_factory=dict)
    """Name -> digest a reconnecting Envoy says it has, of content no snapshot seen since has
    shown: until one does (``learn``), the routes it runs may name any cluster."""
    asked: list[str] | None = None
    """The names of the last state-of-the-world request, as sent (``None`` before the first):
    an ACK naming the same list leaves the subscription as it is."""
    synced: str = ""
    """The version of this type's resources that ``sent`` was last found (or made) to match
    for every name asked for; empty when unknown (a NACK, a new subscription, a reconnect).
    From there a new version needs a look only at the names that changed
    (``SnapshotCache.changed_names``)."""

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

    def hold(self, version: str, *, now: float) -> None:
        """Envoy holds ``version`` of this type without this stream having sent it (it
        reconnected with what it had, ``adopt``): as good as sent and ACKed at ``now``, so that
        ``/v1/streams`` and CSDS show it in step with that version, not NOT SENT."""
        self.sent_version = self.acked_version = version
        self.acked_at = now

    def adopt(self, resources: Entries, versions: Mapping[str, str]) -> None:
        """Envoy says it has ``versions`` (name -> digest): what matches the snapshot is known
        content, as good as sent and accepted on this stream."""
        self.synced = ""
        for name, version in versions.items():
            self.sent[name] = version
            prepared = resources.get(name)
            if prepared is not None and prepared.digest == version:
                self.acked[name] = prepared
            else:
                self.claimed[name] = version

    def learn(self, resources: Entries) -> None:
        """A snapshot shows the content of claimed digests: what the Envoy has is known now
        (a claim the server has since sent something else for is dropped)."""
        for name, version in list(self.claimed.items()):
            prepared = resources.get(name)
            if self.sent.get(name) != version:
                del self.claimed[name]
            elif prepared is not None and prepared.digest == version:
                self.acked[name] = prepared
                del self.claimed[name]
