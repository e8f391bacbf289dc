"""Builders produce the Envoy resources the config describes; snapshots hash content."""

from __future__ import annotations

import pytest
from envoy.config.cluster.v3 import cluster_pb2
from envoy.config.endpoint.v3 import endpoint_pb2
from envoy.extensions.upstreams.http.v3 import http_protocol_options_pb2
from envoy.service.discovery.v3 import discovery_pb2

from xds_control.config import Config, parse_config
from xds_control.control import ReconcileInputs, reconcile_once
from xds_control.discovery import Endpoint, Health, to_endpoints
from xds_control.errors import SnapshotError
from xds_control.xds import (
    EndpointWeight,
    build_cluster,
    build_listener,
    build_load_assignment,
    build_route_configuration,
    build_snapshot,
)
from xds_control.xds import type_urls as urls

CONFIG = """
model_header: x-model
pools:
  - name: chat
    protocol: http2
    lb: {hash_balance_factor: 150, maglev_table_size: 5003}
    outlier_detection: {consecutive_5xx: 3}
    endpoints:
      - {address: 10.0.0.2:8000, weight: 30}
      - {address: 10.0.0.1:8000, weight: 10}
  - name: batch
    lb: {policy: least_request, active_request_bias: 0.25}
    endpoints: [{address: 10.0.0.3:8000}]
listeners:
  - name: gateway
    address: 0.0.0.0:10000
    routes:
      - name: llama
        pool: chat
        match:
          prefix: /v1/
          model: llama-3-8b
          headers: [{name: x-tier, regex: "gold|silver"}]
        retry: {num_retries: 2}
        hash_policy: [{header: x-session-id}, {source_ip: true}]
      - {name: rest, pool: batch, timeout_s: 0}
"""


@pytest.fixture
def config() -> Config:
    return parse_config(text=CONFIG)


def endpoints_of(config: Config) -> dict[str, tuple[Endpoint, ...]]:
    return {pool.name: to_endpoints(pool.endpoints) for pool in config.pools}


def test_maglev_cluster(config: Config) -> None:
    cluster = build_cluster(config.pools[0])
    assert cluster.type == cluster_pb2.Cluster.DiscoveryType.EDS
    assert cluster.eds_cluster_config.eds_config.HasField("ads")
    assert cluster.lb_policy == cluster_pb2.Cluster.LbPolicy.MAGLEV
    assert cluster.maglev_lb_config.table_size.value == 5003
    assert cluster.common_lb_config.consistent_hashing_lb_config.hash_balance_factor.value == 150
    assert cluster.outlier_detection.consecutive_5xx.value == 3
    options = cluster.typed_extension_protocol_options[
        "envoy.extensions.upstreams.http.v3.HttpProtocolOptions"
    ]
    unpacked = http_protocol_options_pb2.HttpProtocolOptions()
    assert options.Unpack(unpacked)
    assert unpacked.explicit_http_config.HasField("http2_protocol_options")


def test_least_request_cluster(config: Config) -> None:
    cluster = build_cluster(config.pools[1])
    assert cluster.lb_policy == cluster_pb2.Cluster.LbPolicy.LEAST_REQUEST
    assert not cluster.HasField("maglev_lb_config")
    bias = cluster.least_request_lb_config.active_request_bias
    assert bias.default_value == 0.25
    assert bias.runtime_key  # Envoy rejects a RuntimeDouble without one


def test_round_robin_cluster() -> None:
    pool = parse_config(text=CONFIG.replace("policy: least_request", "policy: round_robin")).pools[
        1
    ]
    assert build_cluster(pool).lb_policy == cluster_pb2.Cluster.LbPolicy.ROUND_ROBIN


def test_load_assignment_weights_in_address_order(config: Config) -> None:
    snapshot = reconcile_once(ReconcileInputs(config=config, endpoints=endpoints_of(config)))
    cla = snapshot.resource_set(urls.ENDPOINT).resources["chat"].message
    assert isinstance(cla, endpoint_pb2.ClusterLoadAssignment)
    rows = [
        (e.endpoint.address.socket_address.address, e.load_balancing_weight.value)
        for e in cla.endpoints[0].lb_endpoints
    ]
    assert rows == [("10.0.0.1", 10), ("10.0.0.2", 30)]


