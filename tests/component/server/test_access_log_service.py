"""Envoy's access-log service on the ADS port: entries streamed over real gRPC land in the
data path's window and come out of ``DataPathSource`` as samples; entries with no upstream, or
sent while the data path is off, are counted and dropped; nothing reaches gRPC as an error."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import grpc
from envoy.data.accesslog.v3 import accesslog_pb2 as al
from envoy.service.accesslog.v3 import als_pb2, als_pb2_grpc

from xds_control.cache import MemorySnapshotCache
from xds_control.config import DataPathConfig
from xds_control.config.model import Engine
from xds_control.server import StreamRegistry, XdsServer
from xds_control.signals import AccessLogServicer, DataPath, DataPathSource, Signal, Target
from xds_control.signals.metrics import DATA_PATH_ENTRIES

NOW = 1_700_000_100.0


def _entry(address: str | None, *, start: float, ttfb: float, last: float, body: int) -> bytes:
    entry = al.HTTPAccessLogEntry()
    common = entry.common_properties
    common.start_time.FromNanoseconds(int(start * 1e9))
    common.upstream_cluster = "chat"
    if address is not None:
        host, port = address.split(":")
        common.upstream_remote_address.socket_address.address = host
        common.upstream_remote_address.socket_address.port_value = int(port)
    common.time_to_first_upstream_rx_byte.FromNanoseconds(int(ttfb * 1e9))
    common.time_to_last_upstream_rx_byte.FromNanoseconds(int(last * 1e9))
    entry.response.response_code.value = 200
    entry.response.response_body_bytes = body
    entry.response.response_headers["content-type"] = "text/event-stream"
    raw: bytes = entry.SerializeToString()
    return raw


def _message(*entries: bytes, node: str | None = None) -> als_pb2.StreamAccessLogsMessage:
    message = als_pb2.StreamAccessLogsMessage()
    if node is not None:
        message.identifier.node.id = node
        message.identifier.log_name = "xds-control"
    for raw in entries:
        message.http_logs.log_entry.add().ParseFromString(raw)
    return message


def _count(outcome: str) -> float:
    value = DATA_PATH_ENTRIES.labels(outcome=outcome)._value.get()
    return float(value)


async def test_streamed_entries_become_samples_and_nothing_raises() -> None:
    data_path = DataPath(config=DataPathConfig(enabled=True, window_s=10))
    servicer = AccessLogServicer(data_path=data_path, clock=lambda: NOW)
    server = XdsServer(
        cache=MemorySnapshotCache(),
        registry=StreamRegistry(),
        address="127.0.0.1:0",
        access_log=servicer,
    )
    await server.start()
    before = {o: _count(o) for o in ("counted", "skipped", "dropped")}
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel:
            stub = als_pb2_grpc.AccessLogServiceStub(channel)

            async def messages() -> AsyncIterator[als_pb2.StreamAccessLogsMessage]:
                fast = [
                    _entry(
                        "127.0.0.1:8001", start=NOW - 5 + i * 0.1, ttfb=0.05, last=0.55, body=500
                    )
                    for i in range(20)
                ]
                slow = [
                    _entry("127.0.0.1:8002", start=NOW - 5 + i * 0.5, ttfb=0.2, last=2.2, body=500)
                    for i in range(4)
                ]
                yield _message(*fast[:10], node="envoy-0")
                yield _message(*fast[10:], *slow, _entry(None, start=NOW, ttfb=0, last=0, body=0))

            await asyncio.wait_for(stub.StreamAccessLogs(messages()), 10)

        source = DataPathSource(data_path=data_path, clock=lambda: NOW)
        targets = [
            Target(address=a, engine=Engine.VLLM, ttft_slo_s=1.0)
            for a in ("127.0.0.1:8001", "127.0.0.1:8002", "127.0.0.1:8003")
        ]
        samples = await source.fetch(targets)
        assert set(samples) == {"127.0.0.1:8001", "127.0.0.1:8002"}
        fast, slow = samples["127.0.0.1:8001"].values, samples["127.0.0.1:8002"].values
        assert fast[Signal.DATAPATH_REQUESTS] == 20
        assert slow[Signal.DATAPATH_REQUESTS] == 4
        assert fast[Signal.DATAPATH_STEP_S] < slow[Signal.DATAPATH_STEP_S]
        assert fast[Signal.DATAPATH_TTFB_S] < slow[Signal.DATAPATH_TTFB_S]
        assert _count("counted") - before["counted"] == 24
        assert _count("skipped") - before["skipped"] == 1

        # Off: the service still answers, and what arrives is dropped.
        data_path.configure(DataPathConfig(enabled=False, window_s=10))
        async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel:
            stub = als_pb2_grpc.AccessLogServiceStub(channel)

            async def more() -> AsyncIterator[als_pb2.StreamAccessLogsMessage]:
                yield _message(_entry("127.0.0.1:8003", start=NOW, ttfb=0.1, last=0.2, body=9))

            await asyncio.wait_for(stub.StreamAccessLogs(more()), 10)
        assert _count("dropped") - before["dropped"] == 1
        assert "127.0.0.1:8003" not in data_path.window.samples(now=NOW)
    finally:
        await server.stop(grace=0.5)


async def test_a_stream_that_breaks_mid_way_ends_with_an_empty_answer() -> None:
    data_path = DataPath(config=DataPathConfig(enabled=True))
    servicer = AccessLogServicer(data_path=data_path, clock=lambda: NOW)

    async def broken() -> AsyncIterator[als_pb2.StreamAccessLogsMessage]:
        yield _message(_entry("127.0.0.1:8001", start=NOW - 1, ttfb=0.1, last=0.5, body=10))
        raise ConnectionResetError("gone")

    answer = await servicer.stream(broken())
    assert answer == als_pb2.StreamAccessLogsResponse()
    assert "127.0.0.1:8001" in data_path.window.samples(now=NOW)
