"""Admission budgets -> Envoy's local rate limit: the HCM filter and each route's bucket.

The buckets themselves (whole tokens per fill, an interval Envoy accepts) are the limits
stage's (``limits.buckets``); this module only writes them in Envoy's terms.

The filter in the listener carries no bucket of its own, so it limits nothing by itself; each
priority class's route carries its bucket in ``typed_per_filter_config``. Envoy leaves the
filter inert unless ``filter_enabled`` and ``filter_enforced`` say otherwise (both default to
0%), so both are set to 100% here, next to the bucket they enable.
"""

from __future__ import annotations

from envoy.config.core.v3 import base_pb2
from envoy.config.route.v3 import route_components_pb2 as rc
from envoy.extensions.common.ratelimit.v3 import ratelimit_pb2 as rl_pb2
from envoy.extensions.filters.http.local_ratelimit.v3 import local_rate_limit_pb2 as lrl
from envoy.type.v3 import http_status_pb2, percent_pb2, token_bucket_pb2
from google.protobuf import any_pb2

from xds_control.limits.buckets import Bucket
from xds_control.xds.durations import duration, pack, u32

__all__ = ["RATE_LIMIT_FILTER", "class_stat_prefix", "rate_limit_filter", "route_bucket"]

RATE_LIMIT_FILTER = "envoy.filters.http.local_ratelimit"
STAT_PREFIX = "priority_limits"


def class_stat_prefix(priority: str) -> str:
    """The stat prefix of a class's buckets (``priority_limits_medium``): Envoy counts each
    class apart (its Prometheus label ``envoy_local_http_ratelimit_prefix``)."""
    return f"{STAT_PREFIX}_{priority}"


def _all_of_it() -> base_pb2.RuntimeFractionalPercent:
    return base_pb2.RuntimeFractionalPercent(
        default_value=percent_pb2.FractionalPercent(
            numerator=100, denominator=percent_pb2.FractionalPercent.HUNDRED
        )
    )


def rate_limit_filter() -> any_pb2.Any:
    """The listener's filter: no bucket, so only routes that carry one are limited."""
    return pack(lrl.LocalRateLimit(stat_prefix=STAT_PREFIX))


def _cost(config: lrl.LocalRateLimit, *, header: str) -> None:
    # One descriptor that every request matches, whose hits are the header's number (Envoy's
    # hits_addend; a request without the header counts one). Its bucket is the route's; the
    # default bucket then never applies and is not also consumed.
    config.descriptors.append(
        rl_pb2.LocalRateLimitDescriptor(
            entries=[rl_pb2.RateLimitDescriptor.Entry(key="generic_key", value="cost")],
            token_bucket=config.token_bucket,
        )
    )
    limit = rc.RateLimit(
        actions=[
            rc.RateLimit.Action(generic_key=rc.RateLimit.Action.GenericKey(descriptor_value="cost"))
        ]
    )
    limit.hits_addend.format = f"%REQ({header})%"
    config.rate_limits.append(limit)
    config.always_consume_default_token_bucket.value = False


def route_bucket(
    bucket: Bucket, *, priority: str, retry_after_s: int, cost_header: str | None = None
) -> any_pb2.Any:
    """A route's bucket for class ``priority``, enabled and enforced for every request, counted
    under the class's stat prefix; a rejected one gets 429 with ``retry-after``. With
    ``cost_header``, a request takes that many tokens, not one."""
    config = lrl.LocalRateLimit(
        stat_prefix=class_stat_prefix(priority),
        status=http_status_pb2.HttpStatus(code=http_status_pb2.StatusCode.TooManyRequests),
        token_bucket=token_bucket_pb2.TokenBucket(
            max_tokens=bucket.max_tokens,
            tokens_per_fill=u32(bucket.tokens_per_fill),
            fill_interval=duration(bucket.fill_interval_s),
        ),
        filter_enabled=_all_of_it(),
        filter_enforced=_all_of_it(),
        response_headers_to_add=[
            base_pb2.HeaderValueOption(
                header=base_pb2.HeaderValue(key="retry-after", value=str(retry_after_s)),
                append_action=base_pb2.HeaderValueOption.OVERWRITE_IF_EXISTS_OR_ADD,
            )
        ],
    )
    if cost_header is not None:
        _cost(config, header=cost_header)
    return pack(config)
