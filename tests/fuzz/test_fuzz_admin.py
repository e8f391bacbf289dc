"""The admin API on random paths, query strings and raw request bytes, against a real
``AdminServer`` on loopback with a published snapshot, live weights and a stream whose state
came from a garbage request: never a 5xx."""

from __future__ import annotations

import asyncio
import math
import socket
from collections.abc import Collection, Iterator, Mapping
from pathlib import Path

import aiohttp
import pytest
from envoy.service.discovery.v3 import discovery_pb2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from yarl import URL

from xds_control.admin import AdminServer, AdminViews
from xds_control.cache import DEFAULT_GROUP, MemorySnapshotCache
from xds_control.config import load_config
from xds_control.control import ControlLoop, Weigher
from xds_control.server import AdsStream, StreamRegistry
from xds_control.signals import Sample, Signal, Target

pytestmark = pytest.mark.fuzz

FUZZ = settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
CONFIG = """
pools: [{name: a, endpoints: [{address: 127.0.0.1:8001}, {address: 127.0.0.1:8002}]}]
listeners: [{name: gw, address: 127.0.0.1:10000, routes: [{name: r, pool: a}]}]
"""
ROUTES = [
    "/healthz",
    "/readyz",
    "/metrics",
    "/v1/status",
    "/v1/streams",
    "/v1/snapshot",
    "/v1/endpoints",
    "/v1/weights",
    "/v1/events",
    "/v1/",
    "/",
    "//v1//weights",
    "/v1/weights/",
]
KEYS = ["explain", "resources", "group", "format", "pool", "after", "limit", "", "a[]", "%00"]


class Signals:
    """A signal source with one reading an operator would call odd (NaN, rejected)."""

    async def fetch(self, targets: Collection[Target]) -> Mapping[str, Sample]:
        return {
            t.address: Sample.build(
                address=t.address,
                values=[(Signal.RUNNING, 3.0), (Signal.KV_USAGE, math.nan)],
                observed_at=1.7e9,
                source="test",
            )
            for t in targets
        }


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def admin(
    fuzz_loop: asyncio.AbstractEventLoop, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    path = Path(tmp_path_factory.mktemp("admin")) / "config.yaml"
    path.write_text(CONFIG, encoding="utf-8")

    async def start() -> AdminServer:
        cache = MemorySnapshotCache()
        registry = StreamRegistry()
        weigher = Weigher(prometheus=Signals(), scrape=None)
        loop = ControlLoop(config=load_config(path), config_path=path, cache=cache, weigher=weigher)
        await loop.step()
        stream = AdsStream(
            stream_id=1, snapshot_of=cache.snapshot, changed_names=cache.changed_names
        )
        garbage = discovery_pb2.DiscoveryRequest(
            type_url="\x00garbage", resource_names=["", "*", "a"]
        )
        stream.on_request(garbage, group=DEFAULT_GROUP, now=1.0)
        registry.add(stream)
        server = AdminServer(
            address=f"127.0.0.1:{free_port()}",
            views=AdminViews(state=loop.state, cache=cache, registry=registry, engine=weigher.view),
        )
        await server.start()
        return server

    server = fuzz_loop.run_until_complete(start())
    yield f"http://127.0.0.1:{server.port}"
    fuzz_loop.run_until_complete(server.stop())


paths = st.one_of(
    st.sampled_from(ROUTES),
    st.builds(lambda r, tail: r + tail, st.sampled_from(ROUTES), st.text(max_size=10)),
    st.text(max_size=30).map(lambda p: "/" + p),
)
queries = st.lists(
    st.tuples(st.one_of(st.sampled_from(KEYS), st.text(max_size=6)), st.text(max_size=8)),
    max_size=4,
)


async def get(base: str, path: str, query: list[tuple[str, str]]) -> int:
    url = URL(base).with_path(path).with_query(query)
    async with aiohttp.ClientSession() as client, client.get(url) as response:
        await response.read()
        return response.status


@FUZZ
@given(path=paths, query=queries)
def test_random_paths_and_queries_never_5xx(
    fuzz_loop: asyncio.AbstractEventLoop, admin: str, path: str, query: list[tuple[str, str]]
) -> None:
    status = fuzz_loop.run_until_complete(get(admin, path, query))
    assert status < 500, (path, query, status)


async def raw(base: str, data: bytes) -> bytes:
    url = URL(base)
    reader, writer = await asyncio.open_connection(url.host, url.port)
    try:
        writer.write(data)
        await writer.drain()
        writer.write_eof()
        async with asyncio.timeout(5):
            return await reader.read(64)
    finally:
        writer.close()


request_lines = st.builds(
    lambda method, target, version, headers: (
        method + b" " + target + b" " + version + b"\r\n" + headers + b"\r\n\r\n"
    ),
    st.sampled_from([b"GET", b"POST", b"HEAD", b"BREW", b""]),
    st.one_of(st.sampled_from([r.encode() for r in ROUTES]), st.binary(max_size=40)),
    st.sampled_from([b"HTTP/1.1", b"HTTP/1.0", b"HTTP/9", b""]),
    st.binary(max_size=60),
)


@FUZZ
@given(data=st.one_of(request_lines, st.binary(max_size=200)))
def test_raw_request_bytes_never_5xx(
    fuzz_loop: asyncio.AbstractEventLoop, admin: str, data: bytes
) -> None:
    head = fuzz_loop.run_until_complete(raw(admin, data))
    if head.startswith(b"HTTP/"):
        status = int(head.split(b" ")[1])
        assert status < 500, (data, head)
    # Whatever the last connection did, the server still answers.
    assert fuzz_loop.run_until_complete(get(admin, "/v1/weights", [("explain", "1")])) == 200
