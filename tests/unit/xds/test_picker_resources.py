"""Pools with a picker compile to override_host clusters with the pool's policy as fallback,
an ext_proc filter that fails open, and per-route settings; other configs compile as before.
(Envoy accepts all of it: tests/e2e/test_picker.py.)"""

from __future__ import annotations

import yaml
from envoy.config.cluster.v3 import cluster_pb2
from envoy.config.route.v3 import route_components_pb2 as rc
from envoy.config.route.v3 import route_pb2
from envoy.extensions.filters.http.ext_proc.v3 import ext_proc_pb2, processing_mode_pb2
from envoy.extensions.filters.http.header_to_metadata.v3 import header_to_metadata_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm,
)
from envoy.extensions.load_balancing_policies.maglev.v3 import maglev_pb2
from envoy.extensions.load_balancing_policies.override_host.v3 import override_host_pb2
from google.protobuf import any_pb2

from xds_control.config import Config, parse_config
from xds_control.control import ReconcileInputs, reconcile_once
from xds_control.xds.picker import PICKER_FILTER, SERVED_FILTER, picker_cluster_name


def _config(*, picker: bool) -> Config:
    chat: dict[str, object] = {
        "name": "chat",
        "endpoints": [{"address": "10.0.0.1:8000"}],
        "lb": {"policy": "maglev", "maglev_table_size": 65537},
    }
    if picker:
        chat["picker"] = {"address": "127.0.0.1:9100", "message_timeout_ms": 40}
    other = {"name": "other", "endpoints": [{"address": "10.0.0.2:8000"}]}
    routes = [
        {"name": "o", "pool": "other", "match": {"prefix": "/other"}},
        {"name": "c", "pool": "chat"},
    ]
    listener = {"name": "gw", "address": "127.0.0.1:10000", "routes": routes}
    return parse_config(text=yaml.safe_dump({"pools": [chat, other], "listeners": [listener]}))


def _table(config: Config) -> route_pb2.RouteConfiguration:
    snapshot = reconcile_once(ReconcileInputs(config=config, endpoints={}))
    [table] = [p.message for p in snapshot.route_configs.resources.values()]
    return table


def _resources(
    config: Config,
) -> tuple[dict[str, cluster_pb2.Cluster], hcm.HttpConnectionManager, dict[str, rc.Route]]:
    snapshot = reconcile_once(ReconcileInputs(config=config, endpoints={}))
    clusters = {p.name: p.message for p in snapshot.clusters.resources.values()}
    [listener] = [p.message for p in snapshot.listeners.resources.values()]
    manager = hcm.HttpConnectionManager()
    listener.filter_chains[0].filters[0].typed_config.Unpack(manager)
    routes = {r.name: r for r in _table(config).virtual_hosts[0].routes}
    return clusters, manager, routes


def test_picker_pool_balances_by_override_host_with_its_maglev_as_fallback() -> None:
    clusters, _, _ = _resources(_config(picker=True))
    chat = clusters["chat"]
    assert not chat.HasField("maglev_lb_config")
    [policy] = chat.load_balancing_policy.policies
    override = override_host_pb2.OverrideHost()
    policy.typed_extension_config.typed_config.Unpack(override)
    [source] = override.override_host_sources
    assert (source.metadata.key, source.metadata.path[0].key) == (
        "envoy.lb",
        "x-gateway-destination-endpoint",
    )
    [fallback] = override.fallback_policy.policies
    maglev = maglev_pb2.Maglev()
    fallback.typed_extension_config.typed_config.Unpack(maglev)
    assert maglev.table_size.value == 65537
    # Bounded: with the picker dead the weights are frozen; only the bound reacts to load.
    assert maglev.consistent_hashing_lb_config.hash_balance_factor.value == 150
    assert clusters["other"].lb_policy == cluster_pb2.Cluster.LbPolicy.MAGLEV
    picker = clusters[picker_cluster_name("127.0.0.1:9100")]
    assert picker.type == cluster_pb2.Cluster.DiscoveryType.STATIC


