"""The LB-quality suite end to end at one short point: every policy runs and reports sanely.

It checks the harness (a real Envoy, the control plane, the simulated fleet, the load
generator, the report), not who wins: that is the benchmark's job (docs/benchmarks.md).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
import yaml

from xds_lab.bench import run_scenario_file
from xds_lab.bench.metrics import REQUIRED_FIELDS
from xds_lab.bench.policies import DEFAULT_POLICIES
from xds_lab.bench.rigor import QUICK

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(150)]

SCENARIO: dict[str, Any] = {
    "name": "smoke",
    "seed": 3,
    # Simulated time runs twice as fast: the point is short, the servers still queue.
    "time_scale": 0.5,
    "fleet": [
        {"name": "fast", "profile": "vllm-h100"},
        {"name": "slow", "profile": "onnxruntime-l4", "overrides": {"metrics": "vllm"}},
    ],
    "workload": {
        "workload": "shared-prefix",
        "groups": 4,
        "system_tokens": 256,
        "question_tokens": 32,
        "output_mean": 24,
        "output_cap": 64,
    },
    "capacity_rps": 6,
    "loads": [0.5],
    "duration_s": 3,
    "warmup_s": 0,
    "request_timeout_s": 10,
}


def test_every_policy_runs_and_reports_complete_sane_results(tmp_path: Path) -> None:
    scenario_path = tmp_path / "smoke.yaml"  # a file outside the repo runs like a shipped one
    scenario_path.write_text(yaml.safe_dump(SCENARIO))
    out = tmp_path / "out"

    # One seed at the scenario's own length: the smoke test checks the harness, not the tails.
    result = run_scenario_file(scenario_path, out_dir=out, rigor=QUICK, plots=False)

    points = result["points"]
    assert sorted(p["policy"] for p in points) == sorted(DEFAULT_POLICIES)
    expected = round(SCENARIO["capacity_rps"] * 0.5 / 0.5 * SCENARIO["duration_s"] * 0.5)
    for point in points:
        missing = [f for f in REQUIRED_FIELDS if f not in point]
        assert not missing, (point["policy"], missing)
        assert point["requests"] == expected, point["policy"]
        # Half the load of a fleet at leisure: nearly everything succeeds, within seconds.
        assert point["ok"] >= 0.9 * point["requests"], (point["policy"], point["status"])
        for key in ("ttft_p50_s", "ttft_p90_s", "ttft_p99_s", "tpot_p99_s", "e2e_p99_s"):
            assert math.isfinite(point[key]), (point["policy"], key)
            assert 0 < point[key] < 30, (point["policy"], key)
        assert point["ttft_p50_s"] <= point["ttft_p90_s"] <= point["ttft_p99_s"]
        assert 0 <= point["prefix_hit_ratio"] <= 1
        assert point["throughput_rps"] > 0
        assert point["output_tokens_per_s"] > 0
        assert 0 <= point["goodput_rps"] <= point["throughput_rps"] + 1e-9
        assert sum(point["servers"].values()) == point["ok"]
        # Both processes measured their event-loop lag (a busy machine may flag the point).
        assert point["loop_lag"]["loadgen"]["ticks"] > 0
        assert point["loop_lag"]["fleet"]["ticks"] > 0
        if point["policy"] == "ideal":  # exact knowledge, straight to the servers: no Envoy
            continue
        if point["policy"] == "picker":  # Envoy asked the control plane's picker per request
            assert point["picker"]["envoy"]["streams_started"] == point["requests"]
            assert point["picker"]["observations"] > 0
        assert point["weights"], "Envoy's weights were never sampled"
    # Engine weights are served (pushed) only by our policies; equal weights never change.
    for point in points:
        if not point["ours"]:
            assert point["eds_pushes"] == 0, point["policy"]
    saved = json.loads((out / "smoke.json").read_text())
    assert len(saved["points"]) == len(DEFAULT_POLICIES)
    # Beside the table, its figures; the raw series go under runs/, which git ignores.
    assert not any("ttft_s" in point or "weights" in point for point in saved["points"])
    whole = json.loads((out / "runs" / "smoke.json").read_text())
    assert all("ttft_s" in point and "weights" in point for point in whole["points"])
    table = (out / "smoke.md").read_text()
    assert all(name in table for name in DEFAULT_POLICIES)
