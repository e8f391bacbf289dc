"""The seam between the control loop, which publishes snapshots, and the server, which streams
them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from envoy.config.core.v3 import base_pb2
from google.protobuf.message import Message

from xds_control.cache.groups import NodeRouting
from xds_control.xds import ResourceSet, Snapshot

__all__ = ["ChangedNames", "SnapshotCache", "Unsubscribe"]

Unsubscribe = Callable[[], None]

ChangedNames = Callable[[str, ResourceSet[Message]], frozenset[str] | None]
"""``SnapshotCache.changed_names`` as a stream takes it: (old version, new resources) -> the
names that differ, or ``None`` when the old version is not known."""


class SnapshotCache(Protocol):
    """Snapshots per node group, and change notifications.

    ``group_of`` maps an Envoy's node to the group whose snapshot it gets, or to ``None``: the
    node is refused (it matches no node group and the config refuses unknown nodes), and the
    server ends its stream with PERMISSION_DENIED. ``set_routing`` replaces the rules
    ``group_of`` follows (streams already connected keep their group). ``snapshot`` returns
    the group's current snapshot, or ``None`` before the first publication (streams then wait).
    ``subscribe`` calls ``callback`` (synchronously, on the event loop, without arguments) after
    every ``set_snapshot`` that changes the group's version; it must not raise and must be cheap,
    since one publication calls every stream's callback. ``changed_names`` says which names of
    one type differ between a version it published and ``resources``, worked out once for all
    streams; ``None`` means it does not remember that version (the stream then looks at every
    name, which gives the same responses, only slower). Nothing here raises.
    """

    def group_of(self, node: base_pb2.Node) -> str | None:
        """The group an Envoy belongs to; ``None``: refused."""
        ...

    def set_routing(self, routing: NodeRouting) -> None:
        """Follow ``routing`` from now on."""
        ...

    def snapshot(self, group: str) -> Snapshot | None:
        """The group's current snapshot."""
        ...

    def set_snapshot(self, group: str, snapshot: Snapshot) -> bool:
        """Publish; ``True`` when the version changed (and subscribers were called)."""
        ...

    def subscribe(self, group: str, callback: Callable[[], None]) -> Unsubscribe:
        """Be called on every change of the group's snapshot."""
        ...

    def changed_names(
        self, old_version: str, resources: ResourceSet[Message]
    ) -> frozenset[str] | None:
        """Names that differ from ``old_version`` to ``resources``; ``None``: not known."""
        ...
