"""Listener routes -> Envoy ``RouteConfiguration``."""

from __future__ import annotations

from collections.abc import Mapping
from collections.abc import Set as AbstractSet

from envoy.config.core.v3 import base_pb2
from envoy.config.route.v3 import route_components_pb2 as rc
from envoy.config.route.v3 import route_pb2
from envoy.extensions.retry.host.previous_hosts.v3 import previous_hosts_pb2
from envoy.type.matcher.v3 import regex_pb2, string_pb2
from envoy.type.v3 import range_pb2
from google.protobuf import any_pb2

from xds_control.config import (
    Classify,
    HashKey,
    HeaderMatch,
    Limits,
    Listener,
    PriorityClass,
    RetryPolicy,
    Route,
    RouteMatch,
    TokenRange,
)
from xds_control.config.picker import PoolPicker
from xds_control.limits.buckets import Bucket, Buckets
from xds_control.xds.durations import duration, pack, u32
from xds_control.xds.picker import (
    PICKER_FILTER,
    listener_pickers,
    picker_pool_config,
    picker_route_config,
    served_header,
)
from xds_control.xds.ratelimit import RATE_LIMIT_FILTER, route_bucket

__all__ = [
    "NO_POOL_STATUS",
    "build_retry_policy",
    "build_route_configuration",
    "class_route_name",
    "route_config_name",
]


def route_config_name(listener: Listener) -> str:
    """The RDS name of a listener's route table."""
    return listener.name


def _header_matcher(match: HeaderMatch) -> rc.HeaderMatcher:
    matcher = rc.HeaderMatcher(name=match.name, invert_match=match.invert)
    if match.exact is not None:
        matcher.string_match.CopyFrom(string_pb2.StringMatcher(exact=match.exact))
    elif match.prefix is not None:
        matcher.string_match.CopyFrom(string_pb2.StringMatcher(prefix=match.prefix))
    elif match.regex is not None:
        matcher.string_match.CopyFrom(
            string_pb2.StringMatcher(safe_regex=regex_pb2.RegexMatcher(regex=match.regex))
        )
    else:
        matcher.present_match = bool(match.present)
    return matcher


def _hash_policy(keys: tuple[HashKey, ...]) -> list[rc.RouteAction.HashPolicy]:
    # Every key but the last is terminal: the first one present decides, the rest are fallbacks.
    policies = []
    for index, key in enumerate(keys):
        terminal = index < len(keys) - 1
        if key.header is not None:
            policy = rc.RouteAction.HashPolicy(
                header=rc.RouteAction.HashPolicy.Header(header_name=key.header), terminal=terminal
            )
        else:
            policy = rc.RouteAction.HashPolicy(
                connection_properties=rc.RouteAction.HashPolicy.ConnectionProperties(
                    source_ip=True
                ),
                terminal=terminal,
            )
        policies.append(policy)
    return policies


def build_retry_policy(retry: RetryPolicy, *, streamed: bool) -> rc.RetryPolicy:
    """``retry`` for a route that carries only streamed requests (``streamed``) or any other."""
    policy = rc.RetryPolicy(retry_on=retry.retry_on)
    policy.num_retries.value = retry.num_retries
    if retry.per_try_timeout_s is not None:
        policy.per_try_timeout.CopyFrom(duration(retry.per_try_timeout_s))
    idle_s = retry.try_idle_timeout_s(streamed=streamed)
    if idle_s is not None:
        policy.per_try_idle_timeout.CopyFrom(duration(idle_s))
    if retry.other_host:
        policy.retry_host_predicate.append(
            rc.RetryPolicy.RetryHostPredicate(
                name="envoy.retry_host_predicates.previous_hosts",
                typed_config=pack(previous_hosts_pb2.PreviousHostsPredicate()),
            )
        )
        # MAGLEV maps a key to one host; each further pick rehashes, so a few picks leave a
        # failed host behind: with 1 of 2 hosts down, 10 picks all land on it 1 time in 1024.
        policy.host_selection_retry_max_attempts = 10
    return policy


