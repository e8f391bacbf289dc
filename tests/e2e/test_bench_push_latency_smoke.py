"""The push-latency benchmark still works: it measures every change and Envoy ends up running
the last weights it was sent. Behaviour only; the timings themselves are not judged here."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]


def test_push_latency_measures_each_change_and_envoy_applies_the_last(tmp_path: Path) -> None:
    # A fresh interpreter, as `make bench` runs it: this one imported gRPC with fork support
    # on, which crashes some Envoy spawns next to an in-process server (see xds_lab/__init__.py).
    argv = [
        sys.executable,
        "-m",
        "xds_lab.bench.push_latency",
        "--envoys",
        "1",
        "--endpoints",
        "20",
    ]
    argv += ["--changes", "5", "--out", str(tmp_path)]
    run = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert run.returncode == 0, run.stdout + run.stderr

    (cell,) = json.loads((tmp_path / "push_latency.json").read_text())["cells"]
    assert (cell["envoys"], cell["endpoints"]) == (1, 20)
    assert len(cell["ack_s"]) == 5
    assert all(math.isfinite(s) and s > 0 for s in cell["ack_s"] + cell["build_s"])
    assert cell["final_weights"], "no endpoint was read back from Envoy"
    assert cell["envoy_weights"] == {"envoy-0": cell["final_weights"]}
