"""Pool -> Envoy ``Cluster`` (EDS over ADS; MAGLEV, LEAST_REQUEST or ROUND_ROBIN, or
``override_host`` over one of them for a pool with a picker), and the picker's own cluster."""

from __future__ import annotations

import ipaddress

from envoy.config.cluster.v3 import circuit_breaker_pb2, cluster_pb2, outlier_detection_pb2
from envoy.config.core.v3 import address_pb2, base_pb2, config_source_pb2, protocol_pb2
from envoy.config.endpoint.v3 import endpoint_components_pb2, endpoint_pb2
from envoy.extensions.upstreams.http.v3 import http_protocol_options_pb2
from google.protobuf import wrappers_pb2

from xds_control.config import HighPriorityBreakers, LbPolicy, Pool
from xds_control.config.discovery import parse_host_name_port
from xds_control.xds.durations import duration, pack, u32
from xds_control.xds.picker import override_host_policy, picker_cluster_name

__all__ = ["HTTP_PROTOCOL_OPTIONS", "ads_config_source", "build_cluster", "build_picker_cluster"]

HTTP_PROTOCOL_OPTIONS = "envoy.extensions.upstreams.http.v3.HttpProtocolOptions"


def ads_config_source() -> config_source_pb2.ConfigSource:
    """A config source that says "over the same ADS stream"."""
    return config_source_pb2.ConfigSource(
        ads=config_source_pb2.AggregatedConfigSource(),
        resource_api_version=config_source_pb2.ApiVersion.V3,
    )


def _protocol_options(pool: Pool) -> http_protocol_options_pb2.HttpProtocolOptions:
    explicit = http_protocol_options_pb2.HttpProtocolOptions.ExplicitHttpConfig
    if pool.protocol == "http2":
        config = explicit(http2_protocol_options=protocol_pb2.Http2ProtocolOptions())
    else:
        config = explicit(http_protocol_options=protocol_pb2.Http1ProtocolOptions())
    return http_protocol_options_pb2.HttpProtocolOptions(explicit_http_config=config)


def _circuit_breakers(
    pool: Pool, high: HighPriorityBreakers | None
) -> circuit_breaker_pb2.CircuitBreakers:
    limits = pool.circuit_breakers
    thresholds = circuit_breaker_pb2.CircuitBreakers.Thresholds(
        priority=base_pb2.RoutingPriority.DEFAULT,
        max_connections=u32(limits.max_connections),
        max_pending_requests=u32(limits.max_pending_requests),
        max_requests=u32(limits.max_requests),
        max_retries=u32(limits.max_retries),
    )
    if limits.retry_budget_percent is not None:
        budget = thresholds.retry_budget
        budget.budget_percent.value = limits.retry_budget_percent
        budget.min_retry_concurrency.value = limits.min_retry_concurrency
    out = circuit_breaker_pb2.CircuitBreakers(thresholds=[thresholds])
    if high is not None:
        # Critical and High requests ride Envoy's HIGH priority: breakers of their own, so a
        # flood of Medium cannot use up the connections and pending slots they need.
        out.thresholds.append(
            circuit_breaker_pb2.CircuitBreakers.Thresholds(
                priority=base_pb2.RoutingPriority.HIGH,
                max_connections=u32(high.max_connections),
                max_pending_requests=u32(high.max_pending_requests),
                max_requests=u32(high.max_requests),
                max_retries=u32(high.max_retries),
            )
        )
    return out


def _set_lb_policy(cluster: cluster_pb2.Cluster, pool: Pool) -> None:
    lb = pool.lb
    if lb.policy is LbPolicy.MAGLEV:
        cluster.lb_policy = cluster_pb2.Cluster.LbPolicy.MAGLEV
        cluster.maglev_lb_config.table_size.CopyFrom(
            wrappers_pb2.UInt64Value(value=lb.maglev_table_size)
        )
        if lb.hash_balance_factor is not None:
            cluster.common_lb_config.consistent_hashing_lb_config.hash_balance_factor.CopyFrom(
                u32(lb.hash_balance_factor)
            )
    elif lb.policy is LbPolicy.LEAST_REQUEST:
        cluster.lb_policy = cluster_pb2.Cluster.LbPolicy.LEAST_REQUEST
        config = cluster.least_request_lb_config
        config.choice_count.CopyFrom(u32(lb.choice_count))
        config.active_request_bias.default_value = lb.active_request_bias
        # Envoy requires a runtime key; nothing sets it, so the configured value holds.
        config.active_request_bias.runtime_key = f"xds_control.{pool.name}.active_request_bias"
    else:
        cluster.lb_policy = cluster_pb2.Cluster.LbPolicy.ROUND_ROBIN