def test_engine_weights_and_health_override_static(config: Config) -> None:
    weights = {"10.0.0.1:8000": EndpointWeight(77, Health.DRAINING)}
    snapshot = reconcile_once(
        ReconcileInputs(config=config, endpoints=endpoints_of(config), weights=weights)
    )
    cla = snapshot.resource_set(urls.ENDPOINT).resources["chat"].message
    assert isinstance(cla, endpoint_pb2.ClusterLoadAssignment)
    first = cla.endpoints[0].lb_endpoints[0]
    assert first.load_balancing_weight.value == 77
    assert first.health_status == 3  # DRAINING


def test_routes_match_model_headers_and_hash_chain(config: Config) -> None:
    table = build_route_configuration(config.listeners[0], model_header="x-model")
    llama, rest = table.virtual_hosts[0].routes
    assert llama.match.prefix == "/v1/"
    headers = {h.name: h for h in llama.match.headers}
    assert headers["x-model"].string_match.exact == "llama-3-8b"
    assert headers["x-tier"].string_match.safe_regex.regex == "gold|silver"
    hashes = llama.route.hash_policy
    assert hashes[0].header.header_name == "x-session-id"
    assert hashes[0].terminal  # present -> decides; absent -> fall back
    assert hashes[1].connection_properties.source_ip
    assert not hashes[1].terminal
    assert llama.route.retry_policy.num_retries.value == 2
    assert rest.route.cluster == "batch"
    assert rest.route.timeout.seconds == 0


def test_listener_uses_rds_over_ads(config: Config) -> None:
    from envoy.extensions.filters.network.http_connection_manager.v3 import (
        http_connection_manager_pb2 as hcm,
    )

    listener = build_listener(config.listeners[0])
    assert listener.address.socket_address.port_value == 10000
    (network_filter,) = listener.filter_chains[0].filters
    assert network_filter.name == "envoy.filters.network.http_connection_manager"
    manager = hcm.HttpConnectionManager()
    assert network_filter.typed_config.Unpack(manager)
    # Routes come by RDS over the same ADS stream, never inline or from another server.
    assert manager.WhichOneof("route_specifier") == "rds"
    assert manager.rds.config_source.WhichOneof("config_source_specifier") == "ads"
    # ... and name a route configuration the snapshot actually serves.
    snapshot = reconcile_once(ReconcileInputs(config=config, endpoints=endpoints_of(config)))
    served = snapshot.resource_set(urls.ROUTE).resources
    assert list(served) == [manager.rds.route_config_name]


def test_versions_are_content_hashes(config: Config) -> None:
    endpoints = endpoints_of(config)
    one = reconcile_once(ReconcileInputs(config=config, endpoints=endpoints))
    two = reconcile_once(ReconcileInputs(config=config, endpoints=endpoints))
    assert one.version == two.version
    changed = reconcile_once(
        ReconcileInputs(
            config=config, endpoints=endpoints, weights={"10.0.0.1:8000": EndpointWeight(11)}
        )
    )
    assert changed.version != one.version
    # Only the endpoint type changed.
    for type_url in urls.ORDER:
        same = one.resource_set(type_url).version == changed.resource_set(type_url).version
        assert same == (type_url != urls.ENDPOINT)


def test_prepared_response_parses_with_nonce(config: Config) -> None:
    snapshot = reconcile_once(ReconcileInputs(config=config, endpoints=endpoints_of(config)))
    rs = snapshot.resource_set(urls.CLUSTER)
    raw = rs.response(names=sorted(rs.resources), nonce="42")
    response = discovery_pb2.DiscoveryResponse.FromString(raw)
    assert response.nonce == "42"
    assert response.version_info == rs.version
    assert response.type_url == urls.CLUSTER
    assert response.control_plane.identifier.startswith("xds-control/")
    names = []
    for item in response.resources:
        cluster = cluster_pb2.Cluster()
        assert item.Unpack(cluster)
        names.append(cluster.name)
    assert names == ["batch", "chat"]


def test_inconsistent_snapshot_is_refused(config: Config) -> None:
    with pytest.raises(SnapshotError, match="has no ClusterLoadAssignment"):
        build_snapshot(
            clusters=[build_cluster(config.pools[0])],
            load_assignments=[],
            listeners=[],
            route_configs=[],
        )
    with pytest.raises(SnapshotError, match="referenced but missing"):
        build_snapshot(
            clusters=[],
            load_assignments=[],
            listeners=[build_listener(config.listeners[0])],
            route_configs=[],
        )
    with pytest.raises(SnapshotError, match="two EDS resources"):
        build_snapshot(
            clusters=[build_cluster(config.pools[0])],
            load_assignments=[build_load_assignment(cluster="chat", endpoints=[], weights={})] * 2,
            listeners=[],
            route_configs=[],
        )
