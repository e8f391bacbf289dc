"""node_groups: a config that names what does not exist is rejected, naming the field."""

from __future__ import annotations

import pytest

from xds_control.config import DefaultGroup, parse_config
from xds_control.errors import ConfigError

BASE = """
pools:
  - {name: chat, endpoints: [{address: 127.0.0.1:8001}]}
  - {name: code, endpoints: [{address: 127.0.0.1:8002}]}
  - {name: batch, endpoints: [{address: 127.0.0.1:8003}]}
listeners:
  - name: edge
    address: 0.0.0.0:10000
    routes: [{name: chat, pool: chat}, {name: code, pool: code}]
  - name: team
    address: 0.0.0.0:10001
    routes: [{name: code, pool: code}]
"""


def problems(text: str) -> list[tuple[str, str]]:
    with pytest.raises(ConfigError) as info:
        parse_config(text=BASE + text, source="test.yaml")
    return info.value.problems


def test_groups_parse_and_unknown_nodes_default_to_refuse() -> None:
    config = parse_config(
        text=BASE
        + """
node_groups:
  - {name: edge, match: {cluster: gateway}, listeners: [edge]}
  - {name: team, match: {id: "team-*", metadata: {team: code}}, listeners: [team], pools: [batch]}
"""
    )
    assert [g.name for g in config.node_groups] == ["edge", "team"]
    assert config.unknown_nodes == "refuse"
    team = config.node_groups[1]
    assert team.pool_names(config.listeners) == {"code", "batch"}


def test_unknown_nodes_may_name_a_group() -> None:
    config = parse_config(
        text=BASE
        + """
node_groups: [{name: edge, listeners: [edge]}]
unknown_nodes: {group: edge}
"""
    )
    assert config.unknown_nodes == DefaultGroup(group="edge")


def test_a_group_naming_a_missing_listener_or_pool_names_the_field() -> None:
    found = problems(
        """
node_groups:
  - {name: edge, listeners: [edge, nope]}
  - {name: team, pools: [batch, gone]}
"""
    )
    assert ("node_groups[0].listeners[1]", "no listener named 'nope' (edge, team)") in found
    assert ("node_groups[1].pools[1]", "no pool named 'gone' (batch, chat, code)") in found


def test_duplicate_empty_and_unknown_default_groups_are_rejected() -> None:
    found = problems(
        """
node_groups:
  - {name: edge, listeners: [edge]}
  - {name: edge, listeners: [team]}
  - {name: idle}
unknown_nodes: {group: other}
"""
    )
    paths = {path for path, _ in found}
    assert paths == {"node_groups[1].name", "node_groups[2]", "unknown_nodes.group"}


def test_bad_group_names_and_match_fields_are_rejected() -> None:
    found = problems(
        """
node_groups:
  - {name: Edge, listeners: [edge], match: {clusterr: x}}
unknown_nodes: allow
"""
    )
    paths = {path for path, _ in found}
    assert "node_groups[0].name" in paths
    assert "node_groups[0].match.clusterr" in paths
    assert any(path.startswith("unknown_nodes") for path in paths)