def test_the_filter_fails_open_and_runs_only_on_picker_routes() -> None:
    _, manager, routes = _resources(_config(picker=True))
    names = [f.name for f in manager.http_filters]
    assert names[-3:] == [PICKER_FILTER, SERVED_FILTER, "envoy.filters.http.router"]
    processor = ext_proc_pb2.ExternalProcessor()
    manager.http_filters[-3].typed_config.Unpack(processor)
    assert processor.failure_mode_allow
    assert processor.message_timeout.ToMilliseconds() == 40
    mode = processing_mode_pb2.ProcessingMode
    assert processor.processing_mode.request_header_mode == mode.SEND
    assert processor.processing_mode.request_body_mode == mode.BUFFERED_PARTIAL
    # The response's headers go too, with the endpoint that served in envoy.lb.
    assert processor.processing_mode.response_header_mode == mode.SEND
    assert processor.processing_mode.response_body_mode == mode.NONE
    assert list(processor.metadata_options.forwarding_namespaces.untyped) == ["envoy.lb"]
    rule = header_to_metadata_pb2.Config()
    manager.http_filters[-2].typed_config.Unpack(rule)
    [served] = rule.response_rules
    assert (served.header, served.remove) == ("x-gateway-destination-endpoint-served", True)
    assert served.on_header_present.metadata_namespace == "envoy.lb"
    [added] = _table(_config(picker=True)).response_headers_to_add
    assert (added.header.key, added.header.value) == (served.header, "%UPSTREAM_REMOTE_ADDRESS%")

    chat, other = ext_proc_pb2.ExtProcPerRoute(), ext_proc_pb2.ExtProcPerRoute()
    routes["c"].typed_per_filter_config[PICKER_FILTER].Unpack(chat)
    routes["o"].typed_per_filter_config[PICKER_FILTER].Unpack(other)
    assert other.disabled
    [metadata] = chat.overrides.grpc_initial_metadata
    assert (metadata.key, metadata.value) == ("x-xds-control-pool", "chat")
    assert not chat.overrides.HasField("failure_mode_allow")  # the filter's: fail open


def test_a_pool_that_fails_closed_turns_failing_open_off_on_its_own_routes_only() -> None:
    data = yaml.safe_load(_config(picker=True).model_dump_json(exclude_defaults=True))
    data["pools"][0]["picker"]["fail_open"] = False
    _, manager, routes = _resources(Config.model_validate(data))
    processor = ext_proc_pb2.ExternalProcessor()
    manager.http_filters[-3].typed_config.Unpack(processor)
    assert processor.failure_mode_allow  # the listener's other pools still fail open
    chat = ext_proc_pb2.ExtProcPerRoute()
    routes["c"].typed_per_filter_config[PICKER_FILTER].Unpack(chat)
    assert chat.overrides.HasField("failure_mode_allow")
    assert not chat.overrides.failure_mode_allow.value


def test_without_pickers_nothing_changes() -> None:
    clusters, manager, routes = _resources(_config(picker=False))
    assert set(clusters) == {"chat", "other"}
    assert PICKER_FILTER not in [f.name for f in manager.http_filters]
    assert SERVED_FILTER not in [f.name for f in manager.http_filters]
    assert all(not r.typed_per_filter_config for r in routes.values())
    assert not _table(_config(picker=False)).response_headers_to_add


def test_behind_the_classifier_and_limits_every_class_route_asks_the_picker() -> None:
    data = yaml.safe_load(_config(picker=True).model_dump_json(exclude_defaults=True))
    data["listeners"][0]["classify"] = {}
    data["listeners"][0]["limits"] = {"classes": {"medium": {"rate_per_s": 10}}}
    _, manager, routes = _resources(Config.model_validate(data))
    assert [f.name for f in manager.http_filters] == [
        "envoy.filters.http.lua",
        "envoy.filters.http.local_ratelimit",
        PICKER_FILTER,
        SERVED_FILTER,
        "envoy.filters.http.router",
    ]
    for name, route in routes.items():
        settings = ext_proc_pb2.ExtProcPerRoute()
        route.typed_per_filter_config[PICKER_FILTER].Unpack(settings)
        assert settings.disabled == name.startswith("o/"), name


