"""Cache: the current snapshot per node group, and who to tell when it changes."""

from xds_control.cache.groups import NodeRouting, group_names
from xds_control.cache.memory import DEFAULT_GROUP, MemorySnapshotCache
from xds_control.cache.protocol import ChangedNames, SnapshotCache, Unsubscribe

__all__ = [
    "DEFAULT_GROUP",
    "ChangedNames",
    "MemorySnapshotCache",
    "NodeRouting",
    "SnapshotCache",
    "Unsubscribe",
    "group_names",
]
