"""Node -> group: first match wins; unknown nodes get the default group or are refused."""

from __future__ import annotations

from envoy.config.core.v3 import base_pb2
from google.protobuf import struct_pb2

from xds_control.cache import DEFAULT_GROUP, MemorySnapshotCache, NodeRouting, group_names
from xds_control.config import parse_config

CONFIG = """
pools:
  - {name: chat, endpoints: [{address: 127.0.0.1:8001}]}
  - {name: code, endpoints: [{address: 127.0.0.1:8002}]}
listeners:
  - {name: edge, address: 0.0.0.0:10000, routes: [{name: chat, pool: chat}]}
  - {name: team, address: 0.0.0.0:10001, routes: [{name: code, pool: code}]}
node_groups:
  - {name: canary, match: {cluster: gateway, id: "gw-canary-*"}, listeners: [edge, team]}
  - {name: edge, match: {cluster: gateway}, listeners: [edge]}
  - {name: team, match: {metadata: {team: code, tier: "1"}}, listeners: [team]}
"""


def node(node_id: str, cluster: str = "", **metadata: str | float) -> base_pb2.Node:
    meta = struct_pb2.Struct()
    meta.update(metadata)
    return base_pb2.Node(id=node_id, cluster=cluster, metadata=meta)


def test_no_groups_puts_every_node_in_the_default_group() -> None:
    config = parse_config(text=CONFIG.split("node_groups:")[0])
    routing = NodeRouting.of(config)
    assert routing.group_of(node("anything", "any")) == DEFAULT_GROUP
    assert group_names(config) == (DEFAULT_GROUP,)
    assert MemorySnapshotCache().group_of(node("x")) == DEFAULT_GROUP


def test_first_matching_group_wins_in_config_order() -> None:
    routing = NodeRouting.of(parse_config(text=CONFIG))
    assert routing.group_of(node("gw-canary-1", "gateway")) == "canary"
    assert routing.group_of(node("gw-2", "gateway")) == "edge"
    assert routing.group_of(node("gw-canary-1", "other", team="code", tier="1")) == "team"


def test_metadata_must_be_equal_strings() -> None:
    routing = NodeRouting.of(parse_config(text=CONFIG + "unknown_nodes: {group: edge}\n"))
    assert routing.group_of(node("a", team="code", tier="1")) == "team"
    assert routing.group_of(node("a", team="code", tier=1)) == "edge"  # a number is not "1"
    assert routing.group_of(node("a", team="code")) == "edge"  # a field missing
    assert routing.group_of(node("a", team="Code", tier="1")) == "edge"


def test_glob_on_node_id_is_case_sensitive() -> None:
    routing = NodeRouting.of(parse_config(text=CONFIG))
    assert routing.group_of(node("GW-CANARY-1", "gateway")) == "edge"


def test_unknown_nodes_are_refused_by_default_and_defaulted_when_configured() -> None:
    refusing = MemorySnapshotCache(routing=NodeRouting.of(parse_config(text=CONFIG)))
    assert refusing.group_of(node("stranger", "elsewhere")) is None
    defaulting = MemorySnapshotCache()
    defaulting.set_routing(
        NodeRouting.of(parse_config(text=CONFIG + "unknown_nodes: {group: team}"))
    )
    assert defaulting.group_of(node("stranger", "elsewhere")) == "team"
