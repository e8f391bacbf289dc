"""Buckets Envoy can run: the nearest integer bucket to a rate, and a route's filter config
that is enabled and enforced (both default to off in Envoy, leaving the filter inert)."""

from __future__ import annotations

from envoy.extensions.filters.http.local_ratelimit.v3 import local_rate_limit_pb2 as lrl

from xds_control.limits import bucket_for_rate
from xds_control.xds.ratelimit import route_bucket


def test_a_bucket_runs_close_to_the_rate_asked() -> None:
    for rate in (0.5, 3.333, 10.0, 19.0, 20.0, 47.0, 1000.0):
        bucket = bucket_for_rate(rate, burst_s=1.0)
        assert bucket.fill_interval_s >= 0.05
        assert abs(bucket.rate - rate) / rate < 0.05, (rate, bucket)


def test_a_route_bucket_is_enabled_enforced_counted_per_class_and_says_retry_after() -> None:
    config = lrl.LocalRateLimit()
    route_bucket(bucket_for_rate(10, burst_s=1), priority="high", retry_after_s=2).Unpack(config)
    assert config.stat_prefix == "priority_limits_high"
    assert config.filter_enabled.default_value.numerator == 100
    assert config.filter_enforced.default_value.numerator == 100
    assert config.status.code == 429
    assert [(h.header.key, h.header.value) for h in config.response_headers_to_add] == [
        ("retry-after", "2")
    ]
