"""The fleet-streams benchmark still works on a small fleet: every stream syncs, each change is
ACKed by all of them, and the soak samples memory. The timings are not judged here."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("ads", ["sotw", "delta"])
def test_fleet_streams_runs_changes_and_a_soak(ads: str) -> None:
    # A fresh interpreter, as `make bench` runs it (fork support off before gRPC loads).
    argv = [sys.executable, "-m", "xds_lab.bench.fleet_streams", "--ads", ads, "--streams", "20"]
    argv += ["--envoys", "1", "--endpoints", "500", "--pools", "5"]
    argv += ["--changes", "3", "--soak-s", "2"]
    run = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=180, check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "synced 21 streams" in run.stdout
    assert f"20 {ads} ADS streams + 1 Envoys" in run.stdout
    assert "| back to back | 3 |" in run.stdout
    assert re.search(r"\| soak, 1/s \| [23] \|", run.stdout), run.stdout  # one change a second
    assert "- RSS over a 0.0 min soak:" in run.stdout
