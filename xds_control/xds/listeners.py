"""Config listener -> Envoy ``Listener`` with an HTTP connection manager fed by RDS."""

from __future__ import annotations

from envoy.config.core.v3 import address_pb2
from envoy.config.listener.v3 import listener_components_pb2, listener_pb2
from envoy.extensions.filters.http.router.v3 import router_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm,
)

from xds_control.config import Listener, parse_host_port
from xds_control.xds.cluster import ads_config_source
from xds_control.xds.durations import pack
from xds_control.xds.routes import route_config_name

__all__ = ["build_listener"]


def build_listener(listener: Listener) -> listener_pb2.Listener:
    """An HTTP listener whose route table arrives over ADS (RDS)."""
    host, port = parse_host_port(listener.address)
    manager = hcm.HttpConnectionManager(
        stat_prefix=listener.name,
        codec_type=hcm.HttpConnectionManager.CodecType.AUTO,
        rds=hcm.Rds(
            config_source=ads_config_source(), route_config_name=route_config_name(listener)
        ),
        http_filters=[
            hcm.HttpFilter(name="envoy.filters.http.router", typed_config=pack(router_pb2.Router()))
        ],
    )
    return listener_pb2.Listener(
        name=listener.name,
        address=address_pb2.Address(
            socket_address=address_pb2.SocketAddress(address=host, port_value=port)
        ),
        filter_chains=[
            listener_components_pb2.FilterChain(
                filters=[
                    listener_components_pb2.Filter(
                        name="envoy.filters.network.http_connection_manager",
                        typed_config=pack(manager),
                    )
                ]
            )
        ],
    )
