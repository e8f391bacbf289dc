"""Every values file a user may start from installs: values.schema.json accepts it, and its
`config` block is a config the server serves (`xds-control validate` passes it). The schema
turns a wrong type away with the field's name, as `helm install` would print it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from jsonschema import Draft7Validator

from component.deploy.helm_chart import CHART, CI_FILES, validate, values
from xds_control.config import parse_config, parse_host_port

SCHEMA = Draft7Validator(json.loads((CHART / "values.schema.json").read_text()))
SCENARIOS = [None, *CI_FILES]
IDS = ["values.yaml", *(p.name for p in CI_FILES)]


def _problems(data: dict[str, Any]) -> list[str]:
    return [
        f"{'.'.join(str(p) for p in error.absolute_path)}: {error.message}"
        for error in SCHEMA.iter_errors(data)
    ]


def test_the_ci_scenarios_cover_both_modes_tls_monitoring_and_autoscaling() -> None:
    names = {p.name for p in CI_FILES}
    assert {
        "central-values.yaml",
        "sidecar-values.yaml",
        "mtls-values.yaml",
        "servicemonitor-values.yaml",
        "autoscaling-values.yaml",
    } <= names


@pytest.mark.parametrize("ci_file", SCENARIOS, ids=IDS)
def test_schema_accepts_the_values(ci_file: Path | None) -> None:
    assert _problems(values(ci_file)) == []


@pytest.mark.parametrize("ci_file", SCENARIOS, ids=IDS)
def test_config_block_passes_xds_control_validate(ci_file: Path | None, tmp_path: Path) -> None:
    code, output = validate(values(ci_file)["config"], folder=tmp_path)
    assert code == 0, output
    assert ": valid:" in output


@pytest.mark.parametrize("ci_file", SCENARIOS, ids=IDS)
def test_admin_port_is_reachable_by_probes(ci_file: Path | None) -> None:
    """The kubelet probes the pod's IP: an admin API on loopback would never turn ready."""
    address = values(ci_file)["config"]["admin_address"]
    assert parse_host_port(address).host not in {"127.0.0.1", "::1", "localhost"}


@pytest.mark.parametrize(
    ("override", "field", "words"),
    [
        ({"replicaCount": "two"}, "replicaCount", "is not of type 'integer'"),
        ({"mode": "daemonset"}, "mode", "is not one of ['central', 'sidecar']"),
        ({"serviceMonitor": {"enabled": "yes"}}, "serviceMonitor.enabled", "not of type 'boolean'"),
        ({"replicas": 3}, "", "Additional properties are not allowed ('replicas' was unexpected)"),
        ({"config": {"pools": []}}, "config", "'listeners' is a required property"),
    ],
)
def test_schema_rejects_a_wrong_value_naming_the_field(
    override: dict[str, Any], field: str, words: str
) -> None:
    data = values()
    data.update(override)
    assert any(p.startswith(f"{field}: ") and words in p for p in _problems(data)), _problems(data)


def test_a_bad_config_block_fails_validate_naming_the_field(tmp_path: Path) -> None:
    """The check above is not a rubber stamp: a typo in values.config is caught by the model."""
    config = values()["config"]
    config["pools"][0]["endpoints"][0]["wieght"] = 5
    code, output = validate(config, folder=tmp_path)
    assert code == 2
    assert "pools[0].endpoints[0].wieght: unknown field" in output


@pytest.mark.parametrize("ci_file", SCENARIOS, ids=IDS)
def test_hpa_targets_are_pools_that_export_a_recommendation(ci_file: Path | None) -> None:
    """An HPA on a pool without `autoscale.enabled` finds no series and never scales; bounds
    that differ from the pool's would clamp the recommendation a second time."""
    data = values(ci_file)
    hpa = data["autoscaling"]["hpa"]
    config = parse_config(text=yaml.safe_dump(data["config"]))
    for target in hpa["targets"] if hpa["enabled"] else []:
        policy = config.pool(target["pool"]).autoscale
        assert policy.enabled, target["pool"]
        assert (target["minReplicas"], target["maxReplicas"]) == (
            policy.min_replicas,
            policy.max_replicas,
        )


@pytest.mark.parametrize("ci_file", SCENARIOS, ids=IDS)
def test_rbac_grants_every_namespace_a_pool_watches(ci_file: Path | None) -> None:
    """A pool in a namespace without the Role gets 403 on every list and serves nothing (the
    chart refuses to render it; this holds the scenarios to the same rule). An empty
    rbac.namespaces means the release's namespace, xds-control in deploy/README.md."""
    data = values(ci_file)
    if data["rbac"]["clusterWide"]:
        return
    granted = set(data["rbac"]["namespaces"] or ["xds-control"])
    config = parse_config(text=yaml.safe_dump(data["config"]))
    watched = {p.kubernetes.namespace for p in config.pools if p.kubernetes is not None}
    assert watched <= granted


def test_a_scenario_selects_endpoints_by_service() -> None:
    """The chart's RBAC exists for EndpointSlice discovery; the central scenario uses it."""
    config = parse_config(
        text=yaml.safe_dump(values(CHART / "ci" / "central-values.yaml")["config"])
    )
    assert all(pool.kubernetes is not None for pool in config.pools)


def test_mtls_values_name_the_mounted_certificates() -> None:
    data = values(CHART / "ci" / "mtls-values.yaml")
    assert data["tls"]["enabled"]
    mount = Path(data["tls"]["mountPath"])
    tls = data["config"]["tls"]
    files = {key: Path(value) for key, value in tls.items() if key.endswith("_file")}
    assert set(files) == {"cert_file", "key_file", "client_ca_file"}
    # The keys of a kubernetes.io/tls Secret (and of a cert-manager Certificate's).
    assert files == {
        "cert_file": mount / "tls.crt",
        "key_file": mount / "tls.key",
        "client_ca_file": mount / "ca.crt",
    }
