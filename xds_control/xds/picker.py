"""The per-request endpoint picker in Envoy's terms: the ``ext_proc`` filter that asks it, the
per-route settings that say which pool a request is for, the pool cluster's ``override_host``
policy that honours its answer, and the name of the picker's own gRPC cluster.

The cluster, listener and route builders take these from here for the pools that have a
``picker``, so a config without pickers compiles exactly as it would without this module.
Failing open is the design: ``failure_mode_allow`` and a short ``message_timeout`` let a request
through when the picker is slow, dead or answers nothing, and then ``override_host`` finds no
header and hands the request to the pool's own policy with the engine's weights. A pool that
fails closed (``picker.fail_open`` false, an InferencePool's FailClose) turns that off on its
own routes only. A MAGLEV
fallback is bounded (``FALLBACK_HASH_BALANCE_FACTOR`` unless the pool sets its own): the picker
dies with the control plane, so the weights it falls back on are frozen, and only Envoy's own
count of requests in flight can keep one server from being handed more than it can serve.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from envoy.config.cluster.v3 import cluster_pb2
from envoy.config.core.v3 import base_pb2, extension_pb2, grpc_service_pb2
from envoy.extensions.filters.http.ext_proc.v3 import ext_proc_pb2, processing_mode_pb2
from envoy.extensions.filters.http.header_to_metadata.v3 import header_to_metadata_pb2 as h2m
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm,
)
from envoy.extensions.load_balancing_policies.common.v3 import common_pb2
from envoy.extensions.load_balancing_policies.least_request.v3 import least_request_pb2
from envoy.extensions.load_balancing_policies.maglev.v3 import maglev_pb2
from envoy.extensions.load_balancing_policies.override_host.v3 import override_host_pb2
from envoy.extensions.load_balancing_policies.round_robin.v3 import round_robin_pb2
from envoy.type.metadata.v3 import metadata_pb2
from google.protobuf import any_pb2
from google.protobuf.message import Message

from xds_control.config import LbPolicy, Listener, Pool, PriorityClass, Route
from xds_control.config.flow import HOLD_MARGIN_S
from xds_control.config.picker import PoolPicker
from xds_control.xds.durations import duration, pack, u32

__all__ = [
    "BAND_METADATA",
    "DESTINATION_HEADER",
    "DESTINATION_METADATA_NAMESPACE",
    "FALLBACK_HASH_BALANCE_FACTOR",
    "PICKER_FILTER",
    "POOL_METADATA",
    "SERVED_FILTER",
    "SERVED_KEY",
    "listener_pickers",
    "override_host_policy",
    "picker_cluster_name",
    "picker_filter",
    "picker_pool_config",
    "picker_route_config",
    "processing_mode",
    "served_filter",
    "served_header",
    "usage_mode",
]

PICKER_FILTER = "envoy.filters.http.ext_proc"
SERVED_FILTER = "envoy.filters.http.header_to_metadata"
DESTINATION_HEADER = "x-gateway-destination-endpoint"
"""The Gateway API Inference Extension's header: ``IP:PORT[,IP:PORT...]``, best first."""
DESTINATION_METADATA_NAMESPACE = "envoy.lb"
"""Where the Inference Extension's pickers also put the answer (dynamic metadata)."""
SERVED_KEY = "x-gateway-destination-endpoint-served"
"""The Endpoint Picker Protocol's key under ``envoy.lb`` on the response path: the endpoint that
served. Envoy has no filter that writes it, so the route adds it as a response header
(``served_header``) and ``served_filter`` moves it into the metadata, out of the client's view."""
POOL_METADATA = "x-xds-control-pool"
"""gRPC metadata each route's ``ext_proc`` stream carries: the pool the request goes to."""
BAND_METADATA = "x-xds-control-band"
"""gRPC metadata a route's ``ext_proc`` stream carries when the route has a priority class (its
``priority``, else its listener's ``limits.default``): the flow-control band of a request whose
priority header names none."""
FALLBACK_HASH_BALANCE_FACTOR = 150
"""Bounded load of a MAGLEV fallback whose pool sets none, in percent of a server's weighted
share of the requests in flight (Envoy's documented example value). Without a bound, a server
whose frozen weight outgrew what it can serve keeps its hash keys and its queue grows without
limit; with it, Envoy sends a key onward while that server holds more than its share."""


def picker_cluster_name(address: str) -> str:
    """The CDS name of the cluster that reaches the picker at ``address``."""
    return f"xds-control-picker/{address}"


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


