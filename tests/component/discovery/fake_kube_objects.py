"""Kubernetes API objects as the real API server sends them in JSON, for the fake API server
and the tests that fill it: EndpointSlices (``discovery.k8s.io/v1``), Pods (``v1``),
InferencePools (``inference.networking.k8s.io/v1``) and the ``Status`` bodies of its errors
(410 Expired, 403 Forbidden, 404 NotFound)."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from typing import Any

SERVICE_LABEL = "kubernetes.io/service-name"


def pod_name(ip: str) -> str:
    """The name of the pod serving ``ip`` in these tests."""
    return f"vllm-{ip.replace('.', '-')}"


def pod_uid(name: str) -> str:
    """A stable uid per pod name (the API server's are random UUIDs)."""
    return str(uuid.uuid5(uuid.NAMESPACE_DNS, name))


def endpoint(
    ip: str,
    *,
    ready: bool = True,
    serving: bool | None = None,
    terminating: bool = False,
    pod: str | None = None,
) -> dict[str, Any]:
    """One ``endpoints[]`` entry of a slice, as the EndpointSlice controller writes it; its
    targetRef names pod ``pod`` (default ``pod_name(ip)``) and that pod's uid."""
    name = pod or pod_name(ip)
    return {
        "addresses": [ip],
        "conditions": {
            "ready": ready,
            "serving": ready if serving is None else serving,
            "terminating": terminating,
        },
        "targetRef": {"kind": "Pod", "namespace": "llm", "name": name, "uid": pod_uid(name)},
        "nodeName": "node-a",
    }


def endpoint_slice(
    name: str,
    *,
    service: str,
    endpoints: Iterable[dict[str, Any]],
    port: int,
    port_name: str = "http",
    labels: Mapping[str, str] | None = None,
    namespace: str = "llm",
) -> dict[str, Any]:
    """An ``EndpointSlice`` object (``resourceVersion`` is set by the server when stored)."""
    return {
        "kind": "EndpointSlice",
        "apiVersion": "discovery.k8s.io/v1",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "generateName": f"{service}-",
            "labels": {
                SERVICE_LABEL: service,
                "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io",
                **(labels or {}),
            },
        },
        "addressType": "IPv4",
        "endpoints": list(endpoints),
        "ports": [{"name": port_name, "protocol": "TCP", "port": port}],
    }


def pod(
    ip: str,
    *,
    name: str | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    namespace: str = "llm",
    ready: bool = True,
    terminating: bool = False,
) -> dict[str, Any]:
    """A running ``Pod`` with ``ip`` (``resourceVersion`` is set by the server when stored);
    ``ready`` is its Ready condition, ``terminating`` gives it a ``deletionTimestamp`` as a
    graceful delete does."""
    name = name or pod_name(ip)
    made: dict[str, Any] = {
        "kind": "Pod",
        "apiVersion": "v1",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": pod_uid(name),
            "creationTimestamp": "2026-11-30T12:00:00Z",
            "labels": {"app": "vllm", **(labels or {})},
            "annotations": dict(annotations or {}),
            "ownerReferences": [
                {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "vllm-7c9f", "uid": "rs"}
            ],
        },
        "spec": {
            "containers": [{"name": "vllm", "image": "vllm/vllm-openai:v0.6.3"}],
            "nodeName": "node-a",
        },
        "status": {
            "phase": "Running",
            "podIP": ip,
            "podIPs": [{"ip": ip}],
            "conditions": [
                {"type": "PodScheduled", "status": "True"},
                {"type": "Ready", "status": "True" if ready else "False"},
            ],
        },
    }
    if terminating:
        made["metadata"]["deletionTimestamp"] = "2026-11-30T12:05:00Z"
        made["metadata"]["deletionGracePeriodSeconds"] = 30
    return made


def inference_pool(
    name: str,
    *,
    selector: Mapping[str, str],
    ports: Iterable[int],
    failure_mode: str | None = None,
    namespace: str = "llm",
) -> dict[str, Any]:
    """An ``InferencePool`` (v1) selecting pods by ``selector`` on ``ports``, with an
    endpoint picker; ``failure_mode`` unset leaves the API's default (FailClose) unwritten."""
    picker: dict[str, Any] = {"name": f"{name}-epp", "kind": "Service", "port": {"number": 9002}}
    if failure_mode is not None:
        picker["failureMode"] = failure_mode
    return {
        "kind": "InferencePool",
        "apiVersion": "inference.networking.k8s.io/v1",
        "metadata": {"name": name, "namespace": namespace, "generation": 1},
        "spec": {
            "selector": {"matchLabels": dict(selector)},
            "targetPorts": [{"number": port} for port in ports],
            "endpointPickerRef": picker,
        },
    }


def status(code: int, reason: str, message: str, **extra: Any) -> dict[str, Any]:
    """A ``Status`` body, as the API server answers an error."""
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
        **extra,
    }


def forbidden_pod(name: str, *, namespace: str, user: str) -> dict[str, Any]:
    """What a GET of a pod answers when RBAC does not grant ``get`` on pods."""
    return status(
        403,
        "Forbidden",
        f'pods "{name}" is forbidden: User "{user}" cannot get resource "pods" in API group "" '
        f'in the namespace "{namespace}"',
        details={"name": name, "kind": "pods"},
    )


def expired_continue(token: str) -> dict[str, Any]:
    """What a list answers a continue token whose snapshot was compacted away."""
    return status(
        410,
        "Expired",
        "The provided continue parameter is too old to display a consistent list result. You "
        "can start a new list without the continue parameter, or use the continue token in "
        "this response to retrieve the remainder of the results.",
        metadata={"continue": token},
    )
