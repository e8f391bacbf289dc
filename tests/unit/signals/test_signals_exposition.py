"""Reading engines' /metrics text, rates between scrapes, samples and merging."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xds_control.config import Engine
from xds_control.signals import Sample, Signal, make_reading, merge_samples
from xds_control.signals.exposition import derive, parse_exposition

VLLM = """\
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{{engine="0",model_name="m"}} 12.0
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{{engine="0",model_name="m"}} 3.0
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{{engine="0",model_name="m"}} 0.42
# TYPE vllm:prefix_cache_queries counter
vllm:prefix_cache_queries_total{{engine="0",model_name="m"}} {queries}
# TYPE vllm:prefix_cache_hits counter
vllm:prefix_cache_hits_total{{engine="0",model_name="m"}} {hits}
# TYPE vllm:prompt_tokens counter
vllm:prompt_tokens_total{{engine="0",model_name="m"}} {prompt}
# TYPE vllm:generation_tokens counter
vllm:generation_tokens_total{{engine="0",model_name="m"}} {generated}
# TYPE vllm:inter_token_latency_seconds histogram
vllm:inter_token_latency_seconds_bucket{{engine="0",le="0.01",model_name="m"}} 0.0
vllm:inter_token_latency_seconds_bucket{{engine="0",le="+Inf",model_name="m"}} {itl_n}
vllm:inter_token_latency_seconds_count{{engine="0",model_name="m"}} {itl_n}
vllm:inter_token_latency_seconds_sum{{engine="0",model_name="m"}} {itl_sum}
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{{engine="0",le="0.5",model_name="m"}} {t05}
vllm:time_to_first_token_seconds_bucket{{engine="0",le="1.0",model_name="m"}} {t1}
vllm:time_to_first_token_seconds_bucket{{engine="0",le="+Inf",model_name="m"}} {tn}
vllm:time_to_first_token_seconds_count{{engine="0",model_name="m"}} {tn}
vllm:time_to_first_token_seconds_sum{{engine="0",model_name="m"}} 1.0
# TYPE DCGM_FI_DEV_FB_USED gauge
DCGM_FI_DEV_FB_USED{{gpu="0",UUID="GPU-1",modelName="NVIDIA H100 80GB HBM3",Hostname="h"}} 60000
# TYPE DCGM_FI_DEV_FB_FREE gauge
DCGM_FI_DEV_FB_FREE{{gpu="0",UUID="GPU-1",modelName="NVIDIA H100 80GB HBM3",Hostname="h"}} 20000
# TYPE process_start_time_seconds gauge
process_start_time_seconds 1.7e9
"""


def vllm(**kw: float) -> str:
    values = {"queries": 100, "hits": 50, "itl_n": 1000, "itl_sum": 20.0,
              "t05": 10, "t1": 20, "tn": 40, "prompt": 100, "generated": 1000} | kw  # fmt: skip
    return VLLM.format(**values)


def test_vllm_gauges_and_dcgm_memory() -> None:
    snap = parse_exposition(vllm(), engine=Engine.VLLM)
    assert snap.gauges[Signal.RUNNING] == 12
    assert snap.gauges[Signal.WAITING] == 3
    assert snap.gauges[Signal.KV_USAGE] == 0.42
    assert snap.gauges[Signal.GPU_MEMORY_USED] == pytest.approx(0.75)
    assert snap.gauges[Signal.STARTED_AT] == 1.7e9


def test_rates_between_two_scrapes() -> None:
    old = parse_exposition(vllm(), engine=Engine.VLLM)
    new = parse_exposition(
        vllm(
            queries=200,
            hits=130,
            itl_n=2000,
            itl_sum=45.0,
            t05=20,
            t1=50,
            tn=80,
            prompt=200,
            generated=1100,
        ),
        engine=Engine.VLLM,
    )
    out = derive(old=old, new=new, ttft_slo_s=1.0)
    assert out is not None
    assert out[Signal.PREFIX_HIT_RATIO] == pytest.approx(0.8)
    assert out[Signal.DECODE_STEP_S] == pytest.approx(0.025)
    # 100 prompt tokens, 80 of them prefix-cache hits: 20 prefilled for 100 output tokens.
    assert out[Signal.PREFILL_RATIO] == pytest.approx(0.2)
    assert out[Signal.SLO_TTFT] == pytest.approx(30 / 40)
    # Between bounds: 0.75 s is half-way from 0.5 (10 new) to 1.0 (30 new) -> 20 of 40.
    assert derive(old=old, new=new, ttft_slo_s=0.75)[Signal.SLO_TTFT] == pytest.approx(0.5)  # type: ignore[index]


def test_a_counter_going_backwards_means_a_restart() -> None:
    old = parse_exposition(vllm(queries=500), engine=Engine.VLLM)
    new = parse_exposition(vllm(queries=10), engine=Engine.VLLM)
    assert derive(old=old, new=new, ttft_slo_s=1.0) is None


def test_triton_names() -> None:
    text = """\
