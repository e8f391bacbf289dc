"""The picker as Envoy's ``ext_proc`` gRPC service, and the servers that host it.

Thin on purpose: one ``Exchange`` per ``ext_proc`` stream (one HTTP request). Two kinds of
client, told apart by whether the stream names its pool:

- Envoy as ``xds-control`` configures it names the pool in the stream's gRPC metadata
  (``x-xds-control-pool``), and the route's priority class where it has one
  (``x-xds-control-band``: the band of a request whose priority header names none), and fails
  open: a request the picker cannot place gets no answer and the pool's own policy (weighted
  MAGLEV) takes it.
- A gateway of the Inference Extension runs one picker per pool and names none: the pool is
  the one whose picker serves at the address the stream came to. It may restrict the pick to
  a subset (``envoy.lb.subset_hint``), and is answered 503 when there is no endpoint to name,
  as the protocol requires.

Both send the response's headers with the endpoint that served, as the protocol says:
``x-gateway-destination-endpoint-served`` under ``envoy.lb`` in the message's metadata. The
picker then ends the request's prefill in its ledger and, where it served elsewhere than
picked, records its prompt there. A gateway that sends the response's body in full duplex
(Istio's, GKE's) passes on only what the picker gives back: every piece is given back as it
came.

Nothing here raises into gRPC: a message the picker cannot use is answered with no mutation.
Each address also serves gRPC health: ``liveness`` once started; ``readiness`` and the
``ext_proc`` service once ``mark_ready`` (the control loop's first publish).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import grpc
import structlog
from envoy.service.ext_proc.v3 import external_processor_pb2 as ext
from grpc_health.v1 import health_pb2, health_pb2_grpc

# The asyncio servicer's public name (grpcio-health-checking exports it as ``health.aio``);
# grpc-stubs' health.pyi predates it, hence the one ignore.
from grpc_health.v1.health import aio as health_aio  # type: ignore[attr-defined]

from xds_control.flow import Band, FlowController
from xds_control.picker.exchange import Exchange
from xds_control.picker.picker import Picker
from xds_control.xds.picker import BAND_METADATA, POOL_METADATA

__all__ = ["HEALTH_SERVICES", "PROCESS_METHOD", "PickerServer", "add_ext_proc"]

log = structlog.get_logger(__name__)

PROCESS_METHOD = "/envoy.service.ext_proc.v3.ExternalProcessor/Process"
HEALTH_SERVICES = ("liveness", "readiness", "envoy.service.ext_proc.v3.ExternalProcessor")
"""The health services the protocol names; ``""`` (the whole server) follows readiness."""


def add_ext_proc(
    server: grpc.aio.Server,
    process: Callable[
        [AsyncIterator[ext.ProcessingRequest], grpc.aio.ServicerContext[Any, Any]],
        AsyncIterator[ext.ProcessingResponse],
    ],
) -> None:
    """Serve Envoy's ``ext_proc`` method on ``server`` with ``process``."""
    service, _, method = PROCESS_METHOD.strip("/").partition("/")
    handler = grpc.stream_stream_rpc_method_handler(
        process,
        request_deserializer=ext.ProcessingRequest.FromString,
        response_serializer=ext.ProcessingResponse.SerializeToString,
    )
    server.add_generic_rpc_handlers(
        [grpc.method_handlers_generic_handler(service, {method: handler})]
    )


class PickerServer:
    """One grpc.aio server per address in ``addresses``, each with the ``ext_proc`` service
    and gRPC health; a stream that names no pool is for the pool whose picker is the only one
    at its address."""

    def __init__(
        self, *, picker: Picker, addresses: Sequence[str], flow: FlowController | None = None
    ) -> None:
        self.picker = picker
        self.flow = flow
        self.addresses = tuple(addresses)
        self.health = health_aio.HealthServicer()
        self._servers = [self._server(address) for address in self.addresses]
        self.ports = [port for _, port in self._servers]

    def _server(self, address: str) -> tuple[grpc.aio.Server, int]:
        server = grpc.aio.server()

        async def process(
            requests: AsyncIterator[ext.ProcessingRequest],
            context: grpc.aio.ServicerContext[Any, Any],
        ) -> AsyncIterator[ext.ProcessingResponse]:
            async for response in self._process(requests, context, address=address):
                yield response

        add_ext_proc(server, process)
        health_pb2_grpc.add_HealthServicer_to_server(self.health, server)
        return server, server.add_insecure_port(address)

    async def _process(
        self,
        requests: AsyncIterator[ext.ProcessingRequest],
        context: grpc.aio.ServicerContext[Any, Any],
        *,
        address: str,
    ) -> AsyncIterator[ext.ProcessingResponse]:
        metadata = dict(context.invocation_metadata() or ())
        named = str(metadata.get(POOL_METADATA, ""))
        pool = named or self.picker.fleet.sole_pool(address) or ""
        band = Band.of(str(metadata.get(BAND_METADATA, "")))
        exchange = Exchange(self.picker, pool=pool, gateway=not named, flow=self.flow, band=band)
        started = time.monotonic()
        try:
            async for request in requests:
                for response in exchange.on(request):
                    yield response
                if exchange.holding:
                    for response in await exchange.resume():
                        yield response
        finally:
            exchange.end()
            log.debug(
                "picker stream closed", pool=pool, seconds=round(time.monotonic() - started, 4)
            )

    async def start(self) -> None:
        """Start serving: alive at once, ready only after ``mark_ready``."""
        serving, not_serving = (
            health_pb2.HealthCheckResponse.SERVING,
            health_pb2.HealthCheckResponse.NOT_SERVING,
        )
        await self.health.set("liveness", serving)
        for service in ("", *HEALTH_SERVICES[1:]):
            await self.health.set(service, not_serving)
        for server, _ in self._servers:
            await server.start()
        log.info("picker serving", addresses=self.addresses)

    async def mark_ready(self) -> None:
        """The loop has published: the picker knows the pools' endpoints."""
        for service in ("", *HEALTH_SERVICES[1:]):
            await self.health.set(service, health_pb2.HealthCheckResponse.SERVING)

    async def stop(self, *, grace: float = 1.0) -> None:
        """Stop; streams open after ``grace`` seconds are cancelled (Envoy then fails open)."""
        for service in ("", *HEALTH_SERVICES):
            await self.health.set(service, health_pb2.HealthCheckResponse.NOT_SERVING)
        for server, _ in self._servers:
            await server.stop(grace)
