"""The picker's servers over real gRPC on loopback, as a Gateway API Inference Extension
gateway talks to them: no pool named in the stream, gRPC health by the protocol's names."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import grpc
import pytest
import yaml
from envoy.service.ext_proc.v3 import external_processor_pb2 as ext
from grpc_health.v1 import health_pb2, health_pb2_grpc

from xds_control.config import parse_config
from xds_control.discovery import to_endpoints
from xds_control.picker import Fleet, Picker, PickerServer
from xds_control.picker.server import PROCESS_METHOD
from xds_lab.harness.ports import free_port

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


def _config(alone: str, shared: str) -> str:
    def pool(name: str, address: str, host: int) -> dict[str, object]:
        return {
            "name": name,
            "endpoints": [{"address": f"10.0.0.{host}:8000"}],
            "picker": {"address": address},
        }

    return yaml.safe_dump(
        {
            "pools": [pool("chat", alone, 1), pool("x", shared, 2), pool("y", shared, 3)],
            "listeners": [
                {
                    "name": "gw",
                    "address": "127.0.0.1:10000",
                    "routes": [
                        {"name": "x", "pool": "x", "match": {"prefix": "/x"}},
                        {"name": "y", "pool": "y", "match": {"prefix": "/y"}},
                        {"name": "chat", "pool": "chat"},
                    ],
                }
            ],
        }
    )


@pytest.fixture
async def server() -> AsyncIterator[PickerServer]:
    alone, shared = f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"
    config = parse_config(text=_config(alone, shared))
    endpoints = {pool.name: to_endpoints(pool.endpoints) for pool in config.pools}
    fleet = Fleet(config=lambda: config, endpoints=lambda: endpoints, decisions=dict)
    picker_server = PickerServer(picker=Picker(fleet=fleet), addresses=[alone, shared])
    await picker_server.start()
    try:
        yield picker_server
    finally:
        await picker_server.stop(grace=0.1)


async def _exchange(address: str) -> ext.ProcessingResponse:
    """One request as a gateway sends it (no pool named): headers, then the body."""
    body = json.dumps({"messages": [{"role": "user", "content": "hello"}]}).encode()
    messages = [
        ext.ProcessingRequest(request_headers=ext.HttpHeaders()),
        ext.ProcessingRequest(request_body=ext.HttpBody(body=body, end_of_stream=True)),
    ]
    async with grpc.aio.insecure_channel(address) as channel:
        call = channel.stream_stream(
            PROCESS_METHOD,
            request_serializer=ext.ProcessingRequest.SerializeToString,
            response_deserializer=ext.ProcessingResponse.FromString,
        )(iter(messages))
        responses = [response async for response in call]
    assert len(responses) == 2
    return responses[1]


async def _health(address: str, service: str) -> int:
    async with grpc.aio.insecure_channel(address) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        reply = await stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=5)
        return int(reply.status)


async def test_a_stream_that_names_no_pool_is_for_the_one_pool_at_its_address(
    server: PickerServer,
) -> None:
    alone, shared = server.addresses
    picked = await _exchange(alone)
    [option] = picked.request_body.response.header_mutation.set_headers
    assert option.header.raw_value.decode() == "10.0.0.1:8000"
    # Two pools share the other address: a stream there must name its pool.
    refused = await _exchange(shared)
    assert refused.immediate_response.status.code == 503


async def test_health_by_the_protocols_names_alive_at_once_ready_after_the_first_publish(
    server: PickerServer,
) -> None:
    for address in server.addresses:
        assert await _health(address, "liveness") == SERVING
        for service in ("readiness", "envoy.service.ext_proc.v3.ExternalProcessor", ""):
            assert await _health(address, service) == NOT_SERVING, service
    await server.mark_ready()
    for address in server.addresses:
        for service in ("liveness", "readiness", "envoy.service.ext_proc.v3.ExternalProcessor"):
            assert await _health(address, service) == SERVING, service
