"""The gRPC server: ADS, CSDS (client status), health, reflection and, given one, the data
path's access-log service on one port (TCP, or a Unix socket for a sidecar), plaintext or TLS
(mutual with a client CA; the certificates are re-read when their files change, ``tls.py``).
Envoys reach it over their bootstrap's xDS cluster, so the access log travels as ADS does."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

# The asyncio servicer's public name (grpcio-health-checking exports it as ``health.aio``);
# grpc-stubs' health.pyi predates it, hence the one ignore.
from grpc_health.v1.health import aio as health_aio  # type: ignore[attr-defined]
from grpc_reflection.v1alpha import reflection

from xds_control.cache.protocol import SnapshotCache
from xds_control.config.serving import GrpcConfig, TlsConfig, parse_xds_address
from xds_control.errors import ServeError
from xds_control.server.ads import AdsHandler
from xds_control.server.csds import CSDS_SERVICE, CsdsServicer
from xds_control.server.peer import node_named_by_certificate
from xds_control.server.registry import StreamRegistry
from xds_control.server.tls import CertificateFiles
from xds_control.signals.access_log import ACCESS_LOG_SERVICE, AccessLogServicer
from xds_control.xds.type_urls import ADS_SERVICE

__all__ = ["XdsServer"]


class XdsServer:
    """Owns the grpc.aio server. Health reports NOT_SERVING until the first snapshot exists.

    ``address`` is ``IP:PORT`` or ``unix:///path``; a socket file gets ``settings.socket_mode``
    before anyone can connect. ``port`` is the TCP port bound (0 on a Unix socket).
    ``access_log`` serves Envoy's access-log service beside ADS."""

    def __init__(
        self,
        *,
        cache: SnapshotCache,
        registry: StreamRegistry,
        address: str,
        tls: TlsConfig | None = None,
        settings: GrpcConfig | None = None,
        access_log: AccessLogServicer | None = None,
    ) -> None:
        settings = settings or GrpcConfig()
        self.address = address
        self.health = health_aio.HealthServicer()
        self._server = grpc.aio.server(options=_options(settings))
        check = node_named_by_certificate if tls is not None and tls.verify_node_id else None
        ads = AdsHandler(cache=cache, registry=registry, node_check=check)
        self._server.add_generic_rpc_handlers([ads.generic_handler()])
        health_pb2_grpc.add_HealthServicer_to_server(self.health, self._server)
        csds = CsdsServicer(cache=cache, registry=registry)
        self._server.add_generic_rpc_handlers([csds.generic_handler()])
        services = [ADS_SERVICE, CSDS_SERVICE, health.SERVICE_NAME, reflection.SERVICE_NAME]
        if access_log is not None:
            self._server.add_generic_rpc_handlers([access_log.generic_handler()])
            services.append(ACCESS_LOG_SERVICE)
        reflection.enable_server_reflection(services, self._server)
        self.port = _listen(
            self._server, address, credentials=_credentials(tls), mode=settings.socket_mode
        )

    async def start(self) -> None:
        """Start serving (health NOT_SERVING until ``mark_serving``)."""
        await self.health.set("", health_pb2.HealthCheckResponse.NOT_SERVING)
        await self.health.set(ADS_SERVICE, health_pb2.HealthCheckResponse.NOT_SERVING)
        await self._server.start()

    async def mark_serving(self) -> None:
        """A snapshot exists: tell health checkers we serve."""
        await self.health.set("", health_pb2.HealthCheckResponse.SERVING)
        await self.health.set(ADS_SERVICE, health_pb2.HealthCheckResponse.SERVING)

    async def stop(self, grace: float) -> None:
        """Stop accepting streams; let open ones end within ``grace`` seconds."""
        await self.health.enter_graceful_shutdown()
        await self._server.stop(grace)


def _options(settings: GrpcConfig) -> list[tuple[str, int]]:
    return [
        ("grpc.max_concurrent_streams", settings.max_concurrent_streams),
        ("grpc.keepalive_time_ms", int(settings.keepalive_time_s * 1000)),
        ("grpc.keepalive_timeout_ms", int(settings.keepalive_timeout_s * 1000)),
        ("grpc.keepalive_permit_without_calls", 1),
        (
            "grpc.http2.min_ping_interval_without_data_ms",
            int(settings.min_client_ping_interval_s * 1000),
        ),
    ]


def _credentials(tls: TlsConfig | None) -> grpc.ServerCredentials | None:
    return CertificateFiles(tls).credentials() if tls is not None else None


def _listen(
    server: grpc.aio.Server,
    address: str,
    *,
    credentials: grpc.ServerCredentials | None,
    mode: int,
) -> int:
    # grpcio raises RuntimeError("Failed to bind ...") on a port in use or an address this host
    # does not have (releases before 1.5x returned 0): either way, one error of ours.
    # Only a Unix address is parsed here: tests and benchmarks bind "127.0.0.1:0".
    where = parse_xds_address(address) if address.startswith("unix:") else address
    target = f"unix:{where}" if isinstance(where, Path) else address
    try:
        with _private_umask(mode) if isinstance(where, Path) else contextlib.nullcontext():
            if credentials is None:
                port = server.add_insecure_port(target)
            else:
                port = server.add_secure_port(target, credentials)
    except RuntimeError as exc:
        raise ServeError(f"cannot listen on {address}: in use, or not an address here") from exc
    if port == 0:
        raise ServeError(f"cannot listen on {address}: in use, or not an address here")
    if isinstance(where, Path):
        os.chmod(where, mode)  # the umask already kept others out while it was created
        return 0
    return port


@contextlib.contextmanager
def _private_umask(mode: int) -> Iterator[None]:
    """Create the socket file with no more than ``mode`` from the start (no window in which
    another user could connect before ``chmod``)."""
    previous = os.umask(0o777 & ~mode)
    try:
        yield
    finally:
        os.umask(previous)