def override_host_policy(pool: Pool) -> cluster_pb2.LoadBalancingPolicy:
    """How a picker pool's cluster balances: ``override_host``, the servers the picker named in
    the request's dynamic metadata, first healthy one first; without them, the pool's own
    policy.

    Only the metadata is a source, not the header: a client can send any header, but only a
    filter can write dynamic metadata, so no client picks its own server."""
    key = metadata_pb2.MetadataKey(
        key=DESTINATION_METADATA_NAMESPACE,
        path=[metadata_pb2.MetadataKey.PathSegment(key=DESTINATION_HEADER)],
    )
    override = override_host_pb2.OverrideHost(
        override_host_sources=[override_host_pb2.OverrideHost.OverrideHostSource(metadata=key)],
        fallback_policy=_fallback(pool),
    )
    return _policy("envoy.load_balancing_policies.override_host", override)


def _grpc_service(address: str) -> grpc_service_pb2.GrpcService:
    return grpc_service_pb2.GrpcService(
        envoy_grpc=grpc_service_pb2.GrpcService.EnvoyGrpc(cluster_name=picker_cluster_name(address))
    )


def listener_pickers(listener: Listener, pickers: Mapping[str, PoolPicker]) -> list[PoolPicker]:
    """The pickers of the pools ``listener`` routes to, by pool name; ``pickers``: pool name
    -> its picker. Empty: the listener has no picker filter."""
    names = {name for route in listener.routes for name in route.pool_names()}
    return [pickers[name] for name in sorted(names) if name in pickers]


def processing_mode(
    body_mode: processing_mode_pb2.ProcessingMode.BodySendMode.ValueType,
    *,
    response_body: bool = False,
) -> processing_mode_pb2.ProcessingMode:
    """What the picker's filter sends of each request: the request's headers and body (in
    ``body_mode``), the response's headers, and with ``response_body`` the response's body
    in pieces (``STREAMED``: each answered before Envoy passes it on)."""
    mode = processing_mode_pb2.ProcessingMode
    full_duplex = body_mode == mode.FULL_DUPLEX_STREAMED
    return mode(
        request_header_mode=mode.SEND,
        response_header_mode=mode.SEND,
        request_body_mode=body_mode,
        response_body_mode=mode.STREAMED if response_body else mode.NONE,
        request_trailer_mode=mode.SEND if full_duplex else mode.SKIP,
        response_trailer_mode=mode.SKIP,
    )


def usage_mode(
    body_mode: processing_mode_pb2.ProcessingMode.BodySendMode.ValueType,
) -> processing_mode_pb2.ProcessingMode:
    """The mode a picker switches a budgeted request to on its response's headers (the
    filter allows exactly this override): its response body too, for the usage."""
    return processing_mode(body_mode, response_body=True)


def picker_filter(
    pickers: Sequence[PoolPicker],
    *,
    fail_open: bool = True,
    body_mode: processing_mode_pb2.ProcessingMode.BodySendMode.ValueType = (
        processing_mode_pb2.ProcessingMode.BUFFERED_PARTIAL
    ),
    forwarded_namespaces: Sequence[str] = (DESTINATION_METADATA_NAMESPACE,),
) -> hcm.HttpFilter:
    """The ``ext_proc`` filter for a listener routing to pools with ``pickers``: the request's
    headers and body go to the picker, and the response's headers with the endpoint that
    served (``SERVED_KEY`` in the ``envoy.lb`` metadata, which ``served_filter`` writes),
    nothing else of the response. ``fail_open`` (what our pools get): a slow or failed picker
    lets the request through; off, Envoy refuses it (an InferencePool's FailClose).
    ``body_mode``: ours is ``BUFFERED_PARTIAL``; the Endpoint Picker Protocol's is
    ``FULL_DUPLEX_STREAMED``, which needs the trailers sent too. ``forwarded_namespaces``: the
    dynamic metadata each message carries (a gateway of the Inference Extension adds its
    subset hint's)."""
    namespaces = ext_proc_pb2.MetadataOptions.MetadataNamespaces
    processor = ext_proc_pb2.ExternalProcessor(
        grpc_service=_grpc_service(pickers[0].dial_address),
        failure_mode_allow=fail_open,
        message_timeout=duration(min(p.message_timeout_ms for p in pickers) / 1000),
        # The headers go too although the picker needs only the body: a filter that skips
        # them lets the router pick a server before the body is read. Sent, they are held
        # until the body's answer, so its pick counts. PARTIAL: a body over Envoy's buffer
        # limit is sent cut, not answered 413. The response's headers say which endpoint
        # served (not always the one picked: the fallback list, a retry) and that its
        # prefill is over; their answer holds the first byte for one round trip.
        processing_mode=processing_mode(body_mode),
        metadata_options=ext_proc_pb2.MetadataOptions(
            forwarding_namespaces=namespaces(untyped=forwarded_namespaces),
            receiving_namespaces=namespaces(untyped=[DESTINATION_METADATA_NAMESPACE]),
        ),
        stat_prefix="picker",
    )
    if any(p.flow is not None and p.flow.budgets for p in pickers):
        # A budgeted request's response body goes to the picker too, for its usage: the
        # picker asks for it on that request's response headers, and only for it.
        processor.allow_mode_override = True
        processor.allowed_override_modes.append(usage_mode(body_mode))
    waits = [p.flow.max_wait_s for p in pickers if p.flow is not None]
    if waits:
        # Flow control holds a request by extending its message's timeout up to this.
        processor.max_message_timeout.CopyFrom(duration(max(waits) + HOLD_MARGIN_S))
    return hcm.HttpFilter(name=PICKER_FILTER, typed_config=pack(processor))


