"""``xds-control bootstrap --tls-*``: the xDS cluster gets the matching UpstreamTlsContext,
Envoy accepts the bootstrap, and half a client identity is refused."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from e2e.tls_ca import TestCa
from xds_lab.harness.envoy import find_envoy


def bootstrap(*flags: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "xds_control", "bootstrap", "--node-id", "n", *flags]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)


def test_tls_flags_give_an_upstream_tls_context_envoy_accepts(tmp_path: Path) -> None:
    ca = TestCa(tmp_path)
    client = ca.issue("n", uris=("spiffe://test.local/n",))
    result = bootstrap(
        "--tls-ca",
        str(ca.ca_file),
        "--tls-cert",
        str(client.cert_file),
        "--tls-key",
        str(client.key_file),
        "--tls-server-name",
        "xds.example",
    )
    assert result.returncode == 0, result.stderr
    cluster = json.loads(result.stdout)["static_resources"]["clusters"][0]
    context = cluster["transport_socket"]["typed_config"]
    assert context["sni"] == "xds.example"
    common = context["common_tls_context"]
    assert common["validation_context"]["trusted_ca"] == {"filename": str(ca.ca_file)}
    [pair] = common["tls_certificates"]
    assert pair["private_key"] == {"filename": str(client.key_file)}
    path = tmp_path / "bootstrap.json"
    path.write_text(result.stdout)
    checked = subprocess.run(
        [str(find_envoy()), "--mode", "validate", "-c", str(path), "--disable-hot-restart"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert checked.returncode == 0, checked.stderr[-2000:]


def test_a_certificate_without_its_key_is_refused() -> None:
    result = bootstrap("--tls-ca", "/ca.pem", "--tls-cert", "/c.pem")
    assert result.returncode == 2
    assert "--tls-cert and --tls-key go together" in result.stderr


def test_without_tls_flags_there_is_no_transport_socket() -> None:
    result = bootstrap()
    cluster = json.loads(result.stdout)["static_resources"]["clusters"][0]
    assert "transport_socket" not in cluster
