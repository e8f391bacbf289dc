"""`helm lint` and `helm template` over every ci scenario, where a `helm` binary is on PATH
(it cannot be installed from this project's registries, so elsewhere these skip): the rendered
ConfigMap holds values.config unchanged, and the schema stops a wrong type at install."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from helm_chart import CHART, CI_FILES, values
from kube_schema import KINDS, problems

HELM = shutil.which("helm")
pytestmark = pytest.mark.skipif(HELM is None, reason="no helm binary on PATH")
# Chart.yaml asks for 1.25 or later; an older helm assumes 1.20 when no cluster is asked.
KUBE_VERSION = "1.30.0"


def _helm(*args: str) -> subprocess.CompletedProcess[str]:
    assert HELM is not None
    return subprocess.run([HELM, *args], capture_output=True, text=True, timeout=60, check=False)


def _render(ci_file: Path) -> list[dict[str, Any]]:
    run = _helm(
        *("template", "xds-control", str(CHART), "-n", "xds-control", "-f", str(ci_file)),
        *("--kube-version", KUBE_VERSION),
    )
    assert run.returncode == 0, run.stderr
    return [doc for doc in yaml.safe_load_all(run.stdout) if doc]


@pytest.mark.parametrize("ci_file", CI_FILES, ids=[p.name for p in CI_FILES])
def test_lint_passes(ci_file: Path) -> None:
    run = _helm("lint", str(CHART), "-f", str(ci_file))
    assert run.returncode == 0, run.stdout + run.stderr


@pytest.mark.parametrize("ci_file", CI_FILES, ids=[p.name for p in CI_FILES])
def test_rendered_configmap_is_values_config(ci_file: Path) -> None:
    docs = _render(ci_file)
    (config_map,) = [
        d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"] == "xds-control"
    ]
    assert yaml.safe_load(config_map["data"]["config.yaml"]) == values(ci_file)["config"]


def test_rendered_sidecar_pod_shares_the_socket_folder() -> None:
    docs = _render(CHART / "ci" / "sidecar-values.yaml")
    (deployment,) = [d for d in docs if d["kind"] == "Deployment"]
    socket_dir = values(CHART / "ci" / "sidecar-values.yaml")["sidecar"]["socketDir"]
    for container in deployment["spec"]["template"]["spec"]["containers"]:
        paths = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
        assert paths.get("xds-socket") == socket_dir, container["name"]


def test_install_refuses_a_wrong_type_naming_the_field() -> None:
    run = _helm(
        *("template", "xds-control", str(CHART), "--set", "replicaCount=two"),
        *("--kube-version", KUBE_VERSION),
    )
    assert run.returncode != 0
    assert "replicaCount" in run.stderr


@pytest.mark.parametrize("ci_file", CI_FILES, ids=[p.name for p in CI_FILES])
def test_rendered_objects_use_only_real_fields(ci_file: Path) -> None:
    for doc in _render(ci_file):
        if (doc["apiVersion"], doc["kind"]) in KINDS:
            assert problems(doc) == [], doc["metadata"]["name"]
