"""Must show 6 (part): percentiles and goodput are right on known distributions."""

from __future__ import annotations

import random
import statistics

import pytest
from hypothesis import given
from hypothesis import strategies as st

from xds_lab.loadgen.client import Result
from xds_lab.loadgen.stats import Slo, percentile, summarize


def test_percentiles_of_a_known_uniform_sample() -> None:
    values = [float(v) for v in range(1, 1001)]
    random.Random(0).shuffle(values)
    assert percentile(values, 50) == pytest.approx(500.5)
    assert percentile(values, 90) == pytest.approx(900.1)
    assert percentile(values, 99) == pytest.approx(990.01)
    assert percentile(values, 0) == 1.0
    assert percentile(values, 100) == 1000.0


@given(st.lists(st.floats(-1e6, 1e6), min_size=2, max_size=200))
def test_percentile_matches_the_inclusive_method_of_the_standard_library(
    values: list[float],
) -> None:
    cuts = statistics.quantiles(values, n=100, method="inclusive")
    for q in (1, 25, 50, 90, 99):
        assert percentile(values, q) == pytest.approx(cuts[q - 1], rel=1e-9, abs=1e-6)


@given(st.lists(st.floats(0, 1e3), min_size=1, max_size=50), st.floats(0, 100), st.floats(0, 100))
def test_percentile_is_bounded_and_monotone(values: list[float], a: float, b: float) -> None:
    lo, hi = sorted((a, b))
    assert min(values) <= percentile(values, lo) <= percentile(values, hi) <= max(values)


def _result(i: int, *, ttft: float, e2e: float, out: int, status: int = 200) -> Result:
    return Result(
        index=i,
        scheduled=0.0,
        started=0.0,
        status=status,
        e2e_s=e2e,
        ttft_s=ttft,
        output_tokens=out,
        prompt_tokens=100,
        server=f"s{i % 2}",
    )


def test_summary_goodput_counts_only_requests_within_the_slo() -> None:
    results = [
        _result(0, ttft=0.1, e2e=1.1, out=11),  # tpot 0.1: meets
        _result(1, ttft=0.5, e2e=0.6, out=2),  # ttft too slow
        _result(2, ttft=0.1, e2e=3.1, out=11),  # tpot 0.3: too slow
        _result(3, ttft=0.1, e2e=0.2, out=2, status=503),
    ]
    summary = summarize(results, duration_s=2.0, slo=Slo(ttft_s=0.2, tpot_s=0.15))
    assert summary["ok"] == 3
    assert summary["goodput_rps"] == pytest.approx(0.5)
    assert summary["status"] == {"200": 3, "503": 1}
    assert summary["servers"] == {"s0": 2, "s1": 1}
    assert summary["ttft_s"]["p50"] == pytest.approx(0.1)
    assert summary["tpot_s"]["max"] == pytest.approx(0.3)
