"""The in-process snapshot cache: every replica computes its own, so nothing is shared."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable

import structlog
from envoy.config.core.v3 import base_pb2
from google.protobuf.message import Message

from xds_control.cache.diffs import VersionDiffs
from xds_control.cache.groups import NodeRouting
from xds_control.cache.protocol import Unsubscribe
from xds_control.config import DEFAULT_GROUP
from xds_control.xds import ResourceSet, Snapshot

__all__ = ["DEFAULT_GROUP", "MemorySnapshotCache"]

log = structlog.get_logger(__name__)


class MemorySnapshotCache:
    """Snapshots keyed by node group; ``routing`` says which group a node is in (by default
    every node is in ``DEFAULT_GROUP``). The control loop replaces the routing with each
    config. Each published version's digests go to ``VersionDiffs``, shared by every group
    (versions are content hashes: two groups' equal sets are one version)."""

    def __init__(self, *, routing: NodeRouting | None = None) -> None:
        self._snapshots: dict[str, Snapshot] = {}
        self._subscribers: defaultdict[str, set[Callable[[], None]]] = defaultdict(set)
        self._routing = routing or NodeRouting()
        self._diffs = VersionDiffs()

    def set_routing(self, routing: NodeRouting) -> None:
        """Use ``routing`` for nodes that connect from now on; connected streams keep their
        group until they reconnect."""
        self._routing = routing

    def group_of(self, node: base_pb2.Node) -> str | None:
        """The node's group, or ``None`` when it is refused; either way for a node that matches
        no group, a log line says which node and what it got."""
        routing = self._routing
        group = routing.matching(node)
        if group is not None:
            return group
        if routing.unknown is None:
            log.warning(
                "node matches no node group; refused",
                node_id=node.id,
                node_cluster=node.cluster,
            )
            return None
        log.info(
            "node matches no node group; given the default group",
            node_id=node.id,
            node_cluster=node.cluster,
            group=routing.unknown,
        )
        return routing.unknown

    def snapshot(self, group: str) -> Snapshot | None:
        """The group's current snapshot, if any was published."""
        return self._snapshots.get(group)

    def set_snapshot(self, group: str, snapshot: Snapshot) -> bool:
        """Publish ``snapshot``; subscribers hear of it only when the version changed."""
        current = self._snapshots.get(group)
        if current is not None and current.version == snapshot.version:
            return False
        self._snapshots[group] = snapshot
        for resources in snapshot.types.values():
            self._diffs.remember(resources)
        log.info("snapshot published", group=group, version=snapshot.version)
        for callback in list(self._subscribers[group]):
            callback()
        return True

    def subscribe(self, group: str, callback: Callable[[], None]) -> Unsubscribe:
        """Call ``callback`` after each change of ``group``'s snapshot."""
        self._subscribers[group].add(callback)
        return lambda: self._subscribers[group].discard(callback)

    def changed_names(
        self, old_version: str, resources: ResourceSet[Message]
    ) -> frozenset[str] | None:
        """Names that differ from ``old_version`` (published here) to ``resources``; ``None``
        when that version is no longer remembered (``diffs.KEEP``)."""
        return self._diffs.changed_names(old_version, resources)
