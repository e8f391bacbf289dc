"""The control loop on real files and a real snapshot cache: no input stops it, and with the
weight engine on it never publishes weights the engine has not computed (warm restart)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

import yaml

from xds_control.admin.views import endpoints_view, status_view
from xds_control.cache import DEFAULT_GROUP, MemorySnapshotCache
from xds_control.config import load_config
from xds_control.control import ControlLoop, Weigher
from xds_control.errors import SignalError
from xds_control.signals import Sample, ScrapeSource, Signal, Target

FAST, SLOW = "127.0.0.1:8001", "127.0.0.1:8002"


def config_data(*, weight: int = 10, **extra: Any) -> dict[str, Any]:
    return {
        "pools": [
            {
                "name": "chat",
                "endpoints": [{"address": FAST, "weight": weight}, {"address": SLOW}],
            }
        ],
        "listeners": [
            {
                "name": "gw",
                "address": "127.0.0.1:10000",
                "routes": [{"name": "all", "pool": "chat"}],
            }
        ],
        **extra,
    }


ENGINE: dict[str, Any] = {
    "signals": {"prometheus_url": "http://127.0.0.1:1"},  # the source is a fake (below)
    "restart": {"state_file": "state.json", "first_publish_wait_s": 0.3},
}


def write(path: Path, data: dict[str, Any] | bytes) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(data if isinstance(data, bytes) else yaml.safe_dump(data).encode())
    tmp.replace(path)


class FakePrometheus:
    """A signal source: the fast server decodes 4x quicker; ``down`` learns nothing."""

    def __init__(self, *, down: bool = False) -> None:
        self.down = down
        self.bug = False

    async def fetch(self, targets: Collection[Target]) -> Mapping[str, Sample]:
        if self.bug:
            raise RuntimeError("a bug in a source")
        if self.down:
            raise SignalError("connection refused")
        now = time.time()
        step = {FAST: 0.01, SLOW: 0.04}
        return {
            t.address: Sample.build(
                address=t.address,
                values=[(Signal.DECODE_STEP_S, step[t.address]), (Signal.WAITING, 0.0)],
                observed_at=now,
                source="fake",
            )
            for t in targets
        }


def make_loop(
    path: Path, source: FakePrometheus | None = None
) -> tuple[ControlLoop, MemorySnapshotCache]:
    cache = MemorySnapshotCache()
    loop = ControlLoop(
        config=load_config(path),
        config_path=path,
        cache=cache,
        weigher=Weigher(prometheus=source, scrape=None),
    )
    return loop, cache


def served(cache: MemorySnapshotCache) -> dict[str, int]:
    snapshot = cache.snapshot(DEFAULT_GROUP)
    return {row["address"]: row["weight"] for row in endpoints_view(snapshot).get("chat", [])}


async def test_non_utf8_config_is_an_error_in_status_and_a_later_valid_edit_applies(
    tmp_path: Path,
) -> None:
    path = tmp_path / "config.yaml"
    write(path, config_data(weight=10))
    loop, loop_cache = make_loop(path)
    await loop.step()
    version = loop.state.version
    assert served(loop_cache) == {FAST: 10, SLOW: 10}

    write(path, yaml.safe_dump(config_data(weight=30)).encode() + b"# caf\xe9\n")
    await loop.step()
    status = status_view(loop.state)
    assert "not UTF-8 at byte" in status["config_error"], status
    assert str(path) in status["config_error"]
    assert status["version"] == version
    assert served(loop_cache) == {FAST: 10, SLOW: 10}

    write(path, config_data(weight=30))
    await loop.step()
    assert loop.state.config_error is None
    assert loop.state.version != version
    assert served(loop_cache) == {FAST: 30, SLOW: 10}


async def test_undecodable_endpoints_file_keeps_the_last_good_set(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    data = config_data()
    del data["pools"][0]["endpoints"]
    data["pools"][0]["endpoints_file"] = "chat.yaml"
    write(path, data)
    write(tmp_path / "chat.yaml", {"endpoints": [{"address": FAST}]})
    loop, loop_cache = make_loop(path)
    await loop.step()
    assert served(loop_cache) == {FAST: 10}

    write(tmp_path / "chat.yaml", b"endpoints:\n  - address: \xff\xfe\n")
    await loop.step()
    assert "not UTF-8 at byte" in loop.state.discovery_errors["chat"]
    assert served(loop_cache) == {FAST: 10}

    write(tmp_path / "chat.yaml", {"endpoints": [{"address": FAST}, {"address": SLOW}]})
    await loop.step()
    assert loop.state.discovery_errors == {}
    assert served(loop_cache) == {FAST: 10, SLOW: 10}


async def test_a_phase_that_raises_is_shown_and_the_loop_goes_on(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    write(path, config_data(**ENGINE))
    source = FakePrometheus()
    loop, loop_cache = make_loop(path, source)
    await loop.resume()
    await loop.step()
    weights = served(loop_cache)
    assert weights[FAST] > weights[SLOW]

    source.bug = True
    await loop.step()
    assert "RuntimeError: a bug in a source" in status_view(loop.state)["errors"]["weights"]
    assert served(loop_cache) == weights  # the last good weights

    # A config edit still reaches the snapshot, with the last good weights.
    write(path, config_data(**ENGINE, model_header="x-llm"))
    await loop.step()
    assert loop.state.config.model_header == "x-llm"
    assert served(loop_cache) == weights

    source.bug = False
    await loop.step()
    assert status_view(loop.state)["errors"] == {}


async def test_restart_with_a_state_file_publishes_the_same_version_before_any_signal(
    tmp_path: Path,
) -> None:
    path = tmp_path / "config.yaml"
    write(path, config_data(**ENGINE))
    first, first_cache = make_loop(path, FakePrometheus())
    await first.resume()
    for _ in range(3):
        await first.step()
    assert (tmp_path / "state.json").exists()
    before = served(first_cache)
    assert before[FAST] > before[SLOW]

    # The new process cannot read a signal yet: it publishes what the last one published.
    second, second_cache = make_loop(path, FakePrometheus(down=True))
    await second.resume()
    await second.step()
    assert second.state.version == first.state.version
    assert served(second_cache) == before
    # The engine's view shows the resumed decisions, capacity and all.
    view = second.weigher.view() if second.weigher else None
    assert view is not None
    assert {d.address: d.weight for d in view.pools["chat"]} == before


async def test_without_a_usable_state_nothing_is_published_until_signals_or_the_wait_ends(
    tmp_path: Path,
) -> None:
    path = tmp_path / "config.yaml"
    write(path, config_data(**ENGINE))
    first, _ = make_loop(path, FakePrometheus())
    await first.resume()
    await first.step()
    assert (tmp_path / "state.json").exists()

    # Another config (one weight differs): the saved state is not for it.
    write(path, config_data(weight=20, **ENGINE))
    source = FakePrometheus(down=True)
    second, second_cache = make_loop(path, source)
    await second.resume()
    await second.step()
    assert second_cache.snapshot(DEFAULT_GROUP) is None
    assert not second.published.is_set()

    source.down = False  # one round of signals: the engine's own weights, at once
    await second.step()
    weights = served(second_cache)
    assert weights[FAST] > weights[SLOW]

    # With no signal at all, the wait is bounded: then the engine decides from nothing.
    (tmp_path / "state.json").unlink()
    third, third_cache = make_loop(path, FakePrometheus(down=True))
    await third.resume()
    await third.step()
    assert third_cache.snapshot(DEFAULT_GROUP) is None
    await asyncio.sleep(0.35)
    await third.step()
    assert served(third_cache) == {FAST: 50, SLOW: 50}  # the base weight


async def test_stale_state_is_ignored(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    write(path, config_data(**ENGINE))
    first, _ = make_loop(path, FakePrometheus())
    await first.resume()
    await first.step()
    state = tmp_path / "state.json"
    text = state.read_text()
    saved_at = yaml.safe_load(text)["saved_at"]
    state.write_text(text.replace(str(saved_at), str(saved_at - 31)))  # hold_s is 30 s

    second, second_cache = make_loop(path, FakePrometheus(down=True))
    await second.resume()
    await second.step()
    assert second_cache.snapshot(DEFAULT_GROUP) is None


class Scraped(ScrapeSource):
    """The scrape path's latest round, as given."""

    def __init__(self, samples: list[Sample]) -> None:
        self._samples = {s.address: s for s in samples}

    def latest(self) -> Mapping[str, Sample]:
        return self._samples


def scraped(address: str, **values: float) -> Sample:
    return Sample.build(
        address=address,
        values=[(Signal(k), v) for k, v in values.items()],
        observed_at=time.time(),
        source="scrape",
    )


def test_scrapes_are_enough_to_decide_once_each_endpoint_has_a_step_or_is_idle() -> None:
    def ready(*samples: Sample) -> bool:
        return Weigher(prometheus=None, scrape=Scraped(list(samples))).has_signals

    assert not ready()  # no round yet
    # A first round: gauges only, a busy server has no step time yet.
    assert not ready(scraped(FAST, running=3, decode_step_s=0.01), scraped(SLOW, running=2))
    assert ready(scraped(FAST, running=3, decode_step_s=0.01), scraped(SLOW, running=0))
    assert ready(
        scraped(FAST, running=3, decode_step_s=0.01),
        Sample(address=SLOW, scrape_failures=1),
    )
