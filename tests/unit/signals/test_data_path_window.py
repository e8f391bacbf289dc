"""The data path's sliding window: per-endpoint rate, TTFB, step per byte, errors; bounded."""

from __future__ import annotations

import pytest

from xds_control.signals import Signal
from xds_control.signals.data_path import SOURCE, DataPathWindow
from xds_control.signals.observation import Observation, Progress

T0 = 1_700_000_000.0


def obs(
    at: float,
    *,
    address: str = "10.0.0.1:8000",
    ttfb_s: float | None = 0.1,
    stream_s: float = 0.9,
    response_bytes: int = 900,
    request_bytes: int = 300,
    failed: bool = False,
    streamed: bool = True,
    stream_id: str = "",
) -> Observation:
    return Observation(
        cluster="chat",
        address=address,
        finished_at=at,
        ttfb_s=ttfb_s,
        duration_s=None if ttfb_s is None else ttfb_s + stream_s,
        response_bytes=response_bytes,
        request_bytes=request_bytes,
        status=503 if failed else 200,
        failed=failed,
        streamed=streamed,
        stream_id=stream_id,
    )


def test_a_steady_rate_reads_as_that_rate_with_means_over_the_window() -> None:
    window = DataPathWindow(window_s=10)
    for i in range(400):  # 20 requests/s for 20 s
        at = T0 + i * 0.05
        window.add(obs(at, ttfb_s=0.1 + (i % 2) * 0.2, failed=i % 20 < 2), now=at)
    sample = window.samples(now=T0 + 20)["10.0.0.1:8000"]
    values = sample.values
    assert values[Signal.DATAPATH_RATE] == pytest.approx(20, rel=0.06)
    assert values[Signal.DATAPATH_REQUESTS] == pytest.approx(200, abs=10)
    assert values[Signal.DATAPATH_ERROR_RATIO] == pytest.approx(0.1, abs=0.01)
    assert values[Signal.DATAPATH_TTFB_S] == pytest.approx(0.2, abs=0.01)
    assert values[Signal.DATAPATH_STEP_S] == pytest.approx(0.9 / 900)
    assert values[Signal.DATAPATH_PROMPT_RATIO] == pytest.approx(300 / 900)
    # Little's law: 18 served a second (2 in 20 fail), 1.1 s each on average.
    assert values[Signal.DATAPATH_INFLIGHT] == pytest.approx(18 * 1.1, rel=0.06)
    assert {r.source for r in sample.readings.values()} == {SOURCE}
    assert sample.observed_at == pytest.approx(T0 + 19.95)


def test_a_young_endpoint_s_rate_is_over_the_time_since_its_first_request() -> None:
    window = DataPathWindow(window_s=30)
    for i in range(50):  # 10/s for 5 s
        window.add(obs(T0 + i * 0.1), now=T0 + i * 0.1)
    rate = window.samples(now=T0 + 5)["10.0.0.1:8000"].values[Signal.DATAPATH_RATE]
    assert rate == pytest.approx(10, rel=0.05)


def test_the_step_is_total_streaming_time_over_total_bytes_of_streamed_successes() -> None:
    window = DataPathWindow(window_s=10)
    window.add(obs(T0, stream_s=1.0, response_bytes=1000), now=T0)
    window.add(obs(T0, stream_s=0.001, response_bytes=2), now=T0)  # a tiny answer barely counts
    window.add(obs(T0, stream_s=5.0, response_bytes=10, failed=True), now=T0)
    window.add(obs(T0, stream_s=0.0, response_bytes=500, streamed=False), now=T0)
    step = window.samples(now=T0 + 1)["10.0.0.1:8000"].values[Signal.DATAPATH_STEP_S]
    assert step == pytest.approx(1.001 / 1002)


def test_without_streamed_bytes_or_first_bytes_those_readings_are_absent() -> None:
    window = DataPathWindow(window_s=10)
    window.add(obs(T0, ttfb_s=None, response_bytes=0, failed=True), now=T0)
    values = window.samples(now=T0 + 1)["10.0.0.1:8000"].values
    assert Signal.DATAPATH_STEP_S not in values
    assert Signal.DATAPATH_TTFB_S not in values
    assert values[Signal.DATAPATH_ERROR_RATIO] == 1.0


def test_requests_age_out_and_a_quiet_endpoint_is_forgotten() -> None:
    window = DataPathWindow(window_s=10)
    window.add(obs(T0, address="a:1"), now=T0)
    window.add(obs(T0 + 8, address="b:1"), now=T0 + 8)
    assert set(window.samples(now=T0 + 9)) == {"a:1", "b:1"}
    assert set(window.samples(now=T0 + 11)) == {"b:1"}
    window.add(obs(T0 + 25, address="c:1"), now=T0 + 25)  # more than a window on: prunes
    assert len(window) == 1
    assert set(window.samples(now=T0 + 25)) == {"c:1"}


def test_an_observation_before_the_window_is_not_counted_and_one_ahead_counts_now() -> None:
    window = DataPathWindow(window_s=10)
    assert not window.add(obs(T0 - 11), now=T0)
    assert window.add(obs(T0 + 60), now=T0)  # Envoy's clock ahead: placed at our now
    assert window.samples(now=T0)["10.0.0.1:8000"].observed_at == T0


def test_memory_is_bounded_by_buckets_and_addresses() -> None:
    window = DataPathWindow(window_s=10, buckets=5, max_addresses=2)
    for i in range(10_000):
        window.add(obs(T0 + i * 0.001), now=T0 + i * 0.001)
    assert window.add(obs(T0 + 10, address="b:1"), now=T0 + 10)
    assert not window.add(obs(T0 + 10, address="c:1"), now=T0 + 10)  # full, none quiet
    assert len(window) == 2
    assert window.add(obs(T0 + 25, address="c:1"), now=T0 + 25)  # the quiet ones made room
    assert window.samples(["c:1", "nowhere:1"], now=T0 + 25).keys() == {"c:1"}


