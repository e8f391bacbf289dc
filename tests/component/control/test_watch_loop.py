"""ControlLoop.run with its file watch: an edit is published without waiting for the reconcile
period, a burst of edits becomes one push, and a watcher that cannot start leaves polling."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest
from envoy.config.endpoint.v3 import endpoint_pb2

from xds_control.cache import DEFAULT_GROUP, MemorySnapshotCache
from xds_control.config import load_config
from xds_control.control import ControlLoop
from xds_control.tasks import guarded_task
from xds_control.xds import type_urls as urls

CONFIG = """\
signals: {reconcile_period_s: %(period)s}
watch: {debounce_ms: %(debounce)s, max_delay_ms: 1000}
pools:
  - name: chat
    endpoints_file: %(eps)s
listeners:
  - name: gateway
    address: 127.0.0.1:10000
    routes: [{name: all, pool: chat}]
"""


def endpoints(weight: int) -> str:
    return f"endpoints: [{{address: 127.0.0.1:8001, weight: {weight}}}]\n"


def replace(path: Path, text: str) -> None:
    """As an editor saves: a new file renamed over the old one (a new inode)."""
    scratch = path.with_name(f".{path.name}.swp")
    scratch.write_text(text, encoding="utf-8")
    os.replace(scratch, path)


def weight(cache: MemorySnapshotCache) -> int | None:
    """The one endpoint's weight served; ``None`` before a snapshot or with no endpoint."""
    snapshot = cache.snapshot(DEFAULT_GROUP)
    if snapshot is None:
        return None
    cla = snapshot.resource_set(urls.ENDPOINT).resources["chat"].message
    assert isinstance(cla, endpoint_pb2.ClusterLoadAssignment)
    hosts = [lb for locality in cla.endpoints for lb in locality.lb_endpoints]
    return int(hosts[0].load_balancing_weight.value) if hosts else None


class Pushes:
    def __init__(self) -> None:
        self.count = 0

    def __call__(self) -> None:
        self.count += 1


async def started(
    tmp_path: Path, *, period: float = 30, eps: str = "eps.yaml", debounce: int = 20
) -> tuple[ControlLoop, MemorySnapshotCache, Pushes, asyncio.Task[None]]:
    config = tmp_path / "config.yaml"
    config.write_text(CONFIG % {"period": period, "eps": eps, "debounce": debounce})
    if not Path(eps).is_absolute():
        replace(tmp_path / eps, endpoints(10))
    cache = MemorySnapshotCache()
    pushes = Pushes()
    cache.subscribe(DEFAULT_GROUP, pushes)
    loop = ControlLoop(config=load_config(config), config_path=config, cache=cache)
    task = guarded_task(loop.run(), name="loop")
    await asyncio.wait_for(loop.published.wait(), 5)
    await asyncio.sleep(0.2)  # the watcher is running
    return loop, cache, pushes, task


async def stopped(task: asyncio.Task[None]) -> None:
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def until(check: object, timeout: float) -> float:
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if callable(check) and check():
            return time.monotonic() - start
        await asyncio.sleep(0.005)
    raise AssertionError(f"not within {timeout}s")


async def test_an_edit_is_published_without_waiting_for_the_period(tmp_path: Path) -> None:
    loop, cache, _, task = await started(tmp_path, period=30)
    try:
        assert weight(cache) == 10
        replace(tmp_path / "eps.yaml", endpoints(77))
        took = await until(lambda: weight(cache) == 77, timeout=1.0)
        assert took < 0.5
        assert loop.watch.error is None
    finally:
        await stopped(task)


@pytest.mark.serial  # edits a few ms apart: a busy core spreads them past the debounce
async def test_a_burst_of_edits_is_one_push(tmp_path: Path) -> None:
    # A 50 ms quiet window: a test process descheduled for 20 ms on a busy machine would
    # split the burst, which is the window doing its job, not what is tested here.
    _, cache, pushes, task = await started(tmp_path, period=30, debounce=50)
    try:
        before = pushes.count
        start = time.monotonic()
        for n in range(100):
            replace(tmp_path / "eps.yaml", endpoints(1 + n))
            await asyncio.sleep(0.0005)
        assert time.monotonic() - start < 0.5  # one burst, inside max_delay_ms
        await until(lambda: weight(cache) == 100, timeout=1.0)
        await asyncio.sleep(0.3)  # room for any late second push
        assert pushes.count - before == 1
    finally:
        await stopped(task)


async def test_a_config_edit_that_names_a_new_file_watches_it(tmp_path: Path) -> None:
    _, cache, _, task = await started(tmp_path, period=30)
    try:
        other = tmp_path / "sub"
        other.mkdir()
        replace(other / "eps2.yaml", endpoints(5))
        text = CONFIG % {"period": 30, "eps": str(other / "eps2.yaml"), "debounce": 20}
        replace(tmp_path / "config.yaml", text)
        await until(lambda: weight(cache) == 5, timeout=1.0)
        await asyncio.sleep(0.2)  # the watcher moved to the new folder
        replace(other / "eps2.yaml", endpoints(6))
        await until(lambda: weight(cache) == 6, timeout=1.0)
    finally:
        await stopped(task)


async def test_without_a_watch_the_period_still_polls(tmp_path: Path) -> None:
    # The endpoints folder does not exist yet: the watcher fails, logs it, and polling goes on.
    missing = tmp_path / "later" / "eps.yaml"
    config = tmp_path / "config.yaml"
    config.write_text(CONFIG % {"period": 0.2, "eps": str(missing), "debounce": 20})
    cache = MemorySnapshotCache()
    loop = ControlLoop(config=load_config(config), config_path=config, cache=cache)
    task = guarded_task(loop.run(), name="loop")
    try:
        await until(lambda: loop.watch.error is not None, timeout=2.0)
        assert "No such file" in loop.state.errors["watch"]  # shown in /v1/status
        missing.parent.mkdir()
        replace(missing, endpoints(42))
        await until(lambda: weight(cache) == 42, timeout=2.0)
        await until(lambda: "watch" not in loop.state.errors, timeout=7.0)  # retried: it runs
        replace(missing, endpoints(43))
        await until(lambda: weight(cache) == 43, timeout=2.0)
    finally:
        await stopped(task)


async def test_a_configmap_symlink_swap_is_seen(tmp_path: Path) -> None:
    # A Kubernetes ConfigMap volume: eps.yaml -> ..data/eps.yaml, ..data -> ..<timestamp>; an
    # update writes a new timestamped folder and renames a new ..data link over the old one.
    volume = tmp_path / "volume"
    volume.mkdir()
    (volume / "..v1").mkdir()
    (volume / "..v1" / "eps.yaml").write_text(endpoints(10))
    (volume / "..data").symlink_to("..v1")
    (volume / "eps.yaml").symlink_to("..data/eps.yaml")
    _, cache, _, task = await started(tmp_path, period=30, eps=str(volume / "eps.yaml"))
    try:
        assert weight(cache) == 10
        (volume / "..v2").mkdir()
        (volume / "..v2" / "eps.yaml").write_text(endpoints(33))
        (volume / "..data_tmp").symlink_to("..v2")
        os.replace(volume / "..data_tmp", volume / "..data")
        await until(lambda: weight(cache) == 33, timeout=1.0)
    finally:
        await stopped(task)