_NO_BOUND = 2**63 - 1


def _range(name: str, tokens: TokenRange) -> rc.HeaderMatcher:
    end = _NO_BOUND if tokens.max is None else tokens.max
    return rc.HeaderMatcher(name=name, range_match=range_pb2.Int64Range(start=tokens.min, end=end))


def _body_matchers(match: RouteMatch, *, route: str, classify: Classify) -> list[rc.HeaderMatcher]:
    """Matches on the headers the listener's classifier sets from the body."""
    out = []
    if match.prompt_tokens is not None:
        out.append(_range(classify.prompt_tokens_header, match.prompt_tokens))
    if match.max_tokens is not None:
        out.append(_range(classify.max_tokens_header, match.max_tokens))
    if match.stream is not None:
        value = "true" if match.stream else "false"
        out.append(_header_matcher(HeaderMatch(name=classify.stream_header, exact=value)))
    if match.keywords:
        contains = string_pb2.StringMatcher(contains=f",{route},")
        out.append(rc.HeaderMatcher(name=classify.keywords_header, string_match=contains))
    return out


NO_POOL_STATUS = 503
"""What a route answers while none of its pools exists (an InferencePool not created yet, or
deleted): what Envoy answers for a pool without a server, so a client sees one status."""


def _set_destination(
    action: rc.RouteAction,
    route: Route,
    *,
    weights: Mapping[str, int],
    served: AbstractSet[str],
    pickers: Mapping[str, PoolPicker] | None,
    band: PriorityClass | None,
) -> None:
    """The route's pool, or its pools that exist as weighted clusters, each with its pool's
    picker settings (and the route's class, ``band``) when the listener has the picker filter
    (``pickers`` not ``None``)."""
    if route.pool is not None:
        action.cluster = route.pool
        return
    # Only the pools that exist: a route naming a missing cluster would keep Envoy from
    # dropping a deleted pool's cluster (make-before-break holds what a route names).
    shares = [share for share in route.pools if share.name in served]
    # The engine's weights only when it measured every pool of the route: a measured pool next
    # to a static weight would compare two different units.
    measured = all(share.name in weights for share in shares)
    for share in shares:
        weight = u32(weights[share.name] if measured else share.weight)
        cluster = rc.WeightedCluster.ClusterWeight(name=share.name, weight=weight)
        if pickers is not None:
            config = picker_pool_config(share.name, pickers, band=band)
            cluster.typed_per_filter_config[PICKER_FILTER].CopyFrom(config)
        action.weighted_clusters.clusters.append(cluster)


def _route(
    route: Route,
    *,
    model_header: str,
    classify: Classify | None,
    pool_weights: Mapping[str, int],
    picker: any_pb2.Any | None,
    served: AbstractSet[str],
    pickers: Mapping[str, PoolPicker] | None,
    band: PriorityClass | None,
) -> rc.Route:
    headers = [_header_matcher(h) for h in route.match.headers]
    if route.match.model is not None:
        headers.append(_header_matcher(HeaderMatch(name=model_header, exact=route.match.model)))
    if classify is not None:
        headers += _body_matchers(route.match, route=route.name, classify=classify)
    match = rc.RouteMatch(prefix=route.match.prefix, headers=headers)
    if not any(name in served for name in route.pool_names()):
        return rc.Route(
            name=route.name,
            match=match,
            direct_response=rc.DirectResponseAction(status=NO_POOL_STATUS),
        )
    action = rc.RouteAction(
        timeout=duration(route.timeout_s),
        hash_policy=_hash_policy(route.hash_policy),
    )
    _set_destination(action, route, weights=pool_weights, served=served, pickers=pickers, band=band)
    if route.idle_timeout_s is not None:
        action.idle_timeout.CopyFrom(duration(route.idle_timeout_s))
    if route.retry is not None:
        streamed = route.match.stream is True
        action.retry_policy.CopyFrom(build_retry_policy(route.retry, streamed=streamed))
    out = rc.Route(name=route.name, match=match, route=action)
    if picker is not None:
        out.typed_per_filter_config[PICKER_FILTER].CopyFrom(picker)
    return out