# TYPE nv_inference_pending_request_count gauge
nv_inference_pending_request_count{model="m",version="1"} 7
# TYPE nv_gpu_memory_used_bytes gauge
nv_gpu_memory_used_bytes{gpu_uuid="GPU-1"} 3e10
# TYPE nv_gpu_memory_total_bytes gauge
nv_gpu_memory_total_bytes{gpu_uuid="GPU-1"} 8e10
# TYPE nv_inference_request_failure counter
nv_inference_request_failure{model="m",version="1",reason="BACKEND"} 5
# TYPE nv_inference_request_success counter
nv_inference_request_success{model="m",version="1"} 95
"""
    snap = parse_exposition(text, engine=Engine.TRITON)
    assert snap.gauges[Signal.WAITING] == 7
    assert snap.gauges[Signal.GPU_MEMORY_USED] == pytest.approx(0.375)
    later = parse_exposition(
        text.replace("} 5", "} 15").replace("} 95", "} 105"), engine=Engine.TRITON
    )
    assert derive(old=snap, new=later, ttft_slo_s=1.0) == {Signal.ERROR_RATIO: 0.5}


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_garbage_text_raises_value_error_or_yields_nothing_wrong(text: str) -> None:
    try:
        snap = parse_exposition(text, engine=Engine.VLLM)
    except ValueError:
        return
    assert all(isinstance(v, float) for v in snap.gauges.values())


@pytest.mark.parametrize(
    ("signal", "value", "why"),
    [
        (Signal.WAITING, math.nan, "NaN"),
        (Signal.WAITING, math.inf, "infinite"),
        (Signal.WAITING, -1.0, "negative: -1"),
        (Signal.KV_USAGE, 1.5, "ratio above 1: 1.5"),
    ],
)
def test_inadmissible_values_are_rejected(signal: Signal, value: float, why: str) -> None:
    assert make_reading(signal=signal, value=value, observed_at=1.0, source="t") == why


def test_a_ratio_just_above_one_is_clamped() -> None:
    reading = make_reading(signal=Signal.KV_USAGE, value=1.01, observed_at=1.0, source="t")
    assert not isinstance(reading, str)
    assert reading.value == 1.0


def test_merge_keeps_the_freshest_reading_per_signal() -> None:
    prom = Sample.build(address="a", values=[(Signal.WAITING, 1.0), (Signal.SLO_TTFT, 0.9)],
                        observed_at=10.0, source="prometheus")  # fmt: skip
    scrape = Sample.build(address="a", values=[(Signal.WAITING, 50.0)], observed_at=12.0,
                          source="scrape", scrape_failures=0)  # fmt: skip
    merged = merge_samples({"a": prom}, {"a": scrape})["a"]
    assert merged.value(Signal.WAITING) == 50.0
    assert merged.value(Signal.SLO_TTFT) == 0.9
    assert merged.age(Signal.SLO_TTFT, now=15.0) == 5.0
    assert merged.readings[Signal.WAITING].source == "scrape"


def test_triton_compute_per_execution_is_not_a_decode_step() -> None:
    def text(us: float, execs: float) -> str:
        return (
            "# TYPE nv_inference_compute_infer_duration_us counter\n"
            f'nv_inference_compute_infer_duration_us{{model="m",version="1"}} {us}\n'
            "# TYPE nv_inference_exec_count counter\n"
            f'nv_inference_exec_count{{model="m",version="1"}} {execs}\n'
        )

    old = parse_exposition(text(1e6, 10), engine=Engine.TRITON)
    new = parse_exposition(text(4e6, 12), engine=Engine.ONNXRUNTIME)
    # 3 s of compute over 2 executions: a whole request each.
    assert derive(old=old, new=new, ttft_slo_s=1.0) == {Signal.EXEC_COMPUTE_S: 1.5}
