"""The per-request endpoint picker in Envoy's terms: its gRPC cluster, the ``ext_proc`` filter
that asks it, the per-route settings that say which pool a request is for, and the pool
cluster's ``override_host`` policy that honours its answer.

Each function takes what another builder made and returns it extended, so the listener, route
and cluster builders stay as they are and a config without pickers compiles exactly as before.
Failing open is the design: ``failure_mode_allow`` and a short ``message_timeout`` let a request
through when the picker is slow, dead or answers nothing, and then ``override_host`` finds no
header and hands the request to the pool's own policy with the engine's weights. A MAGLEV
fallback is bounded (``FALLBACK_HASH_BALANCE_FACTOR`` unless the pool sets its own): the picker
dies with the control plane, so the weights it falls back on are frozen, and only Envoy's own
count of requests in flight can keep one server from being handed more than it can serve.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from envoy.config.cluster.v3 import cluster_pb2
from envoy.config.core.v3 import (
    address_pb2,
    base_pb2,
    extension_pb2,
    grpc_service_pb2,
    protocol_pb2,
)
from envoy.config.endpoint.v3 import endpoint_components_pb2, endpoint_pb2
from envoy.config.listener.v3 import listener_pb2
from envoy.config.route.v3 import route_pb2
from envoy.extensions.filters.http.ext_proc.v3 import ext_proc_pb2, processing_mode_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm,
)
from envoy.extensions.load_balancing_policies.common.v3 import common_pb2
from envoy.extensions.load_balancing_policies.least_request.v3 import least_request_pb2
from envoy.extensions.load_balancing_policies.maglev.v3 import maglev_pb2
from envoy.extensions.load_balancing_policies.override_host.v3 import override_host_pb2
from envoy.extensions.load_balancing_policies.round_robin.v3 import round_robin_pb2
from envoy.extensions.upstreams.http.v3 import http_protocol_options_pb2 as hpo
from envoy.type.metadata.v3 import metadata_pb2
from google.protobuf.message import Message

from xds_control.config import Config, LbPolicy, Listener, Pool, parse_host_port
from xds_control.config.picker import PoolPicker
from xds_control.xds.cluster import HTTP_PROTOCOL_OPTIONS
from xds_control.xds.durations import duration, pack, u32

__all__ = [
    "DESTINATION_HEADER",
    "FALLBACK_HASH_BALANCE_FACTOR",
    "PICKER_FILTER",
    "POOL_METADATA",
    "build_picker_cluster",
    "picker_cluster_name",
    "with_override_host",
    "with_picker_filter",
    "with_picker_routes",
    "with_pickers",
]

PICKER_FILTER = "envoy.filters.http.ext_proc"
DESTINATION_HEADER = "x-gateway-destination-endpoint"
"""The Gateway API Inference Extension's header: ``IP:PORT[,IP:PORT...]``, best first."""
DESTINATION_METADATA_NAMESPACE = "envoy.lb"
"""Where the Inference Extension's pickers also put the answer (dynamic metadata)."""
POOL_METADATA = "x-xds-control-pool"
"""gRPC metadata each route's ``ext_proc`` stream carries: the pool the request goes to."""
_HCM = "envoy.filters.network.http_connection_manager"
FALLBACK_HASH_BALANCE_FACTOR = 150
"""Bounded load of a MAGLEV fallback whose pool sets none, in percent of a server's weighted
share of the requests in flight (Envoy's documented example value). Without a bound, a server
whose frozen weight outgrew what it can serve keeps its hash keys and its queue grows without
limit; with it, Envoy sends a key onward while that server holds more than its share."""


def picker_cluster_name(address: str) -> str:
    """The CDS name of the cluster that reaches the picker at ``address``."""
    return f"xds-control-picker/{address}"


def build_picker_cluster(address: str) -> cluster_pb2.Cluster:
    """A STATIC HTTP/2 cluster to the picker (no EDS: its address is in the config)."""
    host, port = parse_host_port(address)
    name = picker_cluster_name(address)
    socket = address_pb2.SocketAddress(address=host, port_value=port)
    endpoint = endpoint_components_pb2.LbEndpoint(
        endpoint=endpoint_components_pb2.Endpoint(
            address=address_pb2.Address(socket_address=socket)
        )
    )
    cluster = cluster_pb2.Cluster(
        name=name,
        type=cluster_pb2.Cluster.DiscoveryType.STATIC,
        connect_timeout=duration(0.25),
        load_assignment=endpoint_pb2.ClusterLoadAssignment(
            cluster_name=name,
            endpoints=[endpoint_components_pb2.LocalityLbEndpoints(lb_endpoints=[endpoint])],
        ),
    )
    http2 = hpo.HttpProtocolOptions.ExplicitHttpConfig(
        http2_protocol_options=protocol_pb2.Http2ProtocolOptions()
    )
    cluster.typed_extension_protocol_options[HTTP_PROTOCOL_OPTIONS].CopyFrom(
        pack(hpo.HttpProtocolOptions(explicit_http_config=http2))
    )
    return cluster