def served_header() -> base_pb2.HeaderValueOption:
    """The response header a route of a picker's listener adds: the endpoint that served,
    from the router's own record of the upstream (what ``served_filter`` reads)."""
    return base_pb2.HeaderValueOption(
        header=base_pb2.HeaderValue(key=SERVED_KEY, value="%UPSTREAM_REMOTE_ADDRESS%"),
        append_action=base_pb2.HeaderValueOption.OVERWRITE_IF_EXISTS_OR_ADD,
    )


def served_filter() -> hcm.HttpFilter:
    """Between the picker's filter and the router: on the response path, the served endpoint's
    header (``served_header``) becomes ``envoy.lb`` metadata before the picker's filter sends
    the headers on, and leaves the response (a client never learns a server's address)."""
    pair = h2m.Config.KeyValuePair(
        metadata_namespace=DESTINATION_METADATA_NAMESPACE, key=SERVED_KEY
    )
    rule = h2m.Config.Rule(header=SERVED_KEY, on_header_present=pair, remove=True)
    return hcm.HttpFilter(name=SERVED_FILTER, typed_config=pack(h2m.Config(response_rules=[rule])))


def picker_route_config(
    route: Route, pickers: Mapping[str, PoolPicker], *, band: PriorityClass | None = None
) -> any_pb2.Any:
    """The picker filter's settings on ``route`` of a listener that has the filter: those of
    its pool (``picker_pool_config``); off on a route over several pools, whose weighted
    clusters each carry their pool's (Envoy takes the chosen cluster's over the route's).
    ``band``: the route's priority class, if it has one."""
    if route.pool is None:
        return pack(ext_proc_pb2.ExtProcPerRoute(disabled=True))
    return picker_pool_config(route.pool, pickers, band=band)


def picker_pool_config(
    pool: str, pickers: Mapping[str, PoolPicker], *, band: PriorityClass | None = None
) -> any_pb2.Any:
    """The picker filter's settings for requests to ``pool``: ask its picker, naming the pool
    (and ``band``, the route's priority class, if it has one) in the stream's metadata, and
    refuse the request when the picker cannot answer if the pool fails closed; off for a pool
    without a picker (there is nothing to pick within)."""
    picker = pickers.get(pool)
    if picker is None:
        return pack(ext_proc_pb2.ExtProcPerRoute(disabled=True))
    metadata = [base_pb2.HeaderValue(key=POOL_METADATA, value=pool)]
    if band is not None:
        # Only a route with a class says one, so a route without is what it was before.
        metadata.append(base_pb2.HeaderValue(key=BAND_METADATA, value=band.value))
    overrides = ext_proc_pb2.ExtProcOverrides(
        grpc_service=_grpc_service(picker.dial_address), grpc_initial_metadata=metadata
    )
    if not picker.fail_open:
        # Per route: the listener's filter fails open for every other pool on it. Set only
        # when it differs, so a fail-open pool's route is what it was before the field existed.
        overrides.failure_mode_allow.value = False
    return pack(ext_proc_pb2.ExtProcPerRoute(overrides=overrides))
