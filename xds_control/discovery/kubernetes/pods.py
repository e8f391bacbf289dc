"""Pods (``v1``, as the API server sends them in JSON) -> per-server facts. Pure.

A Service's labels describe every server behind it; a pod's own labels describe that one
server, and only the pod can say which GPU it was given. So the pod behind each EndpointSlice
endpoint (its ``targetRef``) is read, and what it says wins over the slice's labels:

- labels ``xds-control.io/engine``, ``gpu-class``, ``model``, ``batch-slots`` (as on the Service);
  the engine label is authoritative: it selects the metric names the server is read in and its
  engine base weight over the pool's ``engine``. A value that names no engine is logged once
  (per value) and ignored: the server is read as its pool's engine, discovery goes on;
- annotations ``xds-control.io/gpu-uuid``, ``mig-instance``, ``mig-profile``: the GPU and MIG
  slice, spelled as the DCGM exporter labels its series (``UUID``, ``GPU_I_ID``,
  ``GPU_I_PROFILE``), so a device plugin hook or an operator copies them from there or from
  ``nvidia-smi -L``. Annotations, not labels: a GPU UUID is not something to select pods by;
- annotations ``xds-control.io/kv-events-port`` and ``kv-replay-port``, else container ports
  named ``kv-events`` and ``kv-replay``: where the server publishes its KV-cache events, when
  not on its pool's ``kv_events`` ports.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import structlog

from xds_control.config import Engine
from xds_control.config.devices import Device
from xds_control.config.kv_events import KvEventPorts
from xds_control.discovery.endpoint import Endpoint

__all__ = [
    "ANNOTATION_GPU_UUID",
    "ANNOTATION_MIG_INSTANCE",
    "ANNOTATION_MIG_PROFILE",
    "LABEL_BATCH_SLOTS",
    "LABEL_ENGINE",
    "LABEL_GPU_CLASS",
    "LABEL_MODEL",
    "PodFacts",
    "PodRef",
    "apply_pod",
    "label_engine",
    "label_facts",
    "pod_facts",
    "pod_ref",
]

log = structlog.get_logger(__name__)

LABEL_ENGINE = "xds-control.io/engine"
LABEL_GPU_CLASS = "xds-control.io/gpu-class"
LABEL_MODEL = "xds-control.io/model"
LABEL_BATCH_SLOTS = "xds-control.io/batch-slots"
ANNOTATION_GPU_UUID = "xds-control.io/gpu-uuid"
ANNOTATION_MIG_INSTANCE = "xds-control.io/mig-instance"
ANNOTATION_MIG_PROFILE = "xds-control.io/mig-profile"
ANNOTATION_KV_EVENTS_PORT = "xds-control.io/kv-events-port"
ANNOTATION_KV_REPLAY_PORT = "xds-control.io/kv-replay-port"
PORT_KV_EVENTS = "kv-events"
PORT_KV_REPLAY = "kv-replay"


@dataclass(frozen=True, slots=True)
class PodRef:
    """The pod an endpoint points at. ``key`` is its uid when the slice gives one (a pod
    recreated under the same name is another pod, possibly on another GPU), else its name."""

    namespace: str
    name: str
    uid: str | None

    @property
    def key(self) -> str:
        """What the pod's facts are cached under."""
        return self.uid or f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class PodFacts:
    """What a pod says about its server; ``None``: the pod does not say (the slice's label,
    if any, stays)."""

    engine: Engine | None = None
    gpu_class: str | None = None
    model: str | None = None
    batch_slots: int | None = None
    device: Device | None = None
    kv_events: KvEventPorts | None = None


_warned: set[str] = set()
"""Engine label values already warned about (a log line per value, not per pod and cycle)."""
_WARN_AT_MOST = 64


