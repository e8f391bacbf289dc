"""Config listener -> Envoy ``Listener`` with an HTTP connection manager fed by RDS."""

from __future__ import annotations

from collections.abc import Mapping

from envoy.config.core.v3 import address_pb2
from envoy.config.listener.v3 import listener_components_pb2, listener_pb2
from envoy.extensions.filters.http.lua.v3 import lua_pb2
from envoy.extensions.filters.http.router.v3 import router_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm,
)

from xds_control.config import Listener, parse_host_port
from xds_control.config.picker import PoolPicker
from xds_control.xds.access_log import data_path_access_log, data_path_log_options
from xds_control.xds.cluster import ads_config_source
from xds_control.xds.durations import duration, pack
from xds_control.xds.lua import classifier_source
from xds_control.xds.picker import listener_pickers, picker_filter, served_filter
from xds_control.xds.ratelimit import RATE_LIMIT_FILTER, rate_limit_filter
from xds_control.xds.routes import route_config_name

__all__ = ["build_listener", "http_listener", "router_filter"]


CLASSIFY_FILTER = "envoy.filters.http.lua"


def _http_filters(
    listener: Listener, *, model_header: str, pickers: Mapping[str, PoolPicker]
) -> list[hcm.HttpFilter]:
    # The classifier runs before the router, so the headers it sets choose the route.
    filters = []
    if listener.classify is not None:
        source = classifier_source(listener.classify, listener=listener, model_header=model_header)
        lua = lua_pb2.Lua(stat_prefix="classify")
        lua.default_source_code.inline_string = source
        filters.append(hcm.HttpFilter(name=CLASSIFY_FILTER, typed_config=pack(lua)))
    if listener.limits is not None:
        # After the classifier: a class may come from the headers it sets.
        filters.append(hcm.HttpFilter(name=RATE_LIMIT_FILTER, typed_config=rate_limit_filter()))
    used = listener_pickers(listener, pickers)
    if used:
        # Last before the router: a request the limits refuse costs the picker nothing.
        filters += [picker_filter(used), served_filter()]
    return [*filters, router_filter()]


def router_filter() -> hcm.HttpFilter:
    """Envoy's router, the last HTTP filter of every chain."""
    return hcm.HttpFilter(name="envoy.filters.http.router", typed_config=pack(router_pb2.Router()))


def http_listener(
    *, name: str, address: str, manager: hcm.HttpConnectionManager
) -> listener_pb2.Listener:
    """A listener on ``address`` (``HOST:PORT``) whose one filter chain is ``manager``."""
    host, port = parse_host_port(address)
    return listener_pb2.Listener(
        name=name,
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


def build_listener(
    listener: Listener,
    *,
    model_header: str = "x-model",
    pickers: Mapping[str, PoolPicker] | None = None,
    data_path: bool = False,
) -> listener_pb2.Listener:
    """An HTTP listener whose route table arrives over ADS (RDS), with the request classifier
    in front of the router when the listener has ``classify``, the local rate limit (buckets
    per route) when it has ``limits``, the picker's ``ext_proc`` filter when it routes to
    a pool in ``pickers`` (pool name -> its picker), and the gRPC access log to the control
    plane, with an entry a second for each stream still open, when ``data_path``
    (``signals.data_path.enabled``; without it the listener is exactly what it was before the
    data path existed)."""
    manager = hcm.HttpConnectionManager(
        stat_prefix=listener.name,
        codec_type=hcm.HttpConnectionManager.CodecType.AUTO,
        rds=hcm.Rds(
            config_source=ads_config_source(), route_config_name=route_config_name(listener)
        ),
        http_filters=_http_filters(listener, model_header=model_header, pickers=pickers or {}),
        stream_idle_timeout=duration(listener.stream_idle_timeout_s),
        access_log=[data_path_access_log()] if data_path else [],
        access_log_options=data_path_log_options() if data_path else None,
    )
    return http_listener(name=listener.name, address=listener.address, manager=manager)
