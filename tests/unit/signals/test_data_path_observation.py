"""An access-log entry -> the request's observation: endpoint, times, bytes, failure, stream."""

from __future__ import annotations

from envoy.data.accesslog.v3 import accesslog_pb2 as al

from xds_control.signals.observation import Observation, Progress, from_entry


def entry(
    *,
    host: str | None = "10.0.0.7",
    port: int = 8000,
    status: int | None = 200,
    ttfb_s: float | None = 0.2,
    last_s: float | None = 1.2,
    body: int = 1000,
    content_type: str | None = "text/event-stream",
    flags: tuple[str, ...] = (),
) -> al.HTTPAccessLogEntry:
    out = al.HTTPAccessLogEntry()
    common = out.common_properties
    common.start_time.FromSeconds(1_700_000_000)
    common.upstream_cluster = "chat"
    common.stream_id = "s-1"
    if host is not None:
        common.upstream_remote_address.socket_address.address = host
        common.upstream_remote_address.socket_address.port_value = port
    if ttfb_s is not None:
        common.time_to_first_upstream_rx_byte.FromNanoseconds(int(ttfb_s * 1e9))
    if last_s is not None:
        common.time_to_last_upstream_rx_byte.FromNanoseconds(int(last_s * 1e9))
    for flag in flags:
        setattr(common.response_flags, flag, True)
    if status is not None:
        out.response.response_code.value = status
    out.response.response_body_bytes = body
    out.request.request_body_bytes = 420
    if content_type is not None:
        out.response.response_headers["content-type"] = content_type
    return out


def test_a_streamed_answer_is_read_with_its_endpoint_times_and_bytes() -> None:
    got = from_entry(entry())
    assert got == Observation(
        cluster="chat",
        address="10.0.0.7:8000",
        finished_at=1_700_000_001.2,
        ttfb_s=0.2,
        duration_s=1.2,
        response_bytes=1000,
        request_bytes=420,
        status=200,
        failed=False,
        streamed=True,
        stream_id="s-1",
    )
    assert isinstance(got, Observation)
    assert abs((got.stream_s or 0) - 1.0) < 1e-9


def test_an_entry_with_no_upstream_host_is_skipped() -> None:
    assert from_entry(entry(host=None, status=429, flags=("rate_limited",))) is None
    assert from_entry(entry(host=None, status=404, flags=("no_route_found",))) is None


def test_a_periodic_entry_is_a_request_still_running_with_its_bytes_so_far() -> None:
    made = entry(last_s=None, body=300)
    made.common_properties.intermediate_log_entry = True
    assert from_entry(made) == Progress(
        address="10.0.0.7:8000",
        stream_id="s-1",
        started_at=1_700_000_000,
        ttfb_s=0.2,
        response_bytes=300,
        request_bytes=420,
        streamed=True,
    )
    waiting = entry(ttfb_s=None, last_s=None, body=0, status=None, content_type=None)
    waiting.common_properties.intermediate_log_entry = True
    got = from_entry(waiting)
    assert isinstance(got, Progress)
    assert (got.ttfb_s, got.response_bytes, got.streamed) == (None, 0, False)
    not_routed = entry(host=None, last_s=None)
    not_routed.common_properties.intermediate_log_entry = True
    assert from_entry(not_routed) is None


def test_an_ipv6_endpoint_is_bracketed() -> None:
    got = from_entry(entry(host="fd00::1"))
    assert isinstance(got, Observation)
    assert got.address == "[fd00::1]:8000"


def test_5xx_resets_and_timeouts_fail_but_a_4xx_does_not() -> None:
    def failed(**kwargs: object) -> bool:
        got = from_entry(entry(**kwargs))  # type: ignore[arg-type]
        assert isinstance(got, Observation)
        return got.failed

    assert failed(status=503)
    assert failed(status=None, ttfb_s=None, last_s=None, flags=("upstream_remote_reset",))
    assert failed(status=504, flags=("upstream_request_timeout",))
    assert failed(status=200, flags=("upstream_connection_termination",))
    assert not failed(status=400)
    assert not failed(status=200, flags=("downstream_connection_termination",))


def test_no_response_byte_means_no_times_and_the_start_as_the_end() -> None:
    got = from_entry(
        entry(
            status=None, ttfb_s=None, last_s=None, body=0, content_type=None, flags=("local_reset",)
        )
    )
    assert isinstance(got, Observation)
    assert (got.ttfb_s, got.duration_s, got.stream_s, got.status) == (None, None, None, 0)
    assert got.finished_at == 1_700_000_000
    assert not got.streamed


def test_streamed_comes_from_the_content_type_else_from_the_times() -> None:
    json_answer = from_entry(entry(content_type="application/json"))
    assert isinstance(json_answer, Observation)
    assert not json_answer.streamed
    no_header_late_bytes = from_entry(entry(content_type=None, ttfb_s=0.2, last_s=0.9))
    assert isinstance(no_header_late_bytes, Observation)
    assert no_header_late_bytes.streamed
    no_header_one_chunk = from_entry(entry(content_type=None, ttfb_s=0.2, last_s=0.2))
    assert isinstance(no_header_one_chunk, Observation)
    assert not no_header_one_chunk.streamed
