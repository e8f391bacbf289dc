"""Classes compile to Envoy: the classifier filter sits before the router, body conditions
become matches on its headers in declared order, a route over pools becomes weighted
clusters, and retries go to another host."""

from __future__ import annotations

from envoy.extensions.filters.http.lua.v3 import lua_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm,
)

from xds_control.config import Config, parse_config
from xds_control.config.model import STREAMED_TRY_IDLE_S
from xds_control.xds import build_cluster, build_listener, build_route_configuration

CONFIG = """
model_header: X-Model
pools:
  - {name: long, endpoints: [{address: 127.0.0.1:8001}]}
  - {name: fast, endpoints: [{address: 127.0.0.1:8002}]}
listeners:
  - name: gateway
    address: 127.0.0.1:10000
    stream_idle_timeout_s: 600
    classify: {prompt_tokens_header: x-tokens}
    routes:
      - name: long-code
        pool: long
        match: {prompt_tokens: {min: 2000}, keywords: [Def]}
        retry: null
      - {name: chat, pool: fast, match: {stream: false, max_tokens: {max: 100}}}
      - name: split
        pools: [{name: long, weight: 3}, {name: fast}]
        idle_timeout_s: 30
        retry: {}
      - {name: default, pool: fast, retry: {other_host: false}}
"""


def _config() -> Config:
    return parse_config(text=CONFIG)


def _manager(config: Config) -> hcm.HttpConnectionManager:
    listener = build_listener(config.listeners[0], model_header=config.model_header)
    manager = hcm.HttpConnectionManager()
    assert listener.filter_chains[0].filters[0].typed_config.Unpack(manager)
    return manager


def test_the_classifier_runs_before_the_router_with_the_listener_settings() -> None:
    manager = _manager(_config())
    assert [f.name for f in manager.http_filters] == [
        "envoy.filters.http.lua",
        "envoy.filters.http.router",
    ]
    lua = lua_pb2.Lua()
    assert manager.http_filters[0].typed_config.Unpack(lua)
    source = lua.default_source_code.inline_string
    assert source.startswith("local CLASSIFY = {")
    assert '"x-tokens"' in source
    assert '"x-model"' in source
    assert '{["name"] = "long-code", ["words"] = {"def"}}' in source
    assert "function envoy_on_request" in source
    assert manager.stream_idle_timeout.seconds == 600


def test_a_listener_without_classify_has_only_the_router() -> None:
    config = _config()
    plain = config.listeners[0].model_copy(
        update={"classify": None, "routes": config.listeners[0].routes[2:]}
    )
    manager = _manager(config.model_copy(update={"listeners": (plain,)}))
    assert [f.name for f in manager.http_filters] == ["envoy.filters.http.router"]


def test_body_conditions_become_header_matches_in_declared_order() -> None:
    config = _config()
    table = build_route_configuration(config.listeners[0], model_header=config.model_header)
    routes = table.virtual_hosts[0].routes
    assert [r.name for r in routes] == ["long-code", "chat", "split", "default"]
    long_code = {h.name: h for h in routes[0].match.headers}
    assert long_code["x-tokens"].range_match.start == 2000
    assert long_code["x-tokens"].range_match.end == 2**63 - 1
    assert long_code["x-prompt-keywords"].string_match.contains == ",long-code,"
    chat = {h.name: h for h in routes[1].match.headers}
    assert chat["x-stream"].string_match.exact == "false"
    assert (chat["x-max-tokens"].range_match.start, chat["x-max-tokens"].range_match.end) == (
        0,
        100,
    )
    assert list(routes[3].match.headers) == []


