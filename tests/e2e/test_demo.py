"""`xds-control demo --duration` plays the whole tour headless and leaves nothing behind.

Whether the slowed server's traffic share falls is judged by ``python -m xds_lab.bench.demo_tour``
over 120 s tours (a share needs ~170 requests per half phase to measure); the engine's reaction
to a slow server through real Envoy is tested in test_weight_engine.py. Here the tour is played
at its shortest, for what a user of ``make demo`` sees."""

from __future__ import annotations

import subprocess
import sys

DURATION_S = 30
"""The shortest the command takes (``--duration`` min): warm-up 9 s, fault and recovery 10.5 s."""


def test_demo_plays_warm_up_fault_and_recovery_and_ends_with_a_verdict() -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "xds_control",
            "--log-level",
            "warning",
            "demo",
            "--duration",
            str(DURATION_S),
        ],
        capture_output=True,
        text=True,
        timeout=DURATION_S + 90,
        check=False,
    )
    output = result.stdout + result.stderr
    assert "Traceback" not in output, output[-6000:]
    for phase in ("phase 1/3: warm-up", "phase 2/3: fault", "phase 3/3: recovery"):
        assert phase in result.stdout, result.stdout[-6000:]
    assert "fault: slowdown x4 on h100-0" in result.stdout
    assert "fault cleared on h100-0" in result.stdout
    for server in ("h100-1", "a100-0", "l4-1"):
        assert server in result.stdout
    # The verdict is the last line: on stdout and exit 0 when the server lost weight and
    # traffic and won its weight back, on stderr and exit 1 when not.
    assert result.returncode in (0, 1), output[-3000:]
    said = result.stdout if result.returncode == 0 else result.stderr
    verdict = said.strip().splitlines()[-1]
    assert verdict.startswith("OK: " if result.returncode == 0 else "FAIL: "), verdict
    assert "h100-0: Envoy weight" in verdict, verdict
    leftovers = subprocess.run(
        ["pgrep", "-f", "xds-control-demo-"], capture_output=True, text=True, check=False
    )
    assert leftovers.stdout == "", "the demo left processes running"
