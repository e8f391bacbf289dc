"""The data path's access log on every listener when ``signals.data_path`` is on, and
nothing else changed; off, the listeners are the same bytes as before it existed."""

from __future__ import annotations

from envoy.extensions.access_loggers.grpc.v3 import als_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm,
)

from xds_control.config import parse_config
from xds_control.control import ReconcileInputs, reconcile_once
from xds_control.discovery import to_endpoints
from xds_control.xds import build_listener
from xds_control.xds import type_urls as urls
from xds_control.xds.bootstrap import XDS_CLUSTER

CONFIG = """
pools: [{name: chat, endpoints: [{address: 10.0.0.1:8000}]}]
listeners:
  - {name: a, address: 127.0.0.1:10000, routes: [{name: all, pool: chat}]}
  - {name: b, address: 127.0.0.1:10001, routes: [{name: all, pool: chat}]}
"""


def _manager(listener: object) -> hcm.HttpConnectionManager:
    manager = hcm.HttpConnectionManager()
    listener.filter_chains[0].filters[0].typed_config.Unpack(manager)  # type: ignore[attr-defined]
    return manager


def test_off_the_listener_is_what_it_was_before() -> None:
    config = parse_config(text=CONFIG)
    assert not config.signals.data_path.enabled
    listener = config.listeners[0]
    assert (
        build_listener(listener, data_path=False).SerializeToString()
        == build_listener(listener).SerializeToString()
    )
    assert not _manager(build_listener(listener)).access_log


def test_on_every_hcm_streams_its_log_to_the_control_plane_over_the_xds_cluster() -> None:
    text = CONFIG + "signals: {data_path: {enabled: true}}\n"
    config = parse_config(text=text)
    endpoints = {"chat": to_endpoints(config.pools[0].endpoints)}
    snapshot = reconcile_once(ReconcileInputs(config=config, endpoints=endpoints))
    listeners = snapshot.resource_set(urls.LISTENER)
    managers = [_manager(r.message) for r in listeners.resources.values()]
    assert len(managers) == 2
    for manager in managers:
        (log,) = manager.access_log
        assert log.name == "envoy.access_loggers.http_grpc"
        config_ = als_pb2.HttpGrpcAccessLogConfig()
        log.typed_config.Unpack(config_)
        common = config_.common_config
        assert common.log_name == "xds-control"
        assert common.grpc_service.envoy_grpc.cluster_name == XDS_CLUSTER
        assert common.transport_api_version == 2  # V3
        assert common.buffer_flush_interval.seconds == 1
        assert 0 < common.buffer_size_bytes.value <= 65536
        assert list(config_.additional_response_headers_to_log) == ["content-type"]
        # A request still running is logged every second too.
        assert manager.access_log_options.access_log_flush_interval.seconds == 1
    # Nothing but the access log differs from the listener built with the data path off.
    off = parse_config(text=CONFIG)
    for built, listener in zip(managers, off.listeners, strict=True):
        del built.access_log[:]
        built.ClearField("access_log_options")
        assert built == _manager(build_listener(listener))
