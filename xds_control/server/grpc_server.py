"""The gRPC server: ADS, health and reflection on one port."""

from __future__ import annotations

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_health.v1._async import HealthServicer
from grpc_reflection.v1alpha import reflection

from xds_control.cache import SnapshotCache
from xds_control.server.ads import AdsHandler
from xds_control.server.registry import StreamRegistry

__all__ = ["ADS_SERVICE", "XdsServer"]

ADS_SERVICE = "envoy.service.discovery.v3.AggregatedDiscoveryService"


class XdsServer:
    """Owns the grpc.aio server. Health reports NOT_SERVING until the first snapshot exists."""

    def __init__(self, *, cache: SnapshotCache, registry: StreamRegistry, address: str) -> None:
        self.address = address
        self.health = HealthServicer()
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
        self.port = self._server.add_insecure_port(address)
        if self.port == 0:
            raise OSError(f"cannot listen on {address}")

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
