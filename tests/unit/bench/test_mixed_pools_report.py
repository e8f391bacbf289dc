"""The per-engine form's table: who served what, and the engine's pool weights over the run."""

from __future__ import annotations

from typing import Any

from xds_lab.bench.mixed_pools import results_table


def _point(**extra: Any) -> dict[str, Any]:
    return {
        "form": "pool_per_engine_data_path",
        "seed": 12,
        "offered_rps": 13.86,
        "ttft_p50_s": 0.63,
        "ttft_p90_s": 3.669,
        "ttft_p99_s": 6.407,
        "goodput_rps": 8.27,
        "errors": 7,
        "served_by_kind": {"triton-a100": 258, "vllm-h100": 329},
        **extra,
    }


def test_the_table_gives_each_pool_s_lowest_and_highest_weight_over_the_run() -> None:
    samples = [
        {"t": 0.0, "routes": {}},  # before the first cycle: no route weighed yet
        {"t": 1.0, "routes": {"listener/all": {"vllm": 100, "triton": 60}}},
        {"t": 2.0, "routes": {"listener/all": {"vllm": 85, "triton": 85}}},
    ]
    row = results_table([_point(route_weights=samples)]).splitlines()[-1]
    assert "triton-a100 258 / vllm-h100 329" in row
    assert row.rstrip(" |").endswith("triton 60-85 / vllm 85-100")


def test_a_run_with_no_route_weights_says_so() -> None:
    assert results_table([_point()]).splitlines()[-1].rstrip(" |").endswith("-")
