"""gateways: where each node group's whole Envoy fleet is counted, one source each, and with
node groups given per group, never at the root."""

from __future__ import annotations

import pytest

from xds_control.config import gateway_fleets, parse_config
from xds_control.errors import ConfigError

BASE = """
pools:
  - {name: chat, endpoints: [{address: 127.0.0.1:8001}]}
listeners:
  - name: edge
    address: 0.0.0.0:10000
    routes: [{name: chat, pool: chat}]
"""


def problems(text: str) -> list[tuple[str, str]]:
    with pytest.raises(ConfigError) as info:
        parse_config(text=BASE + text, source="test.yaml")
    return info.value.problems


def test_the_default_group_counts_its_fleet_from_the_gateway_service() -> None:
    config = parse_config(
        text=BASE + "gateways: {kubernetes: {namespace: edge, service: envoy, port: http}}\n"
    )
    fleet = gateway_fleets(config)["default"]
    assert fleet.kubernetes is not None
    assert (fleet.kubernetes.namespace, fleet.kubernetes.service) == ("edge", "envoy")
    assert gateway_fleets(parse_config(text=BASE)) == {}


def test_each_node_group_gives_its_own_and_the_root_is_refused_beside_them() -> None:
    groups = """
node_groups:
  - {name: edge, listeners: [edge], gateways: {count: 3}}
  - {name: team, pools: [chat]}
"""
    config = parse_config(text=BASE + groups)
    assert {g: f.count for g, f in gateway_fleets(config).items()} == {"edge": 3}
    found = problems(groups + "gateways: {count: 2}\n")
    assert [path for path, _ in found] == ["gateways"]
    assert "node_groups[].gateways" in found[0][1]


@pytest.mark.parametrize(
    "fleet",
    ["{}", "{count: 2, dns: {hosts: ['envoy.edge:10000']}}", "{count: 0}"],
)
def test_a_fleet_with_no_source_two_or_a_bad_count_names_the_field(fleet: str) -> None:
    found = problems(f"gateways: {fleet}\n")
    assert found, fleet
    assert all(path.startswith("gateways") for path, _ in found), found
