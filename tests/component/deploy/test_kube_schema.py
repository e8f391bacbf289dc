"""The offline checks of rendered manifests are not rubber stamps: a kind the field check does
not know, a misspelt field in the custom resource it checks by its own table, and a key a
template writes twice are caught."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from component.deploy.helm_cli import load_manifests
from component.deploy.kube_schema import problems


def _service_monitor() -> dict[str, Any]:
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "ServiceMonitor",
        "metadata": {"name": "xds-control", "labels": {"release": "prometheus"}},
        "spec": {
            "selector": {"matchLabels": {"app.kubernetes.io/name": "xds-control"}},
            "namespaceSelector": {"matchNames": ["xds-control"]},
            "endpoints": [
                {
                    "port": "admin",
                    "interval": "15s",
                    "authorization": {"type": "Bearer", "credentials": {"name": "t", "key": "k"}},
                    "relabelings": [{"sourceLabels": ["__meta_pod"], "targetLabel": "pod"}],
                }
            ],
        },
    }


def test_a_kind_the_check_does_not_know_is_a_problem() -> None:
    manifest = {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": {}}
    assert problems(manifest) == [
        "Ingress: networking.k8s.io/v1 Ingress is not a kind this check knows"
    ]


def test_a_service_monitor_as_the_chart_writes_it_passes() -> None:
    assert problems(_service_monitor()) == []


def test_a_misspelt_service_monitor_field_is_a_problem() -> None:
    manifest = _service_monitor()
    endpoint = manifest["spec"]["endpoints"][0]
    endpoint["scrapeTimout"] = "10s"
    endpoint["authorization"]["credentials"]["keys"] = "k"
    endpoint["relabelings"][0]["source_labels"] = ["x"]
    manifest["spec"]["selector"]["matchLabel"] = {}
    assert problems(manifest) == [
        "ServiceMonitor.spec.selector.matchLabel: not a field of V1LabelSelector",
        "ServiceMonitor.spec.endpoints[0].authorization.credentials.keys: "
        "not a field of V1SecretKeySelector",
        "ServiceMonitor.spec.endpoints[0].relabelings[0].source_labels: "
        "not a field of ServiceMonitorRelabelConfig",
        "ServiceMonitor.spec.endpoints[0].scrapeTimout: not a field of ServiceMonitorEndpoint",
    ]


def test_a_key_written_twice_is_an_error() -> None:
    text = "kind: ConfigMap\n---\nkind: Pod\nspec:\n  hostNetwork: true\n  hostNetwork: false\n"
    with pytest.raises(yaml.YAMLError, match="key written twice: hostNetwork"):
        load_manifests(text)
    assert load_manifests("kind: ConfigMap\n---\n---\nkind: Pod\n") == [
        {"kind": "ConfigMap"},
        {"kind": "Pod"},
    ]
