"""The servers' per-response load reports: the header parsed, kept, and fetched as samples."""

from __future__ import annotations

import asyncio
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from xds_control.config import Engine
from xds_control.errors import LoadReportError
from xds_control.signals import LoadReport, ReportedLoad, Signal, Target, parse_load_report

# What vLLM sends (vllm/entrypoints/openai/orca_metrics.py: ", ".join of
# f"named_metrics.{name}={value}" after "TEXT ", Python's float repr).
VLLM_TEXT = "TEXT named_metrics.kv_cache_usage_perc=0.25, named_metrics.num_requests_waiting=3.0"


def test_vllm_s_text_report_gives_the_queue_and_kv_use() -> None:
    assert parse_load_report(VLLM_TEXT) == LoadReport(waiting=3.0, kv_usage=0.25)


def test_vllm_s_json_report_reads_the_same() -> None:
    body = json.dumps({"named_metrics": {"num_requests_waiting": 2.0, "kv_cache_usage_perc": 0.5}})
    assert parse_load_report(f"JSON {body}") == LoadReport(waiting=2.0, kv_usage=0.5)


def test_orca_s_own_fields_and_other_named_metrics_are_known_and_left_aside() -> None:
    text = "TEXT cpu_utilization=0.3, rps_fractional=10, named_metrics.other=7, utilization.gpu=1"
    assert parse_load_report(text) == LoadReport()


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("BIN AAAA", "unknown format"),
        ("named_metrics.num_requests_waiting=1", "unknown format"),
        ("TEXT named_metrics.num_requests_waiting", "not KEY=VALUE"),
        ("TEXT queue=1", "unknown field"),
        ("TEXT named_metrics.num_requests_waiting=many", "not a number"),
        ("TEXT named_metrics.num_requests_waiting=-1", "out of range"),
        ("TEXT named_metrics.num_requests_waiting=nan", "out of range"),
        ("TEXT named_metrics.kv_cache_usage_perc=1.5", "out of range"),
        ("JSON {", "does not parse"),
        ("JSON []", "not an object"),
        ('JSON {"queue": 1}', "unknown field"),
        ('JSON {"named_metrics": {"num_requests_waiting": "1"}}', "not a number"),
    ],
)
def test_what_is_not_known_is_refused_with_what_was_wrong(value: str, says: str) -> None:
    with pytest.raises(LoadReportError, match=says):
        parse_load_report(value)


@given(st.text(max_size=200))
def test_garbage_is_a_report_or_a_refusal_never_anything_else(value: str) -> None:
    try:
        report = parse_load_report(value)
    except LoadReportError:
        return
    for number in (report.waiting, report.kv_usage):
        assert number is None or number >= 0


@given(
    waiting=st.floats(min_value=0, max_value=1e6),
    kv=st.floats(min_value=0, max_value=1),
    kv_first=st.booleans(),
)
def test_every_vllm_text_report_is_read_back_exactly(
    waiting: float, kv: float, kv_first: bool
) -> None:
    pairs = [("kv_cache_usage_perc", kv), ("num_requests_waiting", waiting)]
    text = ", ".join(f"named_metrics.{n}={v}" for n, v in (pairs if kv_first else pairs[::-1]))
    assert parse_load_report(f"TEXT {text}") == LoadReport(waiting=waiting, kv_usage=kv)


def _target(address: str) -> Target:
    return Target(address=address, engine=Engine.VLLM, ttft_slo_s=1.0)


def test_the_newest_report_of_each_server_is_a_sample_observed_when_it_came() -> None:
    load = ReportedLoad()
    load.record("a:1", LoadReport(waiting=4.0, kv_usage=0.5), at=100.0)
    load.record("a:1", LoadReport(waiting=9.0), at=99.0)  # read out of order: older, ignored
    load.record("b:1", LoadReport(kv_usage=0.1), at=101.0)
    samples = asyncio.run(load.fetch([_target("a:1"), _target("b:1"), _target("c:1")]))
    assert set(samples) == {"a:1", "b:1"}  # c sent none: absent, as with no source
    a = samples["a:1"]
    assert a.values == {Signal.WAITING: 4.0, Signal.KV_USAGE: 0.5}
    assert {r.observed_at for r in a.readings.values()} == {100.0}
    assert {r.source for r in a.readings.values()} == {"response"}
    assert samples["b:1"].values == {Signal.KV_USAGE: 0.1}


def test_the_least_recently_reporting_server_is_forgotten_first() -> None:
    load = ReportedLoad(max_addresses=2)
    for at, address in enumerate(["a:1", "b:1", "a:1", "c:1"]):
        load.record(address, LoadReport(waiting=1.0), at=float(at))
    assert load.last("b:1") is None
    assert load.last("a:1") is not None
    assert load.last("c:1") is not None
