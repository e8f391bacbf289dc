"""Listener routes -> Envoy ``RouteConfiguration``."""

from __future__ import annotations

from collections.abc import Mapping

from envoy.config.route.v3 import route_components_pb2 as rc
from envoy.config.route.v3 import route_pb2
from envoy.extensions.retry.host.previous_hosts.v3 import previous_hosts_pb2
from envoy.type.matcher.v3 import regex_pb2, string_pb2
from envoy.type.v3 import range_pb2

from xds_control.config import (
    Classify,
    HashKey,
    HeaderMatch,
    Listener,
    RetryPolicy,
    Route,
    RouteMatch,
    TokenRange,
)
from xds_control.xds.durations import duration, pack, u32

__all__ = ["build_route_configuration", "route_config_name"]


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


def _retry_policy(retry: RetryPolicy) -> rc.RetryPolicy:
    policy = rc.RetryPolicy(retry_on=retry.retry_on)
    policy.num_retries.value = retry.num_retries
    if retry.per_try_timeout_s is not None:
        policy.per_try_timeout.CopyFrom(duration(retry.per_try_timeout_s))
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


def _set_destination(action: rc.RouteAction, route: Route, weights: Mapping[str, int]) -> None:
    if route.pool is not None:
        action.cluster = route.pool
        return
    # The engine's weights only when it measured every pool of the route: a measured pool next
    # to a static weight would compare two different units.
    measured = all(share.name in weights for share in route.pools)
    for share in route.pools:
        weight = u32(weights[share.name] if measured else share.weight)
        action.weighted_clusters.clusters.append(
            rc.WeightedCluster.ClusterWeight(name=share.name, weight=weight)
        )


def _route(
    route: Route, *, model_header: str, classify: Classify | None, pool_weights: Mapping[str, int]
) -> rc.Route:
    headers = [_header_matcher(h) for h in route.match.headers]
    if route.match.model is not None:
        headers.append(_header_matcher(HeaderMatch(name=model_header, exact=route.match.model)))
    if classify is not None:
        headers += _body_matchers(route.match, route=route.name, classify=classify)
    action = rc.RouteAction(
        timeout=duration(route.timeout_s),
        hash_policy=_hash_policy(route.hash_policy),
    )
    _set_destination(action, route, pool_weights)
    if route.idle_timeout_s is not None:
        action.idle_timeout.CopyFrom(duration(route.idle_timeout_s))
    if route.retry is not None:
        action.retry_policy.CopyFrom(_retry_policy(route.retry))
    return rc.Route(
        name=route.name,
        match=rc.RouteMatch(prefix=route.match.prefix, headers=headers),
        route=action,
    )


def build_route_configuration(
    listener: Listener,
    *,
    model_header: str,
    pool_weights: Mapping[str, Mapping[str, int]] | None = None,
) -> route_pb2.RouteConfiguration:
    """One virtual host answering every domain, with the listener's routes in order. A route
    over several pools shares by ``pool_weights`` (route name -> pool name -> weight, from the
    weight engine), or by its pools' static weights when the engine has not measured them
    all."""
    weights = pool_weights or {}
    return route_pb2.RouteConfiguration(
        name=route_config_name(listener),
        virtual_hosts=[
            rc.VirtualHost(
                name=listener.name,
                domains=["*"],
                routes=[
                    _route(
                        r,
                        model_header=model_header,
                        classify=listener.classify,
                        pool_weights=weights.get(r.name, {}),
                    )
                    for r in listener.routes
                ],
            )
        ],
    )
