"""An InferencePool (``inference.networking.k8s.io/v1``, as the API server sends it in JSON)
and the pods it selects (``v1``) -> endpoints. Pure.

The pool's ``spec.selector.matchLabels`` names its pods and ``spec.targetPorts`` the port(s)
its model servers listen on: every pod that is Ready, has an IP and is not being deleted is an
endpoint on each target port (one port is the usual case; with several, one endpoint per port,
as the Inference Extension's own picker does). A pod that is not ready is left out rather than
kept UNHEALTHY: the pool names pods, not Service endpoints, and a pod that is still starting is
not a server yet. The facts of each server (engine, GPU class, model, batch slots, its GPU)
come from the pod's labels and annotations, read as for the EndpointSlice source
(``pods``).

``spec.endpointPickerRef.failureMode`` is kept (``PickerRef``): the control loop makes the
pool's picker fail open or closed by it (``control.discovered``).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from xds_control.discovery.endpoint import Endpoint
from xds_control.discovery.kubernetes.pods import apply_pod, pod_facts

__all__ = [
    "FailureMode",
    "InferencePoolError",
    "PickerRef",
    "PoolSpec",
    "label_selector",
    "pool_endpoints",
    "pool_spec",
    "selects",
]

FailureMode = Literal["FailOpen", "FailClose"]
_MAX_TARGET_PORTS = 8
"""The API's own limit on ``targetPorts``."""


class InferencePoolError(ValueError):
    """An InferencePool this pool cannot use (no selector, no valid target port)."""


@dataclass(frozen=True, slots=True)
class PickerRef:
    """``spec.endpointPickerRef``: the endpoint picker (an ext_proc service) the gateway asks
    per request, and whether requests go on without it (``FailOpen``) or fail (``FailClose``,
    the API's default)."""

    name: str
    kind: str
    port: int | None
    failure_mode: FailureMode


@dataclass(frozen=True, slots=True)
class PoolSpec:
    """What this source follows of an InferencePool's spec."""

    selector: tuple[tuple[str, str], ...]
    """``matchLabels`` as sorted pairs: the same selector is the same value."""
    target_ports: tuple[int, ...]
    picker: PickerRef | None


def _picker(ref: Mapping[str, Any] | None) -> PickerRef | None:
    if not ref or not ref.get("name"):
        return None
    mode = ref.get("failureMode") or "FailClose"
    if mode not in ("FailOpen", "FailClose"):
        raise InferencePoolError(
            f"endpointPickerRef.failureMode {mode!r} is not FailOpen or FailClose"
        )
    port = (ref.get("port") or {}).get("number")
    return PickerRef(
        name=str(ref["name"]),
        kind=str(ref.get("kind") or "Service"),
        port=int(port) if port is not None else None,
        failure_mode="FailOpen" if mode == "FailOpen" else "FailClose",
    )


def _ports(entries: Iterable[Any]) -> tuple[int, ...]:
    ports: list[int] = []
    for entry in entries:
        number = entry.get("number") if isinstance(entry, Mapping) else None
        if not isinstance(number, int) or not 0 < number < 65536:
            raise InferencePoolError(f"targetPorts entry {entry!r} has no port number in 1..65535")
        if number not in ports:
            ports.append(number)
    if not ports:
        raise InferencePoolError("has no targetPorts")
    if len(ports) > _MAX_TARGET_PORTS:
        raise InferencePoolError(
            f"has {len(ports)} targetPorts; the API allows {_MAX_TARGET_PORTS}"
        )
    return tuple(ports)


def pool_spec(item: Mapping[str, Any]) -> PoolSpec:
    """An InferencePool object -> what its endpoints depend on. ``InferencePoolError`` for a
    pool without a selector (it would select every pod of the namespace) or target ports."""
    spec = item.get("spec")
    if not isinstance(spec, Mapping):
        raise InferencePoolError("has no spec")
    labels = (spec.get("selector") or {}).get("matchLabels") or {}
    if not isinstance(labels, Mapping) or not labels:
        raise InferencePoolError("has no selector.matchLabels")
    return PoolSpec(
        selector=tuple(sorted((str(k), str(v)) for k, v in labels.items())),
        target_ports=_ports(spec.get("targetPorts") or ()),
        picker=_picker(spec.get("endpointPickerRef")),
    )


def label_selector(spec: PoolSpec) -> str:
    """The ``labelSelector`` query that lists and watches the pool's pods."""
    return ",".join(f"{key}={value}" for key, value in spec.selector)


def selects(spec: PoolSpec, pod: Mapping[str, Any]) -> bool:
    """Whether ``pod``'s labels match the pool's selector."""
    labels = (pod.get("metadata") or {}).get("labels") or {}
    return all(labels.get(key) == value for key, value in spec.selector)


def _serving_ip(pod: Mapping[str, Any]) -> str | None:
    """The pod's IP when it may take requests: Ready, and not being deleted."""
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        return None
    status = pod.get("status") or {}
    ready = any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in status.get("conditions") or ()
    )
    ip = status.get("podIP")
    if not ready or not ip:
        return None
    try:
        return str(ipaddress.ip_address(ip))
    except ValueError:
        return None


def pool_endpoints(
    pods: Iterable[Mapping[str, Any]], *, spec: PoolSpec, weight: int
) -> tuple[Endpoint, ...]:
    """The endpoints of the pool: each selected, serving pod on each target port, sorted by
    address (the same state is the same tuple)."""
    found: dict[str, Endpoint] = {}
    for pod in pods:
        ip = _serving_ip(pod)
        if ip is None or not selects(spec, pod):
            continue
        facts = pod_facts(pod)
        for port in spec.target_ports:
            address = f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"
            endpoint = Endpoint(address=address, host=ip, port=port, weight=weight)
            found[address] = apply_pod(endpoint, facts)
    return tuple(found[address] for address in sorted(found))
