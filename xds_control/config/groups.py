"""Node groups: which pools, listeners and routes each Envoy gets, chosen by its node.

A fleet rarely runs one kind of Envoy: an edge gateway serves every model, a team's sidecar only
its own pools. A group names the listeners (with their routes) and the pools its Envoys get, and
says which nodes belong to it by node cluster, node id glob or node metadata. The first group
whose match holds wins, so order groups from the most specific to the catch-all.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Annotated, Literal

from pydantic import Field

from xds_control.config.gateways import GatewayFleet
from xds_control.config.model import NAME_PATTERN, Listener
from xds_control.config.strict import StrictModel

__all__ = ["DEFAULT_GROUP", "DefaultGroup", "NodeGroup", "NodeMatch", "UnknownNodes"]

DEFAULT_GROUP = "default"
"""The one group when no ``node_groups`` are configured: every node, the whole config."""

GroupName = Annotated[
    str,
    Field(
        pattern=NAME_PATTERN,
        description="Lower-case letters, digits, '.', '_' and '-'.",
    ),
]


class NodeMatch(StrictModel):
    """Which Envoys belong to a group: every condition given must hold; none given matches
    every node (a catch-all, useful last)."""

    cluster: str | None = Field(
        default=None,
        min_length=1,
        description="The node's cluster (Envoy's --service-cluster or bootstrap node.cluster), "
        "compared exactly; unset: any cluster.",
    )
    id: str | None = Field(
        default=None,
        min_length=1,
        description="Glob on the node id (`*`, `?`, `[abc]`; case-sensitive), e.g. "
        "`gateway-*`; unset: any id.",
    )
    metadata: dict[str, str] = Field(
        default_factory=dict,
        description="Node metadata fields that must be strings equal to these values (a field "
        "that is missing or not a string does not match); empty: no condition.",
    )


class NodeGroup(StrictModel):
    """What one kind of Envoy gets. A group's pools are the ones it lists plus every pool its
    listeners' routes send to (added by themselves: a route to a pool the Envoy lacks would
    answer 503, so listing them again would only be a way to get it wrong)."""

    name: GroupName
    match: NodeMatch = Field(
        default_factory=NodeMatch, description="Which nodes belong here; unset: every node."
    )
    listeners: tuple[str, ...] = Field(
        default=(), description="Names of the listeners (with their routes) this group gets."
    )
    pools: tuple[str, ...] = Field(
        default=(),
        description="Names of pools this group gets besides those its listeners route to "
        "(e.g. for an Envoy that reaches pools by cluster name, without our listeners).",
    )
    gateways: GatewayFleet | None = Field(
        default=None,
        description="This group's whole Envoy fleet, however many control-plane replicas it "
        "is spread over: each budget is divided by its size (at least the Envoys connected "
        "here). Unset: by the Envoys connected to this replica, right for one replica only.",
    )

    def pool_names(self, listeners: Iterable[Listener]) -> frozenset[str]:
        """The pools this group gets: its own list and every pool its ``listeners`` (the
        config's, by name) route to."""
        mine = set(self.listeners)
        routed = {
            name
            for lis in listeners
            if lis.name in mine
            for r in lis.routes
            for name in r.pool_names()
        }
        return frozenset(self.pools) | routed


class DefaultGroup(StrictModel):
    """Unknown nodes get this group's resources."""

    group: GroupName = Field(description="A group from `node_groups`.")


UnknownNodes = Literal["refuse"] | DefaultGroup
"""What a node that matches no group gets: refused (the stream ends with PERMISSION_DENIED),
or a named group."""