def class_route_name(route: str, priority: PriorityClass) -> str:
    """The Envoy route of ``route``'s requests of class ``priority``."""
    return f"{route}/{priority.value}"


def _class_routes(
    base: rc.Route, *, route: Route, limits: Limits, budgets: Mapping[PriorityClass, Bucket]
) -> list[rc.Route]:
    """``base`` once per priority class: a route per class named in the header, then the
    route's default class for every other request (no header, or an unknown value)."""
    default = route.priority or limits.default
    ordered = [c for c in PriorityClass if c is not default] + [default]
    out = []
    for priority in ordered:
        copy = rc.Route()
        copy.CopyFrom(base)
        copy.name = class_route_name(route.name, priority)
        if priority is not default:
            header = HeaderMatch(name=limits.header, exact=priority.value)
            copy.match.headers.append(_header_matcher(header))
        if priority.high and copy.HasField("route"):
            copy.route.priority = base_pb2.RoutingPriority.HIGH
        bucket = budgets.get(priority)
        if bucket is not None:
            copy.typed_per_filter_config[RATE_LIMIT_FILTER].CopyFrom(
                route_bucket(
                    bucket,
                    priority=priority.value,
                    retry_after_s=limits.retry_after_s,
                    cost_header=limits.cost_header if limits.unit == "tokens" else None,
                )
            )
        out.append(copy)
    return out


def build_route_configuration(
    listener: Listener,
    *,
    model_header: str,
    pool_weights: Mapping[str, Mapping[str, int]] | None = None,
    budgets: Buckets | None = None,
    pickers: Mapping[str, PoolPicker] | None = None,
    pools: AbstractSet[str] | None = None,
) -> route_pb2.RouteConfiguration:
    """One virtual host answering every domain, with the listener's routes in order. A route
    over several pools shares by ``pool_weights`` (route name -> pool name -> weight, from the
    weight engine), or by its pools' static weights when the engine has not measured them
    all. With ``limits``, each route becomes one route per priority class, each with its
    class's bucket from ``budgets``, one node group's (none there: that class is not
    limited). When the listener routes to a pool in ``pickers`` (pool name -> its picker),
    every route says whether the picker filter asks that pool's picker or stays off, and tells
    the picker the route's class (its ``priority``, else ``limits.default``), a band for the
    requests that name none. ``pools`` (default: every pool the routes name) are the pools that
    exist: a route over several sends only to those, and a route none of whose pools exists
    answers ``NO_POOL_STATUS``."""
    weights, known = pool_weights or {}, pickers or {}
    served = pools if pools is not None else {n for r in listener.routes for n in r.pool_names()}
    ask = bool(listener_pickers(listener, known))
    routes: list[rc.Route] = []
    for r in listener.routes:
        # The picker cannot see the route a request matched: it is told the route's class.
        band = r.priority or (listener.limits.default if listener.limits is not None else None)
        base = _route(
            r,
            model_header=model_header,
            classify=listener.classify,
            pool_weights=weights.get(r.name, {}),
            picker=picker_route_config(r, known, band=band) if ask else None,
            served=served,
            pickers=known if ask else None,
            band=band,
        )
        if listener.limits is None:
            routes.append(base)
        else:
            found = budgets.of_route(listener.name, r.name) if budgets is not None else {}
            routes += _class_routes(base, route=r, limits=listener.limits, budgets=found)
    return route_pb2.RouteConfiguration(
        name=route_config_name(listener),
        # What the picker learns which endpoint served from (docs/picker.md).
        response_headers_to_add=[served_header()] if ask else [],
        virtual_hosts=[
            rc.VirtualHost(
                name=listener.name,
                domains=["*"],
                routes=routes,
            )
        ],
    )