def test_a_route_over_several_pools_asks_the_chosen_pools_picker() -> None:
    data = yaml.safe_load(_config(picker=True).model_dump_json(exclude_defaults=True))
    split = {"name": "s", "pools": [{"name": "chat", "weight": 3}, {"name": "other"}]}
    data["listeners"][0]["routes"] = [split]
    _, manager, routes = _resources(Config.model_validate(data))
    assert PICKER_FILTER in [f.name for f in manager.http_filters]
    route = ext_proc_pb2.ExtProcPerRoute()
    routes["s"].typed_per_filter_config[PICKER_FILTER].Unpack(route)
    assert route.disabled  # unless the chosen cluster says otherwise
    chat, other = routes["s"].route.weighted_clusters.clusters
    settings = {}
    for cluster in (chat, other):
        settings[cluster.name] = ext_proc_pb2.ExtProcPerRoute()
        cluster.typed_per_filter_config[PICKER_FILTER].Unpack(settings[cluster.name])
    [metadata] = settings["chat"].overrides.grpc_initial_metadata
    assert (metadata.key, metadata.value) == ("x-xds-control-pool", "chat")
    assert settings["other"].disabled


def _metadata(config: any_pb2.Any) -> dict[str, str]:
    settings = ext_proc_pb2.ExtProcPerRoute()
    config.Unpack(settings)
    return {m.key: m.value for m in settings.overrides.grpc_initial_metadata}


def test_a_route_s_priority_class_goes_to_the_picker_as_the_band_of_requests_naming_none() -> None:
    data = yaml.safe_load(_config(picker=True).model_dump_json(exclude_defaults=True))
    routes = data["listeners"][0]["routes"]
    routes[1]["priority"] = "critical"
    split = {"name": "s", "pools": [{"name": "chat"}, {"name": "other"}], "priority": "high"}
    routes.insert(0, {**split, "match": {"prefix": "/split"}})
    _, _, found = _resources(Config.model_validate(data))
    pool = {"x-xds-control-pool": "chat"}
    assert _metadata(found["c"].typed_per_filter_config[PICKER_FILTER]) == {
        **pool,
        "x-xds-control-band": "critical",
    }
    chat, _ = found["s"].route.weighted_clusters.clusters
    assert _metadata(chat.typed_per_filter_config[PICKER_FILTER]) == {
        **pool,
        "x-xds-control-band": "high",
    }
    # Without its own, a route has the listener's default class, on each of its class routes;
    # without limits either, it says none (the picker takes medium).
    del routes[2]["priority"]
    data["listeners"][0]["limits"] = {"default": "high", "classes": {"medium": {"rate_per_s": 1}}}
    _, _, found = _resources(Config.model_validate(data))
    for name in ("c/critical", "c/high", "c/medium"):
        settings = found[name].typed_per_filter_config[PICKER_FILTER]
        assert _metadata(settings) == {**pool, "x-xds-control-band": "high"}, name
    del data["listeners"][0]["limits"]
    _, _, found = _resources(Config.model_validate(data))
    assert _metadata(found["c"].typed_per_filter_config[PICKER_FILTER]) == pool


def test_behind_a_service_envoy_dials_its_name_and_replicas_serve_alike() -> None:
    def served(listen: str) -> tuple[dict[str, cluster_pb2.Cluster], hcm.HttpConnectionManager]:
        config = _config(picker=True)
        chat = config.pool("chat")
        assert chat.picker is not None
        picker = chat.picker.model_copy(
            update={"address": listen, "envoy_address": "xds-control.llm.svc:9100"}
        )
        pools = (chat.model_copy(update={"picker": picker}), config.pool("other"))
        clusters, manager, _ = _resources(config.model_copy(update={"pools": pools}))
        return clusters, manager

    # Two replicas listen on their own addresses; Envoy gets the same resources from both.
    first, second = served("0.0.0.0:9100"), served("10.1.2.3:9100")
    assert first[0] == second[0]
    assert first[1] == second[1]
    picker = first[0][picker_cluster_name("xds-control.llm.svc:9100")]
    assert picker.type == cluster_pb2.Cluster.DiscoveryType.STRICT_DNS
    host = picker.load_assignment.endpoints[0].lb_endpoints[0].endpoint.address.socket_address
    assert (host.address, host.port_value) == ("xds-control.llm.svc", 9100)
    [ext_filter] = [f for f in first[1].http_filters if f.name == PICKER_FILTER]
    processor = ext_proc_pb2.ExternalProcessor()
    ext_filter.typed_config.Unpack(processor)
    assert processor.grpc_service.envoy_grpc.cluster_name == picker.name
