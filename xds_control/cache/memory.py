"""The in-process snapshot cache: every replica computes its own, so nothing is shared."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable

import structlog
from envoy.config.core.v3 import base_pb2

from xds_control.cache.protocol import Unsubscribe
from xds_control.xds import Snapshot

__all__ = ["DEFAULT_GROUP", "MemorySnapshotCache"]

DEFAULT_GROUP = "default"
log = structlog.get_logger(__name__)


class MemorySnapshotCache:
    """Snapshots keyed by node group. Today every node is in ``DEFAULT_GROUP``; groups by
    ``node.cluster`` come with per-group config."""

    def __init__(self) -> None:
        self._snapshots: dict[str, Snapshot] = {}
        self._subscribers: defaultdict[str, set[Callable[[], None]]] = defaultdict(set)

    def group_of(self, node: base_pb2.Node) -> str:
        """Every node gets the default group's snapshot."""
        return DEFAULT_GROUP

    def snapshot(self, group: str) -> Snapshot | None:
        """The group's current snapshot, if any was published."""
        return self._snapshots.get(group)

    def set_snapshot(self, group: str, snapshot: Snapshot) -> bool:
        """Publish ``snapshot``; subscribers hear of it only when the version changed."""
        current = self._snapshots.get(group)
        if current is not None and current.version == snapshot.version:
            return False
        self._snapshots[group] = snapshot
        log.info("snapshot published", group=group, version=snapshot.version)
        for callback in list(self._subscribers[group]):
            callback()
        return True

    def subscribe(self, group: str, callback: Callable[[], None]) -> Unsubscribe:
        """Call ``callback`` after each change of ``group``'s snapshot."""
        self._subscribers[group].add(callback)
        return lambda: self._subscribers[group].discard(callback)
