"""The chart's HPA (through prometheus-adapter) and the KEDA example read the same metric, the
control plane's recommended replica count per pool, and turn it into exactly that count."""

from __future__ import annotations

import re

import yaml

from component.deploy.helm_chart import CHART, ROOT, values
from xds_control.control.metrics import POOL_RECOMMENDED_REPLICAS

EXAMPLES = ROOT / "deploy" / "examples" / "autoscaling"
METRIC = values()["autoscaling"]["hpa"]["metricName"]


def test_metric_is_the_one_the_control_plane_exports() -> None:
    [metric] = POOL_RECOMMENDED_REPLICAS.describe()
    assert metric.name == METRIC
    assert metric.type == "gauge"


def test_prometheus_adapter_serves_it_under_its_own_name() -> None:
    adapter = yaml.safe_load((EXAMPLES / "prometheus-adapter-values.yaml").read_text())
    (rule,) = adapter["rules"]["external"]
    assert rule["seriesQuery"].startswith(f"{METRIC}{{")
    assert rule["name"]["as"] == METRIC
    # Replicas of the control plane export the same value: one of them, not their sum.
    assert rule["metricsQuery"].startswith("max(")


def test_hpa_template_scales_to_the_recommendation() -> None:
    text = (CHART / "templates" / "hpa.yaml").read_text()
    assert "name: {{ $.Values.autoscaling.hpa.metricName }}" in text
    assert "pool: {{ .pool | quote }}" in text
    # ceil(value / 1) replicas: the recommendation itself.
    assert re.search(r"type: AverageValue\n\s+averageValue: \"1\"", text)


def test_keda_example_scales_to_the_recommendation() -> None:
    scaled = yaml.safe_load((EXAMPLES / "keda-scaledobject.yaml").read_text())
    (trigger,) = scaled["spec"]["triggers"]
    assert trigger["type"] == "prometheus"
    assert trigger["metricType"] == "AverageValue"
    assert trigger["metadata"]["threshold"] == "1"
    assert re.fullmatch(rf'max\({METRIC}\{{pool="[\w.-]+"\}}\)', trigger["metadata"]["query"])
