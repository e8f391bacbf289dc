"""The data path's access log: every request's entry streamed by Envoy to the control plane
(``envoy.service.accesslog.v3.AccessLogService``) over the bootstrap's xDS cluster, so a TLS,
mutual-TLS or Unix-socket link to the control plane carries it unchanged; and, every
``PERIODIC_S``, an entry for each stream still open, so a server whose answers take long is
timed while they run, not only once they end."""

from __future__ import annotations

from envoy.config.accesslog.v3 import accesslog_pb2
from envoy.config.core.v3 import config_source_pb2, grpc_service_pb2
from envoy.extensions.access_loggers.grpc.v3 import als_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm,
)

from xds_control.signals.observation import PERIODIC_S, STREAM_HEADER
from xds_control.xds.bootstrap import XDS_CLUSTER
from xds_control.xds.durations import duration, pack, u32

__all__ = [
    "ACCESS_LOGGER",
    "FLUSH_INTERVAL_S",
    "LOG_NAME",
    "data_path_access_log",
    "data_path_log_options",
]

ACCESS_LOGGER = "envoy.access_loggers.http_grpc"
LOG_NAME = "xds-control"
"""The ``identifier.log_name`` of every stream this log opens."""

FLUSH_INTERVAL_S = 1.0
"""The longest an entry waits in Envoy's buffer (Envoy's default); a full buffer goes sooner."""

_BUFFER_BYTES = 16384
"""Envoy's default buffer: at hundreds of requests per second it flushes several times a
second; a slow stream never holds more than this per worker."""


def data_path_access_log() -> accesslog_pb2.AccessLog:
    """The HCM access log that streams each request's entry to the control plane, with the
    response's content type (an event stream is a streamed answer)."""
    config = als_pb2.HttpGrpcAccessLogConfig(
        common_config=als_pb2.CommonGrpcAccessLogConfig(
            log_name=LOG_NAME,
            transport_api_version=config_source_pb2.ApiVersion.V3,
            grpc_service=grpc_service_pb2.GrpcService(
                envoy_grpc=grpc_service_pb2.GrpcService.EnvoyGrpc(cluster_name=XDS_CLUSTER)
            ),
            buffer_flush_interval=duration(FLUSH_INTERVAL_S),
            buffer_size_bytes=u32(_BUFFER_BYTES),
        ),
        additional_response_headers_to_log=[STREAM_HEADER],
    )
    return accesslog_pb2.AccessLog(name=ACCESS_LOGGER, typed_config=pack(config))


def data_path_log_options() -> hcm.HttpConnectionManager.HcmAccessLogOptions:
    """The HCM's access-log options: an intermediate entry for every open stream each
    ``PERIODIC_S`` (``signals/observation.py``, ``Progress``)."""
    return hcm.HttpConnectionManager.HcmAccessLogOptions(
        access_log_flush_interval=duration(PERIODIC_S)
    )
