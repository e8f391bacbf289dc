"""A listener with ``limits``: each route once per priority class (header routes first, the
route's default class last), Critical and High at Envoy's HIGH priority with their own
circuit breakers, and each class's bucket on its route."""

from __future__ import annotations

from typing import Any

from envoy.config.core.v3 import base_pb2

from xds_control.config import Config, PriorityClass
from xds_control.control import ReconcileInputs, reconcile_once
from xds_control.limits import Buckets, RouteBucket, bucket_for_rate
from xds_control.xds import build_route_configuration
from xds_control.xds.ratelimit import RATE_LIMIT_FILTER

HIGH = base_pb2.RoutingPriority.HIGH


def _config() -> Config:
    data: dict[str, Any] = {
        "pools": [{"name": "chat", "endpoints": [{"address": "127.0.0.1:9000"}]}],
        "listeners": [
            {
                "name": "gateway",
                "address": "127.0.0.1:10000",
                "routes": [
                    {
                        "name": "vip",
                        "match": {"prefix": "/vip"},
                        "priority": "critical",
                        "pool": "chat",
                    },
                    {"name": "all", "pool": "chat"},
                ],
                "limits": {
                    "classes": {"medium": {"rate_per_s": 10}},
                    "high_priority_breakers": {"max_requests": 77},
                },
            }
        ],
    }
    return Config.model_validate(data)


def test_each_route_becomes_one_route_per_class_with_the_default_last() -> None:
    config = _config()
    bucket = bucket_for_rate(10, burst_s=1)
    table = build_route_configuration(
        config.listeners[0],
        model_header="x-model",
        budgets=Buckets((RouteBucket("default", "gateway", "all", PriorityClass.MEDIUM, bucket),)),
    )
    routes = table.virtual_hosts[0].routes
    assert [r.name for r in routes] == [
        "vip/high",
        "vip/medium",
        "vip/critical",
        "all/critical",
        "all/high",
        "all/medium",
    ]
    by_name = {r.name: r for r in routes}
    # The class a request names wins over the route's default; no header: the default.
    assert [(h.name, h.string_match.exact) for h in by_name["vip/medium"].match.headers] == [
        ("x-priority", "medium")
    ]
    assert not by_name["all/medium"].match.headers
    assert [r.name for r in routes if r.route.priority == HIGH] == [
        "vip/high",
        "vip/critical",
        "all/critical",
        "all/high",
    ]
    assert [r.name for r in routes if RATE_LIMIT_FILTER in r.typed_per_filter_config] == [
        "all/medium"
    ]


def test_pools_behind_limits_get_high_priority_circuit_breakers() -> None:
    snapshot = reconcile_once(ReconcileInputs(config=_config(), endpoints={}))
    thresholds = snapshot.clusters.resources["chat"].message.circuit_breakers.thresholds
    assert [(t.priority, t.max_requests.value) for t in thresholds] == [
        (base_pb2.RoutingPriority.DEFAULT, 1024),
        (HIGH, 77),
    ]