def test_a_route_over_pools_is_weighted_by_the_engine_or_its_static_weights() -> None:
    config = _config()
    listener = config.listeners[0]

    def split(weights: dict[str, int] | None) -> dict[str, int]:
        table = build_route_configuration(
            listener,
            model_header=config.model_header,
            pool_weights=None if weights is None else {"split": weights},
        )
        action = table.virtual_hosts[0].routes[2].route
        return {c.name: c.weight.value for c in action.weighted_clusters.clusters}

    assert split(None) == {"long": 3, "fast": 1}
    assert split({"long": 40, "fast": 60}) == {"long": 40, "fast": 60}
    # One pool not measured: static weights for both (two units cannot be mixed).
    assert split({"long": 40}) == {"long": 3, "fast": 1}


def test_retries_go_to_another_host_and_idle_timeouts_are_per_route() -> None:
    config = _config()
    table = build_route_configuration(config.listeners[0], model_header=config.model_header)
    routes = table.virtual_hosts[0].routes
    retry = routes[2].route.retry_policy
    assert retry.retry_on == "connect-failure,refused-stream,reset"
    assert retry.num_retries.value == 2
    assert [p.name for p in retry.retry_host_predicate] == [
        "envoy.retry_host_predicates.previous_hosts"
    ]
    assert retry.host_selection_retry_max_attempts == 10
    assert routes[2].route.idle_timeout.seconds == 30
    assert not routes[0].route.HasField("idle_timeout")
    assert not routes[0].route.HasField("retry_policy")
    assert list(routes[3].route.retry_policy.retry_host_predicate) == []


STREAMED = """
pools: [{name: p, endpoints: [{address: 127.0.0.1:8001}]}]
listeners:
  - name: gateway
    address: 127.0.0.1:10000
    classify: {}
    routes:
      - {name: streamed, pool: p, match: {stream: true}}
      - name: tuned
        pool: p
        match: {stream: true, max_tokens: {max: 100}}
        retry: {per_try_timeout_s: 20, per_try_idle_timeout_s: 5, num_retries: 1}
      - {name: silent, pool: p, match: {stream: true}, retry: {per_try_idle_timeout_s: 0}}
      - {name: whole, pool: p, match: {stream: false}}
      - {name: default, pool: p}
"""


def test_every_route_retries_by_default_and_a_streamed_one_bounds_each_try() -> None:
    config = parse_config(text=STREAMED)
    table = build_route_configuration(config.listeners[0], model_header=config.model_header)
    policies = {r.name: r.route.retry_policy for r in table.virtual_hosts[0].routes}
    for policy in policies.values():
        assert policy.retry_on == "connect-failure,refused-stream,reset"
        assert [p.name for p in policy.retry_host_predicate] == [
            "envoy.retry_host_predicates.previous_hosts"
        ]
    assert policies["streamed"].num_retries.value == 2
    # Only a route of streamed requests gets a first-token bound by default: a non-streamed
    # response is silent until done, and a request the classifier could not read is either.
    assert policies["streamed"].per_try_idle_timeout.seconds == STREAMED_TRY_IDLE_S
    for name in ("whole", "default", "silent"):
        assert not policies[name].HasField("per_try_idle_timeout"), name
    assert not any(p.HasField("per_try_timeout") for n, p in policies.items() if n != "tuned")
    tuned = policies["tuned"]
    assert (tuned.per_try_timeout.seconds, tuned.per_try_idle_timeout.seconds) == (20, 5)
    assert tuned.num_retries.value == 1


def test_pools_bound_retries_by_a_budget_unless_told_otherwise() -> None:
    config = _config()
    budget = build_cluster(config.pools[0]).circuit_breakers.thresholds[0].retry_budget
    assert (budget.budget_percent.value, budget.min_retry_concurrency.value) == (50.0, 10)
    plain = config.pools[1].model_copy(
        update={
            "circuit_breakers": config.pools[1].circuit_breakers.model_copy(
                update={"retry_budget_percent": None}
            )
        }
    )
    thresholds = build_cluster(plain).circuit_breakers.thresholds[0]
    assert not thresholds.HasField("retry_budget")
    assert thresholds.max_retries.value == 3
