"""`xds-control demo --duration` runs the whole tour headless and leaves nothing behind."""

from __future__ import annotations

import subprocess
import sys

from xds_control.demo.tour import PhaseResult


def test_demo_runs_headless_and_reports_that_traffic_followed_weights() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "xds_control", "--log-level", "warning", "demo", "--duration", "4"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "OK:" in result.stdout
    assert result.stdout.count("phase ") == 3
    leftovers = subprocess.run(
        ["pgrep", "-f", "xds-control-demo-"], capture_output=True, text=True, check=False
    )
    assert leftovers.stdout == "", "the demo left processes running"


def test_phase_verdict_measures_the_worst_gap() -> None:
    result = PhaseResult(
        weights=(10, 30),
        counts={"a": 400, "b": 600},
        expected={"a": 0.25, "b": 0.75},
    )
    assert result.total == 1000
    assert abs(result.worst_gap - 0.15) < 1e-9