def test_every_reading_is_admissible() -> None:
    window = DataPathWindow(window_s=10)
    for i in range(100):
        window.add(obs(T0 + i * 0.1, failed=True), now=T0 + i * 0.1)
    sample = window.samples(now=T0 + 10)["10.0.0.1:8000"]
    assert not sample.rejected
    assert sample.values[Signal.DATAPATH_ERROR_RATIO] == 1.0


def test_the_p99_time_to_first_byte_is_over_the_requests_still_in_the_window() -> None:
    window = DataPathWindow(window_s=10)
    for i in range(200):  # one slow answer in a hundred, then a quiet minute of fast ones
        at = T0 + i * 0.04
        window.add(obs(at, ttfb_s=3.0 if i % 100 == 99 else 0.1), now=at)
    p99 = window.ttfb_p99(now=T0 + 8)["10.0.0.1:8000"]
    # The last 128 kept: one slow among them sits above rank 0.99 x 127, so P99 is between.
    assert 0.1 < p99 <= 3.0
    for i in range(200):
        at = T0 + 20 + i * 0.04
        window.add(obs(at, ttfb_s=0.2), now=at)
    assert window.ttfb_p99(now=T0 + 28)["10.0.0.1:8000"] == pytest.approx(0.2)
    assert window.ttfb_p99(now=T0 + 60) == {}  # nothing left in the window


def running(
    stream_id: str,
    *,
    started_at: float = T0,
    address: str = "10.0.0.1:8000",
    ttfb_s: float | None = 2.0,
    response_bytes: int = 400,
) -> Progress:
    return Progress(
        address=address,
        stream_id=stream_id,
        started_at=started_at,
        ttfb_s=ttfb_s,
        response_bytes=response_bytes,
        request_bytes=1200,
        streamed=True,
    )


def test_a_server_whose_answers_are_all_still_running_is_timed_while_they_run() -> None:
    # A slow server's answers outlast the window: none ended, yet its step and its load read.
    window = DataPathWindow(window_s=10)
    for tick in range(1, 7):  # one entry a second per stream, six seconds in
        now = T0 + tick + 0.4  # each comes up to a second after Envoy writes it
        for stream in ("a", "b", "c"):
            window.progress(running(stream, response_bytes=100 * tick), now=now)
    values = window.samples(now=T0 + 6.5)["10.0.0.1:8000"].values
    # 6 s run, 2 s to the first byte: 4 s streamed for 600 bytes, in each of three streams.
    assert values[Signal.DATAPATH_STEP_S] == pytest.approx(4.0 / 600)
    assert values[Signal.DATAPATH_INFLIGHT] == pytest.approx(3.0, rel=0.01)
    assert values[Signal.DATAPATH_PROMPT_RATIO] == pytest.approx(1200 / 600)
    assert values[Signal.DATAPATH_REQUESTS] == 0
    assert window.samples(now=T0 + 6.5)["10.0.0.1:8000"].observed_at == pytest.approx(T0 + 6)


def test_an_ended_stream_counts_once_and_a_stream_no_longer_logged_is_dropped() -> None:
    window = DataPathWindow(window_s=10)
    window.progress(running("a", response_bytes=100), now=T0 + 1.2)
    window.progress(running("b", response_bytes=100), now=T0 + 1.2)
    window.add(
        obs(T0 + 1.5, ttfb_s=1.0, stream_s=0.5, response_bytes=150, stream_id="a"), now=T0 + 1.6
    )
    values = window.samples(now=T0 + 2.0)["10.0.0.1:8000"].values
    assert values[Signal.DATAPATH_REQUESTS] == 1
    # "a" by its end (0.5 s for 150 bytes), "b" by its one entry (1 s in, no byte streamed).
    assert values[Signal.DATAPATH_STEP_S] == pytest.approx(0.5 / 250)
    # "b" was never logged again: gone three periods on, and with it the endpoint's readings
    # of running work; the ended request stays in the window.
    later = window.samples(now=T0 + 4.5)["10.0.0.1:8000"].values
    assert later[Signal.DATAPATH_STEP_S] == pytest.approx(0.5 / 150)
    window.forget(now=T0 + 20)
    assert window.samples(now=T0 + 20) == {}


def test_ttft_compliance_counts_answers_in_the_window_and_streams_still_waiting_past_it() -> None:
    window = DataPathWindow(window_s=10)
    for i, ttfb in enumerate((0.2, 0.4, 1.5, 0.3)):
        window.add(obs(T0 + i, ttfb_s=ttfb), now=T0 + i)
    # Open: one answered quickly, one waiting 3 s already (a miss), one waiting under 1 s
    # (not judged yet).
    window.progress(running("a", started_at=T0 + 1, ttfb_s=0.5), now=T0 + 4.2)
    for tick in (1, 2, 3):
        window.progress(running("b", started_at=T0 + 1, ttfb_s=None), now=T0 + 1 + tick + 0.2)
    window.progress(running("c", started_at=T0 + 3.9, ttfb_s=None), now=T0 + 4.2)
    now = T0 + 4.3
    samples = window.samples(now=now, ttft_targets={"10.0.0.1:8000": 1.0})
    assert samples["10.0.0.1:8000"].values[Signal.DATAPATH_SLO_TTFT] == pytest.approx(4 / 6)
    # Without a target there is nothing to judge against.
    assert Signal.DATAPATH_SLO_TTFT not in window.samples(now=now)["10.0.0.1:8000"].values