def label_engine(value: str | None) -> Engine | None:
    """The engine an ``xds-control.io/engine`` label names; ``None`` for no label or a value
    that names no engine (warned once per value: the pool's engine is used, discovery goes on)."""
    if not value:
        return None
    try:
        return Engine(value)
    except ValueError:
        if value not in _warned and len(_warned) < _WARN_AT_MOST:
            _warned.add(value)
            log.warning(
                "unknown engine label; the pool's engine is used",
                label=LABEL_ENGINE,
                value=value,
                known=[e.value for e in Engine],
            )
        return None


def _positive_int(text: str | None) -> int | None:
    """A label's positive integer; anything else is no value (a typo must not zero a pool)."""
    text = text or ""
    return int(text) if text.isdigit() and int(text) > 0 else None


def label_facts(labels: Mapping[str, str]) -> PodFacts:
    """The facts that labels state (a Service's, copied onto its slices, or a pod's own)."""
    return PodFacts(
        engine=label_engine(labels.get(LABEL_ENGINE)),
        gpu_class=labels.get(LABEL_GPU_CLASS) or None,
        model=labels.get(LABEL_MODEL) or None,
        batch_slots=_positive_int(labels.get(LABEL_BATCH_SLOTS)),
    )


def pod_ref(entry: Mapping[str, Any], *, namespace: str) -> PodRef | None:
    """The pod behind one ``endpoints[]`` entry of a slice, or ``None`` (no targetRef, or one
    that is not a Pod, as for a Service with manually managed slices)."""
    ref = entry.get("targetRef") or {}
    if ref.get("kind") != "Pod" or not ref.get("name"):
        return None
    uid = ref.get("uid")
    return PodRef(
        namespace=str(ref.get("namespace") or namespace),
        name=str(ref["name"]),
        uid=str(uid) if uid else None,
    )


def _device(annotations: Mapping[str, str]) -> Device | None:
    uuid = annotations.get(ANNOTATION_GPU_UUID, "").strip()
    if not uuid:
        return None
    return Device(
        gpu_uuid=uuid,
        mig_instance=annotations.get(ANNOTATION_MIG_INSTANCE, "").strip() or None,
        mig_profile=annotations.get(ANNOTATION_MIG_PROFILE, "").strip() or None,
    )


def _port(text: object) -> int | None:
    value = _positive_int(str(text)) if text is not None else None
    return value if value is not None and value <= 65_535 else None


def _kv_events(pod: Mapping[str, Any], annotations: Mapping[str, str]) -> KvEventPorts | None:
    """The pod's KV-event ports: its annotations, else its containers' ports named
    ``kv-events`` and ``kv-replay``."""
    named: dict[str, int] = {}
    for container in (pod.get("spec") or {}).get("containers") or ():
        for port in container.get("ports") or ():
            if port.get("name") in (PORT_KV_EVENTS, PORT_KV_REPLAY):
                number = _port(port.get("containerPort"))
                if number is not None:
                    named[port["name"]] = number
    events = _port(annotations.get(ANNOTATION_KV_EVENTS_PORT)) or named.get(PORT_KV_EVENTS)
    replay = _port(annotations.get(ANNOTATION_KV_REPLAY_PORT)) or named.get(PORT_KV_REPLAY)
    return None if events is None else KvEventPorts(port=events, replay_port=replay)


def pod_facts(pod: Mapping[str, Any]) -> PodFacts:
    """A Pod object's labels, annotations and named ports -> the facts it states about its
    server."""
    metadata = pod.get("metadata") or {}
    labels = label_facts(metadata.get("labels") or {})
    annotations = metadata.get("annotations") or {}
    return replace(labels, device=_device(annotations), kv_events=_kv_events(pod, annotations))


def apply_pod(endpoint: Endpoint, facts: PodFacts | None) -> Endpoint:
    """``endpoint`` with what its pod says put over what the slice said."""
    if facts is None:
        return endpoint
    return replace(
        endpoint,
        engine=facts.engine or endpoint.engine,
        gpu_class=facts.gpu_class or endpoint.gpu_class,
        model=facts.model or endpoint.model,
        batch_slots=facts.batch_slots or endpoint.batch_slots,
        device=facts.device or endpoint.device,
        kv_events=facts.kv_events or endpoint.kv_events,
    )
