"""Envoy as a gateway of the Gateway API Inference Extension configures it, without xDS: one
listener whose ``ext_proc`` filter asks the pool's endpoint picker by the Endpoint Picker
Protocol alone (no pool named in the stream, the body FULL_DUPLEX_STREAMED with the trailers,
the picker's ``envoy.lb`` metadata accepted), and the pool's cluster balancing by that metadata
(``override_host``, the pool's own policy as fallback), the response's headers sent with the
endpoint that served under ``envoy.lb`` as the protocol requires (written as ours is:
``xds_control.xds.picker.served_filter``). ``fail_open`` is the InferencePool's
``failureMode``: FailOpen lets a request through when the picker cannot answer, FailClose
refuses it. ``duplex_response`` sends the response's body too, FULL_DUPLEX_STREAMED with its
trailers, as Istio's and GKE's gateways do (Envoy then passes on only the body the picker
sends back). What ``xds-control`` publishes for a pool of its own config names the pool and
buffers the body instead (``xds_control.xds.picker``)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from envoy.config.bootstrap.v3 import bootstrap_pb2
from envoy.config.cluster.v3 import cluster_pb2
from envoy.config.core.v3 import address_pb2
from envoy.config.endpoint.v3 import endpoint_components_pb2, endpoint_pb2
from envoy.config.route.v3 import route_components_pb2, route_pb2
from envoy.extensions.filters.http.ext_proc.v3 import ext_proc_pb2
from envoy.extensions.filters.http.ext_proc.v3.processing_mode_pb2 import ProcessingMode
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm,
)
from google.protobuf.json_format import MessageToDict

from xds_control.config import Pool, RetryPolicy, parse_host_port
from xds_control.picker.messages import SUBSET_NAMESPACE
from xds_control.xds.cluster import build_picker_cluster
from xds_control.xds.durations import duration, pack
from xds_control.xds.listeners import http_listener, router_filter
from xds_control.xds.picker import (
    DESTINATION_METADATA_NAMESPACE,
    override_host_policy,
    picker_filter,
    served_filter,
    served_header,
)
from xds_control.xds.routes import build_retry_policy
from xds_lab.harness.envoy import EnvoyProcess
from xds_lab.harness.ports import free_port

__all__ = ["gie_gateway_bootstrap", "gie_gateway_envoy"]


def _socket(address: str) -> address_pb2.Address:
    host, port = parse_host_port(address)
    return address_pb2.Address(
        socket_address=address_pb2.SocketAddress(address=host, port_value=port)
    )


def _pool_cluster(pool: Pool, endpoints: Sequence[str]) -> cluster_pb2.Cluster:
    lb_endpoints = [
        endpoint_components_pb2.LbEndpoint(
            endpoint=endpoint_components_pb2.Endpoint(address=_socket(address))
        )
        for address in endpoints
    ]
    return cluster_pb2.Cluster(
        name=pool.name,
        type=cluster_pb2.Cluster.DiscoveryType.STATIC,
        connect_timeout=duration(1.0),
        load_assignment=endpoint_pb2.ClusterLoadAssignment(
            cluster_name=pool.name,
            endpoints=[endpoint_components_pb2.LocalityLbEndpoints(lb_endpoints=lb_endpoints)],
        ),
        load_balancing_policy=override_host_policy(pool),
    )


def _duplex_response(picker: hcm.HttpFilter) -> hcm.HttpFilter:
    """The picker's filter sending the response's body FULL_DUPLEX_STREAMED too (Envoy takes
    that mode only with the trailers sent), and allowing no mode override: a gateway that
    sends the body anyway has no reason to, so the picker must not need one."""
    processor = ext_proc_pb2.ExternalProcessor()
    picker.typed_config.Unpack(processor)
    processor.processing_mode.response_body_mode = ProcessingMode.FULL_DUPLEX_STREAMED
    processor.processing_mode.response_trailer_mode = ProcessingMode.SEND
    processor.allow_mode_override = False
    del processor.allowed_override_modes[:]
    return hcm.HttpFilter(name=picker.name, typed_config=pack(processor))


def gie_gateway_bootstrap(
    *,
    pool: Pool,
    endpoints: Sequence[str],
    listener_port: int,
    admin_port: int,
    fail_open: bool,
    retry: RetryPolicy | None = None,
    duplex_response: bool = False,
) -> dict[str, Any]:
    """The bootstrap (as JSON data) of an Envoy that serves ``pool``'s ``endpoints`` on
    ``listener_port`` through the pool's picker (``pool.picker``: it must have one), retrying
    as ``retry`` says (as on a route of any requests; ``None``: no retries); with
    ``duplex_response`` the picker gets the response's body too, in full duplex."""
    settings = pool.picker
    if settings is None:
        raise ValueError(f"pool {pool.name} has no picker")
    picker = settings.address
    action = route_components_pb2.RouteAction(cluster=pool.name, timeout=duration(30.0))
    if retry is not None:
        action.retry_policy.CopyFrom(build_retry_policy(retry, streamed=False))
    route = route_components_pb2.Route(
        match=route_components_pb2.RouteMatch(prefix="/"),
        route=action,
        response_headers_to_add=[served_header()],
    )
    picker_http_filter = picker_filter(
        [settings],
        fail_open=fail_open,
        body_mode=ProcessingMode.FULL_DUPLEX_STREAMED,
        forwarded_namespaces=[DESTINATION_METADATA_NAMESPACE, SUBSET_NAMESPACE],
    )
    if duplex_response:
        picker_http_filter = _duplex_response(picker_http_filter)
    manager = hcm.HttpConnectionManager(
        stat_prefix="gateway",
        route_config=route_pb2.RouteConfiguration(
            name="gateway",
            virtual_hosts=[
                route_components_pb2.VirtualHost(name="all", domains=["*"], routes=[route])
            ],
        ),
        http_filters=[
            picker_http_filter,
            served_filter(),
            router_filter(),
        ],
    )
    listener = http_listener(name="gateway", address=f"127.0.0.1:{listener_port}", manager=manager)
    bootstrap = bootstrap_pb2.Bootstrap(
        static_resources=bootstrap_pb2.Bootstrap.StaticResources(
            listeners=[listener],
            clusters=[_pool_cluster(pool, endpoints), build_picker_cluster(picker)],
        ),
    )
    data: dict[str, Any] = MessageToDict(bootstrap, preserving_proto_field_name=True)
    data["node"] = {"id": "gie-gateway", "cluster": "gateway"}
    data["admin"] = {
        "address": {"socket_address": {"address": "127.0.0.1", "port_value": admin_port}}
    }
    return data


def gie_gateway_envoy(
    *,
    workdir: Path,
    node_id: str,
    pool: Pool,
    endpoints: Sequence[str],
    fail_open: bool,
    retry: RetryPolicy | None = None,
    duplex_response: bool = False,
) -> tuple[EnvoyProcess, int]:
    """An Envoy (not started) running ``gie_gateway_bootstrap`` on free ports, and its
    listener's port."""
    port, admin = free_port(), free_port()
    bootstrap = gie_gateway_bootstrap(
        pool=pool,
        endpoints=endpoints,
        listener_port=port,
        admin_port=admin,
        fail_open=fail_open,
        retry=retry,
        duplex_response=duplex_response,
    )
    envoy = EnvoyProcess(
        workdir=workdir, xds_port=0, node_id=node_id, admin_port=admin, bootstrap=bootstrap
    )
    return envoy, port