def build_cluster(
    pool: Pool, *, high_priority: HighPriorityBreakers | None = None
) -> cluster_pb2.Cluster:
    """The Envoy cluster for ``pool``; its endpoints and weights come by EDS. With
    ``high_priority`` (a listener with priority classes routes to it), HIGH-priority requests
    get their own circuit breakers. A pool with a ``picker`` balances by ``override_host``:
    the server the picker named, else the pool's own policy."""
    cluster = cluster_pb2.Cluster(
        name=pool.name,
        type=cluster_pb2.Cluster.DiscoveryType.EDS,
        eds_cluster_config=cluster_pb2.Cluster.EdsClusterConfig(eds_config=ads_config_source()),
        connect_timeout=duration(pool.connect_timeout_s),
        circuit_breakers=_circuit_breakers(pool, high_priority),
        # The control plane already batches weight changes per reconcile; Envoy's default 1 s
        # merge window would only add that much latency to every change.
        common_lb_config=cluster_pb2.Cluster.CommonLbConfig(update_merge_window=duration(0)),
    )
    cluster.typed_extension_protocol_options[HTTP_PROTOCOL_OPTIONS].CopyFrom(
        pack(_protocol_options(pool))
    )
    if pool.picker is None:
        _set_lb_policy(cluster, pool)
    else:
        # The pool's own policy becomes override_host's fallback, in the extension form.
        cluster.load_balancing_policy.CopyFrom(override_host_policy(pool))
    if pool.outlier_detection is not None:
        od = pool.outlier_detection
        cluster.outlier_detection.CopyFrom(
            outlier_detection_pb2.OutlierDetection(
                consecutive_5xx=u32(od.consecutive_5xx),
                interval=duration(od.interval_s),
                base_ejection_time=duration(od.base_ejection_time_s),
                max_ejection_percent=u32(od.max_ejection_percent),
            )
        )
    return cluster


def build_picker_cluster(address: str) -> cluster_pb2.Cluster:
    """An HTTP/2 cluster to the picker at ``address`` (no EDS: it is in the config): STATIC for
    an ``IP:PORT``, STRICT_DNS for a ``NAME:PORT`` (a Service: every address it resolves to
    is a replica)."""
    host, port = parse_host_name_port(address)
    name = picker_cluster_name(address)
    socket = address_pb2.SocketAddress(address=host, port_value=port)
    endpoint = endpoint_components_pb2.LbEndpoint(
        endpoint=endpoint_components_pb2.Endpoint(
            address=address_pb2.Address(socket_address=socket)
        )
    )
    cluster = cluster_pb2.Cluster(
        name=name,
        type=cluster_pb2.Cluster.DiscoveryType.STATIC
        if _is_ip(host)
        else cluster_pb2.Cluster.DiscoveryType.STRICT_DNS,
        connect_timeout=duration(0.25),
        load_assignment=endpoint_pb2.ClusterLoadAssignment(
            cluster_name=name,
            endpoints=[endpoint_components_pb2.LocalityLbEndpoints(lb_endpoints=[endpoint])],
        ),
    )
    http2 = http_protocol_options_pb2.HttpProtocolOptions.ExplicitHttpConfig(
        http2_protocol_options=protocol_pb2.Http2ProtocolOptions()
    )
    cluster.typed_extension_protocol_options[HTTP_PROTOCOL_OPTIONS].CopyFrom(
        pack(http_protocol_options_pb2.HttpProtocolOptions(explicit_http_config=http2))
    )
    return cluster


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True