def _policy(name: str, config: Message) -> cluster_pb2.LoadBalancingPolicy:
    extension = extension_pb2.TypedExtensionConfig(name=name, typed_config=pack(config))
    return cluster_pb2.LoadBalancingPolicy(
        policies=[cluster_pb2.LoadBalancingPolicy.Policy(typed_extension_config=extension)]
    )


def _fallback(pool: Pool) -> cluster_pb2.LoadBalancingPolicy:
    """The pool's ``lb`` policy in the extension form ``override_host`` takes as fallback;
    MAGLEV with a bounded load (the pool's, else ``FALLBACK_HASH_BALANCE_FACTOR``)."""
    lb = pool.lb
    if lb.policy is LbPolicy.MAGLEV:
        maglev = maglev_pb2.Maglev()
        maglev.table_size.value = lb.maglev_table_size
        factor = lb.hash_balance_factor or FALLBACK_HASH_BALANCE_FACTOR
        maglev.consistent_hashing_lb_config.CopyFrom(
            common_pb2.ConsistentHashingLbConfig(hash_balance_factor=u32(factor))
        )
        return _policy("envoy.load_balancing_policies.maglev", maglev)
    if lb.policy is LbPolicy.LEAST_REQUEST:
        least = least_request_pb2.LeastRequest(choice_count=u32(lb.choice_count))
        least.active_request_bias.default_value = lb.active_request_bias
        least.active_request_bias.runtime_key = f"xds_control.{pool.name}.active_request_bias"
        return _policy("envoy.load_balancing_policies.least_request", least)
    return _policy("envoy.load_balancing_policies.round_robin", round_robin_pb2.RoundRobin())


def with_override_host(cluster: cluster_pb2.Cluster, pool: Pool) -> cluster_pb2.Cluster:
    """``cluster`` balancing by ``override_host``: the servers the picker named in the
    request's dynamic metadata, first healthy one first; without them, the pool's own policy.

    Only the metadata is a source, not the header: a client can send any header, but only a
    filter can write dynamic metadata, so no client picks its own server."""
    out = cluster_pb2.Cluster()
    out.CopyFrom(cluster)
    # The policy moves into the fallback; the legacy fields would contradict it.
    out.ClearField("lb_policy")
    out.ClearField("maglev_lb_config")
    out.ClearField("least_request_lb_config")
    out.common_lb_config.ClearField("consistent_hashing_lb_config")
    key = metadata_pb2.MetadataKey(
        key=DESTINATION_METADATA_NAMESPACE,
        path=[metadata_pb2.MetadataKey.PathSegment(key=DESTINATION_HEADER)],
    )
    override = override_host_pb2.OverrideHost(
        override_host_sources=[override_host_pb2.OverrideHost.OverrideHostSource(metadata=key)],
        fallback_policy=_fallback(pool),
    )
    out.load_balancing_policy.CopyFrom(
        _policy("envoy.load_balancing_policies.override_host", override)
    )
    return out


def _grpc_service(address: str) -> grpc_service_pb2.GrpcService:
    return grpc_service_pb2.GrpcService(
        envoy_grpc=grpc_service_pb2.GrpcService.EnvoyGrpc(cluster_name=picker_cluster_name(address))
    )


