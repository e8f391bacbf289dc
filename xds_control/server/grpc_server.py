"""The gRPC server: ADS, health and reflection on one port."""

from __future__ import annotations

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

# The asyncio servicer's public name (grpcio-health-checking exports it as ``health.aio``);
# grpc-stubs' health.pyi predates it, hence the one ignore.
from grpc_health.v1.health import aio as health_aio  # type: ignore[attr-defined]
from grpc_reflection.v1alpha import reflection

from xds_control.cache import SnapshotCache
from xds_control.errors import ServeError
from xds_control.server.ads import AdsHandler
from xds_control.server.registry import StreamRegistry
from xds_control.xds.type_urls import ADS_SERVICE

__all__ = ["XdsServer"]


class XdsServer:
    """Owns the grpc.aio server. Health reports NOT_SERVING until the first snapshot exists."""

    def __init__(self, *, cache: SnapshotCache, registry: StreamRegistry, address: str) -> None:
        self.address = address
        self.health = health_aio.HealthServicer()
        self._server = grpc.aio.server(
            options=[
                ("grpc.max_concurrent_streams", 10_000),
                ("grpc.keepalive_permit_without_calls", 1),
                ("grpc.http2.min_ping_interval_without_data_ms", 10_000),
            ]
        )
        ads = AdsHandler(cache=cache, registry=registry)
        self._server.add_generic_rpc_handlers([ads.generic_handler()])
        health_pb2_grpc.add_HealthServicer_to_server(self.health, self._server)
        reflection.enable_server_reflection(
            (ADS_SERVICE, health.SERVICE_NAME, reflection.SERVICE_NAME), self._server
        )
        self.port = _listen(self._server, address)

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


def _listen(server: grpc.aio.Server, address: str) -> int:
    # grpcio raises RuntimeError("Failed to bind ...") on a port in use or an address this host
    # does not have (releases before 1.5x returned 0): either way, one error of ours.
    try:
        port = server.add_insecure_port(address)
    except RuntimeError as exc:
        raise ServeError(f"cannot listen on {address}: in use, or not an address here") from exc
    if port == 0:
        raise ServeError(f"cannot listen on {address}: in use, or not an address here")
    return port
