"""Field names and types of Kubernetes objects, checked offline against the API's own models
(kubernetes_asyncio's generated classes, one per OpenAPI type), so an example manifest with a
misspelt or misplaced field fails here and not at `kubectl apply`."""

from __future__ import annotations

import re
from typing import Any

from kubernetes_asyncio import client

KINDS = {
    ("v1", "ConfigMap"): "V1ConfigMap",
    ("v1", "Service"): "V1Service",
    ("v1", "Secret"): "V1Secret",
    ("apps/v1", "Deployment"): "V1Deployment",
}
_PRIMITIVES: dict[str, type | tuple[type, ...]] = {
    "str": str,
    "int": int,
    "bool": bool,
    "float": (int, float),
    "object": object,
}


def problems(manifest: dict[str, Any]) -> list[str]:
    """Each field of ``manifest`` its type does not have, or of the wrong type, by path."""
    model = KINDS[(manifest["apiVersion"], manifest["kind"])]
    return list(_check(manifest, model, manifest["kind"]))


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
    model = getattr(client, type_name)
    if not isinstance(value, dict):
        return [f"{path}: expected a {type_name} mapping"]
    fields = {
        json_name: model.openapi_types[name] for name, json_name in model.attribute_map.items()
    }
    out = []
    for key, item in value.items():
        if key not in fields:
            out.append(f"{path}.{key}: not a field of {type_name}")
        else:
            out += _check(item, fields[key], f"{path}.{key}")
    return out