def picker_filter(pickers: Sequence[PoolPicker]) -> hcm.HttpFilter:
    """The ``ext_proc`` filter for a listener routing to pools with ``pickers``: the buffered
    body goes to the picker, nothing else; a slow or failed picker lets the request through."""
    mode = processing_mode_pb2.ProcessingMode
    processor = ext_proc_pb2.ExternalProcessor(
        grpc_service=_grpc_service(pickers[0].address),
        failure_mode_allow=True,
        message_timeout=duration(min(p.message_timeout_ms for p in pickers) / 1000),
        # The headers go too although the picker needs only the body: a filter that skips
        # them lets the router pick a server before the body is read. Sent, they are held
        # until the body's answer, so its pick counts. PARTIAL: a body over Envoy's buffer
        # limit is sent cut, not answered 413.
        processing_mode=mode(
            request_header_mode=mode.SEND,
            response_header_mode=mode.SKIP,
            request_body_mode=mode.BUFFERED_PARTIAL,
            response_body_mode=mode.NONE,
            request_trailer_mode=mode.SKIP,
            response_trailer_mode=mode.SKIP,
        ),
        metadata_options=ext_proc_pb2.MetadataOptions(
            receiving_namespaces=ext_proc_pb2.MetadataOptions.MetadataNamespaces(
                untyped=[DESTINATION_METADATA_NAMESPACE]
            )
        ),
        stat_prefix="picker",
    )
    return hcm.HttpFilter(name=PICKER_FILTER, typed_config=pack(processor))


def with_picker_filter(
    listener: listener_pb2.Listener, pickers: Sequence[PoolPicker]
) -> listener_pb2.Listener:
    """``listener`` with the picker's filter just before the router."""
    out = listener_pb2.Listener()
    out.CopyFrom(listener)
    for chain in out.filter_chains:
        for network in chain.filters:
            if network.name != _HCM:
                continue
            manager = hcm.HttpConnectionManager()
            network.typed_config.Unpack(manager)
            manager.http_filters.insert(len(manager.http_filters) - 1, picker_filter(pickers))
            network.typed_config.CopyFrom(pack(manager))
    return out


def _route_override(pool: str, picker: PoolPicker) -> ext_proc_pb2.ExtProcPerRoute:
    return ext_proc_pb2.ExtProcPerRoute(
        overrides=ext_proc_pb2.ExtProcOverrides(
            grpc_service=_grpc_service(picker.address),
            grpc_initial_metadata=[base_pb2.HeaderValue(key=POOL_METADATA, value=pool)],
        )
    )


def with_picker_routes(
    table: route_pb2.RouteConfiguration, pickers: Mapping[str, PoolPicker]
) -> route_pb2.RouteConfiguration:
    """``table`` with each route to one picker pool asking that pool's picker (the pool named
    in the stream's metadata), and the filter off on every other route (several pools, or a
    pool without a picker: there is nothing to pick within)."""
    out = route_pb2.RouteConfiguration()
    out.CopyFrom(table)
    off = pack(ext_proc_pb2.ExtProcPerRoute(disabled=True))
    for host in out.virtual_hosts:
        for route in host.routes:
            pool = route.route.cluster if route.HasField("route") else ""
            picker = pickers.get(pool)
            config = off if picker is None else pack(_route_override(pool, picker))
            route.typed_per_filter_config[PICKER_FILTER].CopyFrom(config)
    return out


def _listener_pickers(listener: Listener, pickers: Mapping[str, PoolPicker]) -> list[PoolPicker]:
    names = {route.pool for route in listener.routes if route.pool is not None}
    return [pickers[name] for name in sorted(names) if name in pickers]


def with_pickers(
    config: Config,
    *,
    clusters: Sequence[cluster_pb2.Cluster],
    listeners: Sequence[listener_pb2.Listener],
    route_configs: Sequence[route_pb2.RouteConfiguration],
) -> tuple[
    list[cluster_pb2.Cluster], list[listener_pb2.Listener], list[route_pb2.RouteConfiguration]
]:
    """The built resources (one entry per pool and per listener of ``config``, in order) with
    every pool that has a ``picker`` wired in: its cluster, the picker's cluster, and the
    filter and route settings of each listener with a route to it. A config without pickers
    gets them back unchanged."""
    pickers = {pool.name: pool.picker for pool in config.pools if pool.picker is not None}
    out_clusters, out_listeners, out_routes = list(clusters), list(listeners), list(route_configs)
    if not pickers:
        return out_clusters, out_listeners, out_routes
    for index, pool in enumerate(config.pools):
        if pool.picker is not None:
            out_clusters[index] = with_override_host(clusters[index], pool)
    addresses = sorted({p.address for p in pickers.values()})
    out_clusters += [build_picker_cluster(a) for a in addresses]
    for index, listener in enumerate(config.listeners):
        used = _listener_pickers(listener, pickers)
        if used:
            out_listeners[index] = with_picker_filter(listeners[index], used)
            out_routes[index] = with_picker_routes(route_configs[index], pickers)
    return out_clusters, out_listeners, out_routes
