"""The example manifests apply as written: only fields Kubernetes has, of the right types, and
the Envoy bootstraps in their ConfigMaps are the repository's envoy/bootstrap-*.yaml."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from component.deploy.helm_chart import ROOT
from component.deploy.kube_schema import problems

EXAMPLES = ROOT / "deploy" / "examples"
MANIFESTS = [
    EXAMPLES / "sidecar/envoy-with-xds-control.yaml",
    EXAMPLES / "central/envoy-gateway.yaml",
]


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: p.name)
def test_example_bootstraps_are_the_repositorys(path: Path) -> None:
    docs = [doc for doc in yaml.safe_load_all(path.read_text()) if doc]
    key = "xds-control/bootstrap-source"
    maps = [d for d in docs if key in d["metadata"].get("annotations", {})]
    assert maps
    for config_map in maps:
        source = ROOT / config_map["metadata"]["annotations"][key]
        assert yaml.safe_load(config_map["data"]["bootstrap.yaml"]) == yaml.safe_load(
            source.read_text()
        )


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: p.name)
def test_example_manifests_use_only_real_fields(path: Path) -> None:
    for doc in yaml.safe_load_all(path.read_text()):
        if doc:
            assert problems(doc) == [], doc["metadata"]["name"]


def test_the_field_check_catches_a_misspelt_field() -> None:
    docs = yaml.safe_load_all(MANIFESTS[0].read_text())
    pod = next(d for d in docs if d["kind"] == "Deployment")
    pod["spec"]["template"]["spec"]["containers"][0]["volumeMounts"][0]["mountpath"] = "/x"
    pod["spec"]["replicas"] = "2"
    assert problems(pod) == [
        "Deployment.spec.replicas: expected int, got str",
        "Deployment.spec.template.spec.containers[0].volumeMounts[0].mountpath: "
        "not a field of V1VolumeMount",
    ]
