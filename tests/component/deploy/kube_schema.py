"""Field names and types of Kubernetes objects, checked offline, so a manifest with a misspelt
or misplaced field fails here and not at `kubectl apply`: built-in kinds against the API's own
models (kubernetes_asyncio's generated classes, one per OpenAPI type), the ServiceMonitor
custom resource against a field table written down below. A kind neither knows is a problem
too, never a silent pass.

Not checked, for either: required fields, enum values and value formats (a duration, a
quantity, a label's syntax). The API server checks those; the models carry only names and
types.
"""

from __future__ import annotations

import re
from typing import Any

from kubernetes_asyncio import client

# (apiVersion, kind) -> the type that checks it: a kubernetes_asyncio model, or a _CUSTOM table.
KINDS = {
    ("v1", "ConfigMap"): "V1ConfigMap",
    ("v1", "Service"): "V1Service",
    ("v1", "Secret"): "V1Secret",
    ("v1", "ServiceAccount"): "V1ServiceAccount",
    ("v1", "Pod"): "V1Pod",
    ("apps/v1", "Deployment"): "V1Deployment",
    ("policy/v1", "PodDisruptionBudget"): "V1PodDisruptionBudget",
    ("autoscaling/v2", "HorizontalPodAutoscaler"): "V2HorizontalPodAutoscaler",
    ("rbac.authorization.k8s.io/v1", "Role"): "V1Role",
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): "V1RoleBinding",
    ("rbac.authorization.k8s.io/v1", "ClusterRole"): "V1ClusterRole",
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"): "V1ClusterRoleBinding",
    ("monitoring.coreos.com/v1", "ServiceMonitor"): "ServiceMonitor",
}

# A CRD has no generated model here, and its schema is the operator's, so the ServiceMonitor's
# fields (prometheus-operator's monitoring.coreos.com/v1, as of operator 0.84) are listed by
# hand: every field of the spec and of an endpoint, so a misspelt one at those levels fails.
# Below them, what the chart never writes (basicAuth, oauth2, tlsConfig, params, the proxy
# settings, attachMetadata) is typed `object`: its presence is checked, its inside is not. A
# field a later operator adds fails here until it is added to the table, and whether the
# cluster has the CRD at all is for `helm install` to find out.
_CUSTOM: dict[str, dict[str, str]] = {
    "ServiceMonitor": {
        "apiVersion": "str",
        "kind": "str",
        "metadata": "V1ObjectMeta",
        "spec": "ServiceMonitorSpec",
    },
    "ServiceMonitorSpec": {
        "attachMetadata": "object",
        "bodySizeLimit": "str",
        "convertClassicHistogramsToNHCB": "bool",
        "endpoints": "list[ServiceMonitorEndpoint]",
        "fallbackScrapeProtocol": "str",
        "jobLabel": "str",
        "keepDroppedTargets": "int",
        "labelLimit": "int",
        "labelNameLengthLimit": "int",
        "labelValueLengthLimit": "int",
        "namespaceSelector": "ServiceMonitorNamespaceSelector",
        "nativeHistogramBucketLimit": "int",
        "nativeHistogramMinBucketFactor": "object",
        "podTargetLabels": "list[str]",
        "sampleLimit": "int",
        "scrapeClass": "str",
        "scrapeClassicHistograms": "bool",
        "scrapeProtocols": "list[str]",
        "selector": "V1LabelSelector",
        "selectorMechanism": "str",
        "targetLabels": "list[str]",
        "targetLimit": "int",
    },
    "ServiceMonitorNamespaceSelector": {"any": "bool", "matchNames": "list[str]"},
    "ServiceMonitorEndpoint": {
        "authorization": "ServiceMonitorAuthorization",
        "basicAuth": "object",
        "bearerTokenFile": "str",
        "bearerTokenSecret": "V1SecretKeySelector",
        "enableHttp2": "bool",
        "filterRunning": "bool",
        "followRedirects": "bool",
        "honorLabels": "bool",
        "honorTimestamps": "bool",
        "interval": "str",
        "metricRelabelings": "list[ServiceMonitorRelabelConfig]",
        "noProxy": "str",
        "oauth2": "object",
        "params": "object",
        "path": "str",
        "port": "str",
        "proxyConnectHeader": "object",
        "proxyFromEnvironment": "bool",
        "proxyUrl": "str",
        "relabelings": "list[ServiceMonitorRelabelConfig]",
        "scheme": "str",
        "scrapeTimeout": "str",
        "targetPort": "object",
        "tlsConfig": "object",
        "trackTimestampsStaleness": "bool",
    },
    "ServiceMonitorAuthorization": {"credentials": "V1SecretKeySelector", "type": "str"},
    "ServiceMonitorRelabelConfig": {
        "action": "str",
        "modulus": "int",
        "regex": "str",
        "replacement": "str",
        "separator": "str",
        "sourceLabels": "list[str]",
        "targetLabel": "str",
    },
}
_PRIMITIVES: dict[str, type | tuple[type, ...]] = {
    "str": str,
    "int": int,
    "bool": bool,
    "float": (int, float),
    "object": object,
}


def problems(manifest: dict[str, Any]) -> list[str]:
    """Each field of ``manifest`` its type does not have, or of the wrong type, by path; or,
    for a kind this check does not know, that one problem."""
    kind = manifest.get("kind", "?")
    model = KINDS.get((manifest.get("apiVersion", "?"), kind))
    if model is None:
        return [f"{kind}: {manifest.get('apiVersion')} {kind} is not a kind this check knows"]
    return list(_check(manifest, model, kind))


def _fields(type_name: str) -> dict[str, str]:
    """The JSON field names of ``type_name`` and each one's type name."""
    if type_name in _CUSTOM:
        return _CUSTOM[type_name]
    model = getattr(client, type_name)
    return {json_name: model.openapi_types[name] for name, json_name in model.attribute_map.items()}


def _check(value: Any, type_name: str, path: str) -> list[str]:
    if type_name in _PRIMITIVES:
        ok = isinstance(value, _PRIMITIVES[type_name]) and not (
            type_name == "int" and isinstance(value, bool)
        )
        return [] if ok else [f"{path}: expected {type_name}, got {type(value).__name__}"]
    if match := re.fullmatch(r"list\[(.+)\]", type_name):
        if not isinstance(value, list):
            return [f"{path}: expected a list"]
        return [p for i, item in enumerate(value) for p in _check(item, match[1], f"{path}[{i}]")]
    if match := re.fullmatch(r"dict\(str, (.+)\)", type_name):
        if not isinstance(value, dict):
            return [f"{path}: expected a mapping"]
        return [p for k, item in value.items() for p in _check(item, match[1], f"{path}.{k}")]
    if not isinstance(value, dict):
        return [f"{path}: expected a {type_name} mapping"]
    fields = _fields(type_name)
    out = []
    for key, item in value.items():
        if key not in fields:
            out.append(f"{path}.{key}: not a field of {type_name}")
        else:
            out += _check(item, fields[key], f"{path}.{key}")
    return out
