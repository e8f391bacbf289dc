"""reconcile_groups: one consistent snapshot per group, and today's snapshot without groups."""

from __future__ import annotations

from xds_control.config import DEFAULT_GROUP, Config, parse_config
from xds_control.control import ReconcileInputs, fleet_version, reconcile_groups, reconcile_once
from xds_control.discovery import Endpoint, to_endpoints

POOLS_AND_LISTENERS = """
pools:
  - {name: chat, endpoints: [{address: 127.0.0.1:8001}]}
  - {name: code, endpoints: [{address: 127.0.0.1:8002}]}
  - {name: batch, endpoints: [{address: 127.0.0.1:8003}]}
listeners:
  - name: edge
    address: 0.0.0.0:10000
    routes: [{name: chat, pool: chat}, {name: code, pool: code}]
  - {name: team, address: 0.0.0.0:10001, routes: [{name: code, pool: code}]}
"""
GROUPS = """
node_groups:
  - {name: edge, match: {cluster: gateway}, listeners: [edge]}
  - {name: team, match: {cluster: team}, listeners: [team], pools: [batch]}
"""


def endpoints_of(config: Config) -> dict[str, tuple[Endpoint, ...]]:
    return {pool.name: to_endpoints(pool.endpoints) for pool in config.pools}


def test_without_groups_one_default_group_with_reconcile_onces_version() -> None:
    config = parse_config(text=POOLS_AND_LISTENERS)
    snapshots = reconcile_groups(ReconcileInputs(config=config, endpoints=endpoints_of(config)))
    alone = reconcile_once(ReconcileInputs(config=config, endpoints=endpoints_of(config)))
    assert list(snapshots) == [DEFAULT_GROUP]
    assert snapshots[DEFAULT_GROUP].version == alone.version
    assert fleet_version(snapshots) == alone.version


def test_each_group_gets_its_listeners_and_the_pools_they_route_to() -> None:
    config = parse_config(text=POOLS_AND_LISTENERS + GROUPS)
    snapshots = reconcile_groups(ReconcileInputs(config=config, endpoints=endpoints_of(config)))
    edge, team = snapshots["edge"], snapshots["team"]
    assert set(edge.listeners.resources) == {"edge"}
    assert set(edge.clusters.resources) == {"chat", "code"}
    assert set(team.listeners.resources) == {"team"}
    assert set(team.clusters.resources) == {"code", "batch"}
    assert set(team.load_assignments.resources) == {"code", "batch"}
    assert edge.version != team.version


def test_a_group_version_is_a_content_hash_of_that_group_only() -> None:
    config = parse_config(text=POOLS_AND_LISTENERS + GROUPS)
    before = reconcile_groups(ReconcileInputs(config=config, endpoints=endpoints_of(config)))
    moved = endpoints_of(config)
    moved["chat"] = (Endpoint(address="127.0.0.1:9001", host="127.0.0.1", port=9001, weight=10),)
    after = reconcile_groups(ReconcileInputs(config=config, endpoints=moved))
    assert after["edge"].version != before["edge"].version  # edge serves chat
    assert after["team"].version == before["team"].version  # team does not
    again = reconcile_groups(ReconcileInputs(config=config, endpoints=moved))
    assert {g: s.version for g, s in again.items()} == {g: s.version for g, s in after.items()}
    assert fleet_version(after) != fleet_version(before)
