"""The budgets' P99 TTFT reads every engine's own histogram, Triton's (milliseconds) scaled to
seconds, so a native Triton pool feeds the adaptive budgets too."""

from __future__ import annotations

from xds_control.signals.latency import p99_queries


def test_the_ttft_p99_covers_every_dialect_in_seconds() -> None:
    queries = p99_queries(label="instance", window="1m")
    ttft = queries["ttft"]
    for metric in ("vllm:time_to_first_token_seconds", "sglang:time_to_first_token_seconds"):
        assert f"rate({metric}_bucket[1m])" in ttft
    triton = "nv_inference_first_response_histogram_ms_bucket[1m]"
    assert ttft.count(triton) == 1  # ONNX Runtime's is Triton's: once
    assert f"rate({triton}))) * 0.001)" in ttft
    assert "nv_" not in queries["tpot"]  # Triton has no time per output token
