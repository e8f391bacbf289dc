"""ControlLoop.step against a config file on disk: what gets published, and what a bad edit
leaves being served."""

from __future__ import annotations

import os
from pathlib import Path

from envoy.config.endpoint.v3 import endpoint_pb2

from configs import ONE_POOL
from xds_control.cache import DEFAULT_GROUP, MemorySnapshotCache
from xds_control.config import load_config
from xds_control.control import ControlLoop
from xds_control.xds import Snapshot
from xds_control.xds import type_urls as urls

TWO_ENDPOINTS = ONE_POOL.replace(
    "[{address: 127.0.0.1:8001, weight: 10}]",
    "[{address: 127.0.0.1:8001, weight: 10}, {address: 127.0.0.1:8002, weight: 30}]",
)
BAD_WEIGHT = ONE_POOL.replace("weight: 10", "weight: 0")
FROM_FILE = ONE_POOL.replace(
    "endpoints: [{address: 127.0.0.1:8001, weight: 10}]", "endpoints_file: eps.yaml"
)


def write(path: Path, text: str) -> None:
    """Replace the file atomically and make sure its mtime moves, even within one clock tick."""
    before = path.stat().st_mtime_ns if path.exists() else 0
    scratch = path.with_suffix(".tmp")
    scratch.write_text(text, encoding="utf-8")
    os.replace(scratch, path)
    later = max(path.stat().st_mtime_ns, before + 1_000_000_000)
    os.utime(path, ns=(later, later))


class Wakes:
    def __init__(self) -> None:
        self.count = 0

    def __call__(self) -> None:
        self.count += 1


def make_loop(path: Path, text: str) -> tuple[ControlLoop, MemorySnapshotCache, Wakes]:
    write(path, text)
    cache = MemorySnapshotCache()
    wakes = Wakes()
    cache.subscribe(DEFAULT_GROUP, wakes)
    loop = ControlLoop(config=load_config(path), config_path=path, cache=cache)
    return loop, cache, wakes


def served(cache: MemorySnapshotCache) -> Snapshot:
    snapshot = cache.snapshot(DEFAULT_GROUP)
    assert snapshot is not None
    return snapshot


def eds(snapshot: Snapshot, pool: str) -> dict[str, int]:
    """What Envoy would get for ``pool``: address -> weight."""
    cla = snapshot.resource_set(urls.ENDPOINT).resources[pool].message
    assert isinstance(cla, endpoint_pb2.ClusterLoadAssignment)
    out = {}
    for locality in cla.endpoints:
        for lb in locality.lb_endpoints:
            sock = lb.endpoint.address.socket_address
            out[f"{sock.address}:{sock.port_value}"] = lb.load_balancing_weight.value
    return out


async def test_first_step_publishes_the_config(tmp_path: Path) -> None:
    loop, cache, wakes = make_loop(tmp_path / "config.yaml", ONE_POOL)
    assert cache.snapshot(DEFAULT_GROUP) is None
    await loop.step()
    snapshot = served(cache)
    assert wakes.count == 1
    assert loop.published.is_set()
    assert loop.state.version == snapshot.version
    assert loop.state.published_at > 0
    assert loop.state.config_error is None
    assert sorted(snapshot.resource_set(urls.CLUSTER).resources) == ["chat"]
    assert sorted(snapshot.resource_set(urls.LISTENER).resources) == ["gateway"]
    assert eds(snapshot, "chat") == {"127.0.0.1:8001": 10}


async def test_unchanged_inputs_publish_nothing_new(tmp_path: Path) -> None:
    loop, cache, wakes = make_loop(tmp_path / "config.yaml", ONE_POOL)
    await loop.step()
    first = served(cache)
    published_at = loop.state.published_at
    for _ in range(3):
        await loop.step()
    assert served(cache) is first
    assert wakes.count == 1
    assert loop.state.published_at == published_at


async def test_rewriting_the_same_config_publishes_nothing_new(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    loop, cache, wakes = make_loop(path, ONE_POOL)
    await loop.step()
    write(path, ONE_POOL)  # touched, same content: the same version, no push to any Envoy
    await loop.step()
    assert wakes.count == 1
    assert loop.state.version == served(cache).version


async def test_an_invalid_edit_keeps_the_last_good_snapshot(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    loop, cache, wakes = make_loop(path, ONE_POOL)
    await loop.step()
    good = served(cache)
    write(path, BAD_WEIGHT)
    await loop.step()
    error = loop.state.config_error
    assert error is not None
    assert str(path) in error
    assert "pools[0].endpoints[0].weight" in error
    assert served(cache) is good
    assert loop.state.version == good.version
    assert wakes.count == 1
    await loop.step()  # the bad file is still there: still rejected, still the good snapshot
    assert loop.state.config_error == error
    assert served(cache) is good


async def test_a_valid_edit_after_a_bad_one_publishes_and_clears_the_error(
    tmp_path: Path,
) -> None:
    path = tmp_path / "config.yaml"
    loop, cache, wakes = make_loop(path, ONE_POOL)
    await loop.step()
    good = served(cache)
    write(path, BAD_WEIGHT)
    await loop.step()
    assert loop.state.config_error is not None
    write(path, TWO_ENDPOINTS)
    await loop.step()
    snapshot = served(cache)
    assert snapshot.version != good.version
    assert loop.state.version == snapshot.version
    assert loop.state.config_error is None
    assert wakes.count == 2
    assert eds(snapshot, "chat") == {"127.0.0.1:8001": 10, "127.0.0.1:8002": 30}


async def test_a_deleted_config_keeps_serving_until_it_returns(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    loop, cache, _ = make_loop(path, ONE_POOL)
    await loop.step()
    good = served(cache)
    path.unlink()
    await loop.step()
    assert loop.state.config_error is not None
    assert str(path) in loop.state.config_error
    assert served(cache) is good
    write(path, TWO_ENDPOINTS)
    await loop.step()
    assert loop.state.config_error is None
    assert len(eds(served(cache), "chat")) == 2


async def test_a_bad_endpoints_file_keeps_the_last_good_endpoints(tmp_path: Path) -> None:
    endpoints = tmp_path / "eps.yaml"
    write(endpoints, "endpoints: [{address: 127.0.0.1:8001, weight: 10}]\n")
    loop, cache, _ = make_loop(tmp_path / "config.yaml", FROM_FILE)
    await loop.step()
    assert eds(served(cache), "chat") == {"127.0.0.1:8001": 10}
    good = served(cache)

    write(endpoints, "endpoints: [{address: 127.0.0.1:8001, weight: 0}]\n")
    await loop.step()
    assert "endpoints[0].weight" in loop.state.discovery_errors["chat"]
    assert served(cache) is good  # a bad edit never empties the pool

    write(endpoints, "endpoints: [{address: 127.0.0.1:8003, weight: 20}]\n")
    await loop.step()
    assert loop.state.discovery_errors == {}
    assert eds(served(cache), "chat") == {"127.0.0.1:8003": 20}
