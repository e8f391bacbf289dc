"""The shipped Envoy bootstraps are what `xds-control bootstrap` generates, and Envoy accepts
them."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from xds_control.xds import build_bootstrap
from xds_lab.harness.envoy import find_envoy

ROOT = Path(__file__).resolve().parents[3]
FILES = {
    "bootstrap-sidecar.yaml": build_bootstrap(
        node_id="sidecar", node_cluster="sidecar", xds_host="127.0.0.1", xds_port=18000
    ),
    "bootstrap-sidecar-uds.yaml": build_bootstrap(
        node_id="sidecar",
        node_cluster="sidecar",
        xds_host="127.0.0.1",
        xds_port=18000,
        xds_pipe="/var/run/xds-control/ads.sock",
    ),
    "bootstrap-gateway.yaml": build_bootstrap(
        node_id="gateway",
        node_cluster="gateway",
        xds_host="xds-control.xds-control.svc.cluster.local",
        xds_port=18000,
        discovery="dns",
    ),
}


@pytest.mark.parametrize("name", sorted(FILES))
def test_file_matches_generator_and_envoy_validates_it(name: str) -> None:
    path = ROOT / "envoy" / name
    assert yaml.safe_load(path.read_text()) == FILES[name]
    result = subprocess.run(
        [str(find_envoy()), "--mode", "validate", "-c", str(path), "--disable-hot-restart"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "OK" in result.stdout + result.stderr
