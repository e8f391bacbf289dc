"""Which node group an Envoy belongs to: a pure function of its node and the config."""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass

from envoy.config.core.v3 import base_pb2

from xds_control.config import (
    DEFAULT_GROUP,
    Config,
    DefaultGroup,
    NodeGroup,
    NodeMatch,
    group_names,
)

__all__ = ["NodeRouting", "group_names", "matches"]


def matches(match: NodeMatch, node: base_pb2.Node) -> bool:
    """Every condition ``match`` gives holds for ``node`` (none given: true)."""
    if match.cluster is not None and node.cluster != match.cluster:
        return False
    if match.id is not None and not fnmatch.fnmatchcase(node.id, match.id):
        return False
    fields = node.metadata.fields
    for key, want in match.metadata.items():
        value = fields.get(key)
        if value is None or value.WhichOneof("kind") != "string_value":
            return False
        if value.string_value != want:
            return False
    return True


@dataclass(frozen=True, slots=True)
class NodeRouting:
    """Node -> group: the first group whose match holds wins; a node that matches none gets
    ``unknown`` (``None``: refused). With no groups, every node is in ``DEFAULT_GROUP``."""

    groups: tuple[NodeGroup, ...] = ()
    unknown: str | None = DEFAULT_GROUP

    @classmethod
    def of(cls, config: Config) -> NodeRouting:
        """The routing ``config``'s ``node_groups`` and ``unknown_nodes`` describe."""
        if not config.node_groups:
            return cls()
        unknown = config.unknown_nodes
        return cls(
            groups=config.node_groups,
            unknown=unknown.group if isinstance(unknown, DefaultGroup) else None,
        )

    def matching(self, node: base_pb2.Node) -> str | None:
        """The first group whose match holds for ``node``; ``None`` if none does."""
        if not self.groups:
            return DEFAULT_GROUP
        return next((g.name for g in self.groups if matches(g.match, node)), None)

    def group_of(self, node: base_pb2.Node) -> str | None:
        """The group of ``node``, or ``None`` when it matches no group and unknown nodes are
        refused."""
        group = self.matching(node)
        return self.unknown if group is None else group
