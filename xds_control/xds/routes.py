"""Listener routes -> Envoy ``RouteConfiguration``."""

from __future__ import annotations

from envoy.config.route.v3 import route_components_pb2 as rc
from envoy.config.route.v3 import route_pb2
from envoy.type.matcher.v3 import regex_pb2, string_pb2

from xds_control.config import HashKey, HeaderMatch, Listener, RetryPolicy, Route
from xds_control.xds.durations import duration

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
    return policy


def _route(route: Route, *, model_header: str) -> rc.Route:
    headers = [_header_matcher(h) for h in route.match.headers]
    if route.match.model is not None:
        headers.append(_header_matcher(HeaderMatch(name=model_header, exact=route.match.model)))
    action = rc.RouteAction(
        cluster=route.pool,
        timeout=duration(route.timeout_s),
        hash_policy=_hash_policy(route.hash_policy),
    )
    if route.retry is not None:
        action.retry_policy.CopyFrom(_retry_policy(route.retry))
    return rc.Route(
        name=route.name,
        match=rc.RouteMatch(prefix=route.match.prefix, headers=headers),
        route=action,
    )


def build_route_configuration(
    listener: Listener, *, model_header: str
) -> route_pb2.RouteConfiguration:
    """One virtual host answering every domain, with the listener's routes in order."""
    return route_pb2.RouteConfiguration(
        name=route_config_name(listener),
        virtual_hosts=[
            rc.VirtualHost(
                name=listener.name,
                domains=["*"],
                routes=[_route(r, model_header=model_header) for r in listener.routes],
            )
        ],
    )
