"""PromQL templates: one fleet-wide query per signal, real metric names, SLO from buckets."""

from __future__ import annotations

import re

import pytest

from xds_control.config import EndpointMapping, Engine, SignalsConfig
from xds_control.errors import ConfigError
from xds_control.signals import Signal, render_queries
from xds_control.signals.mapping import AddressMapper
from xds_control.signals.templates import TTFT_HISTOGRAMS, le_matcher, slo_query


@pytest.mark.parametrize("engine", list(Engine))
def test_every_query_aggregates_by_the_endpoint_label_and_has_no_placeholders(
    engine: Engine,
) -> None:
    config = SignalsConfig(endpoint_mapping=EndpointMapping(label="pod"))
    queries = render_queries(engine=engine, ttft_slo_s=1.0, config=config)
    for query in queries.values():
        assert "$" not in query.promql
        assert "by(" in query.promql
        # DCGM keeps its own mapping (default instance); engine series use `pod`.
        label = "instance" if query.mapping.label == "instance" else "pod"
        assert f"by({label})" in query.promql
    # vLLM and SGLang time a decode step; Triton and ONNX Runtime compute per execution.
    timing = (
        Signal.EXEC_COMPUTE_S
        if engine in (Engine.TRITON, Engine.ONNXRUNTIME)
        else (Signal.DECODE_STEP_S)
    )
    assert {Signal.WAITING, Signal.KV_USAGE, timing, Signal.GPU_MEMORY_USED} <= set(queries)
    assert (Signal.DECODE_STEP_S in queries) is (timing is Signal.DECODE_STEP_S)


def test_real_exporter_metric_names_are_used() -> None:
    def promql(engine: Engine) -> str:
        queries = render_queries(engine=engine, ttft_slo_s=1.0, config=SignalsConfig())
        return " ".join(q.promql for q in queries.values())

    vllm = promql(Engine.VLLM)
    for name in (
        "vllm:num_requests_waiting",
        "vllm:kv_cache_usage_perc",
        "vllm:prefix_cache_hits_total",
        "vllm:prefix_cache_queries_total",
        "vllm:inter_token_latency_seconds_sum",
        "vllm:time_to_first_token_seconds_bucket",
        "DCGM_FI_DEV_FB_USED",
        "DCGM_FI_DEV_FB_FREE",
    ):
        assert name in vllm
    triton = promql(Engine.TRITON)
    for name in ("nv_inference_pending_request_count", "nv_gpu_memory_used_bytes"):
        assert name in triton
    assert "sglang:num_queue_reqs" in promql(Engine.SGLANG)


def test_slo_on_a_bucket_bound_uses_that_bucket() -> None:
    spec = TTFT_HISTOGRAMS[Engine.VLLM]
    q = slo_query(spec=spec, target_s=1.0)
    assert q.count("_bucket") == 1
    assert "le=~`" in q
    assert re.fullmatch(le_matcher(1.0), "1.0")


def test_slo_between_bounds_interpolates_linearly() -> None:
    spec = TTFT_HISTOGRAMS[Engine.VLLM]  # ..., 0.75, 1.0, 2.5, ...
    q = slo_query(spec=spec, target_s=1.75)
    assert q.count("_bucket") == 3  # lower, upper, lower again
    assert "* 0.5)" in q  # (1.75 - 1.0) / (2.5 - 1.0)


def test_slo_beyond_the_last_bound_uses_the_last_bound() -> None:
    spec = TTFT_HISTOGRAMS[Engine.TRITON]  # milliseconds, last bound 5000
    q = slo_query(spec=spec, target_s=60.0)
    assert re.search(r"le=~`[^`]*5000", q)


@pytest.mark.parametrize(("bound", "text"), [(1.0, "1"), (1.0, "1.0"), (0.25, "0.25"),
                                              (2560.0, "2560"), (2560.0, "2560.0"),
                                              (1e6, "1e+06")])  # fmt: skip
def test_le_matcher_matches_every_client_format(bound: float, text: str) -> None:
    assert re.fullmatch(le_matcher(bound), text)
    assert not re.fullmatch(le_matcher(bound), "10" + text)


def test_overrides_replace_and_disable_signals() -> None:
    config = SignalsConfig(
        templates={Engine.VLLM: {"waiting": "sum by($label)(my_queue)", "kv_usage": ""}}
    )
    queries = render_queries(engine=Engine.VLLM, ttft_slo_s=1.0, config=config)
    assert queries[Signal.WAITING].promql == "sum by(instance)(my_queue)"
    assert Signal.KV_USAGE not in queries


def test_a_bad_override_is_a_config_error_naming_the_field() -> None:
    config = SignalsConfig(templates={Engine.VLLM: {"queue": "x"}})
    with pytest.raises(ConfigError, match=r"signals\.templates\.vllm\.queue"):
        render_queries(engine=Engine.VLLM, ttft_slo_s=1.0, config=config)
    config = SignalsConfig(templates={Engine.VLLM: {"waiting": "sum by($lable)(x)"}})
    with pytest.raises(ConfigError, match="placeholder"):
        render_queries(engine=Engine.VLLM, ttft_slo_s=1.0, config=config)


def test_address_mapping_rewrites_with_prometheus_style_groups() -> None:
    mapper = AddressMapper(EndpointMapping(label="Hostname", regex=r"(.*):9400",
                                           replacement="$1:8000"))  # fmt: skip
    assert mapper.address({"Hostname": "10.0.0.5:9400"}) == "10.0.0.5:8000"
    assert mapper.address({"Hostname": "10.0.0.5:9100"}) is None
    assert mapper.address({"instance": "x"}) is None
    assert AddressMapper(EndpointMapping()).address({"instance": "1.2.3.4:80"}) == "1.2.3.4:80"
