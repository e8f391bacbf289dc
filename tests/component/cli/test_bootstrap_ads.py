"""`xds-control bootstrap --ads`: delta gives Envoy `DELTA_GRPC`, the default stays state of
the world, and anything else is refused with exit 2; Envoy accepts the delta bootstrap."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from xds_lab.harness.envoy import find_envoy


def bootstrap(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "xds_control", "bootstrap", "--node-id", "gw-1", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def api_type(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, result.stderr
    return str(json.loads(result.stdout)["dynamic_resources"]["ads_config"]["api_type"])


def test_ads_flag_picks_the_xds_variant(tmp_path: Path) -> None:
    assert api_type(bootstrap()) == "GRPC"
    assert api_type(bootstrap("--ads", "sotw")) == "GRPC"
    delta = bootstrap("--ads", "delta")
    assert api_type(delta) == "DELTA_GRPC"
    path = tmp_path / "bootstrap.json"
    path.write_text(delta.stdout)
    check = subprocess.run(
        [str(find_envoy()), "--mode", "validate", "-c", str(path), "--disable-hot-restart"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert check.returncode == 0, check.stderr[-2000:]


def test_unknown_variant_is_refused() -> None:
    result = bootstrap("--ads", "grpc-web")
    assert result.returncode == 2
    assert "--ads" in result.stderr
