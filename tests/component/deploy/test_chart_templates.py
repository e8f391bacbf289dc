"""What can be read off the templates without Helm: the ConfigMap is values.config verbatim,
every `.Values` path a template reads exists in values.yaml (Helm renders a misspelt one as
empty, silently), and every value in values.yaml is read by some template."""

from __future__ import annotations

import re
from typing import Any

import pytest

from component.deploy.helm_chart import CHART, values

TEMPLATES = [
    *sorted((CHART / "templates").rglob("*.yaml")),
    CHART / "templates" / "_helpers.tpl",
    CHART / "templates" / "NOTES.txt",
]
TEXT = {path.relative_to(CHART).as_posix(): path.read_text() for path in TEMPLATES}
READS = {
    match.group(1).lstrip(".")
    for text in TEXT.values()
    for match in re.finditer(r"\$?\.Values((?:\.[A-Za-z_][A-Za-z0-9_]*)+)", text)
}


def _leaves(data: Any, prefix: str = "") -> list[str]:
    if isinstance(data, dict) and data:
        return [leaf for key, value in data.items() for leaf in _leaves(value, f"{prefix}{key}.")]
    return [prefix.rstrip(".")]


def _exists(path: str, data: dict[str, Any]) -> bool:
    node: Any = data
    for key in path.split("."):
        if not isinstance(node, dict) or key not in node:
            return False
        node = node[key]
    return True


def test_configmap_is_values_config_verbatim() -> None:
    text = TEXT["templates/configmap.yaml"]
    body = text.split("\ndata:\n", 1)[1]
    keys = re.findall(r"^  ([\w.-]+):", body, re.MULTILINE)
    assert keys == ["config.yaml"], "the ConfigMap carries exactly one file"
    assert re.search(
        r"^  config\.yaml: \|\n    \{\{- toYaml \.Values\.config \| nindent 4 \}\}\n?\Z",
        body,
        re.MULTILINE,
    ), "config.yaml must be `toYaml .Values.config`, nothing added or changed"


def test_the_container_reads_the_configmaps_file() -> None:
    helpers = TEXT["templates/_helpers.tpl"]
    assert "mountPath: /etc/xds-control/config\n" in helpers
    assert "- --config\n    - /etc/xds-control/config/config.yaml" in helpers
    assert 'configMap:\n    name: {{ include "xds-control.fullname" . }}\n' in helpers


@pytest.mark.parametrize("path", sorted(READS))
def test_every_value_a_template_reads_is_in_values_yaml(path: str) -> None:
    # Under config: the server's optional fields (config.tls) need not be in the defaults.
    if path.startswith("config.") and path.count(".") == 1:
        return
    assert _exists(path, values()), f".Values.{path} is read by a template, unset in values.yaml"


def test_every_value_in_values_yaml_is_read_by_a_template() -> None:
    defaults = {k: v for k, v in values().items() if k != "config"}
    unread = [
        leaf
        for leaf in _leaves(defaults)
        if not any(leaf == read or leaf.startswith(f"{read}.") for read in READS)
    ]
    assert unread == []


def test_rbac_grants_reading_endpointslices_and_nothing_more_by_default() -> None:
    text = TEXT["templates/rbac.yaml"]
    rule = re.search(r"\$rules := list \((dict .*?)\)\s*\}\}", text)
    assert rule
    assert rule.group(1) == (
        'dict "apiGroups" (list "discovery.k8s.io") "resources" (list "endpointslices") '
        '"verbs" (list "get" "list" "watch")'
    )
    assert values()["rbac"]["extraRules"] == []
    # The default config's pools list their endpoints, so no pod is read.
    assert not any("kubernetes" in pool for pool in values()["config"]["pools"])


@pytest.mark.parametrize("name", sorted(TEXT))
def test_template_actions_are_balanced(name: str) -> None:
    """Without Helm here, the cheapest check of a template's syntax: every `{{` closes, and
    every if/range/with/define has its end (a missing one fails only at `helm install`)."""
    text = re.sub(r"\{\{-?\s*/\*.*?\*/\s*-?\}\}", "", TEXT[name], flags=re.DOTALL)
    assert text.count("{{") == text.count("}}")
    actions = re.findall(r"\{\{-?\s*(\w+)", text)
    opened = sum(action in {"if", "range", "with", "define", "block"} for action in actions)
    assert opened == actions.count("end")
