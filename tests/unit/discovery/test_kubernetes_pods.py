"""Pod JSON -> per-server facts, put over the slice's labels: the pod's labels win, its
annotations give the GPU (DCGM spellings), and an endpoint without a Pod targetRef keeps the
slice's labels."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from structlog.testing import capture_logs

from xds_control.config import Engine, KvEventPorts, Pool, engine_of
from xds_control.config.devices import Device
from xds_control.discovery.kubernetes.pods import (
    PodFacts,
    PodRef,
    label_facts,
    pod_facts,
    pod_ref,
)
from xds_control.discovery.kubernetes.slices import slice_endpoints, slice_pods

UID = "6f1c-uid"


def a_pod(labels: dict[str, str], annotations: dict[str, str] | None = None) -> dict[str, Any]:
    meta = {"name": "vllm-0", "uid": UID, "labels": labels, "annotations": annotations or {}}
    return {"kind": "Pod", "apiVersion": "v1", "metadata": meta}


def a_slice(*entries: dict[str, Any]) -> dict[str, Any]:
    return {
        "metadata": {
            "name": "s1",
            "namespace": "llm",
            "labels": {"xds-control.io/engine": "vllm", "xds-control.io/batch-slots": "64"},
        },
        "addressType": "IPv4",
        "endpoints": list(entries),
        "ports": [{"name": "http", "port": 8000}],
    }


def entry(ip: str, ref: dict[str, str] | None) -> dict[str, Any]:
    return {"addresses": [ip], **({"targetRef": ref} if ref else {})}


POD_REF = {"kind": "Pod", "name": "vllm-0", "uid": UID}


def test_annotations_give_the_device_and_labels_the_facts() -> None:
    facts = pod_facts(
        a_pod(
            {"xds-control.io/model": "llama-3-8b", "xds-control.io/batch-slots": "0"},
            {"xds-control.io/gpu-uuid": "GPU-a ", "xds-control.io/mig-instance": "3"},
        )
    )
    assert facts == PodFacts(
        model="llama-3-8b",
        batch_slots=None,  # 0 is no value: a typo must not zero a pool
        device=Device(gpu_uuid="GPU-a", mig_instance="3"),
    )
    assert pod_facts(a_pod({}, {"xds-control.io/mig-instance": "3"})).device is None


def test_the_target_ref_names_the_pod_by_uid_else_by_name() -> None:
    assert pod_ref(entry("10.0.0.1", POD_REF), namespace="llm") == PodRef("llm", "vllm-0", UID)
    no_uid = pod_ref(entry("10.0.0.1", {"kind": "Pod", "name": "p"}), namespace="llm")
    assert no_uid is not None
    assert no_uid.key == "llm/p"
    assert pod_ref(entry("10.0.0.1", {"kind": "Node", "name": "n"}), namespace="llm") is None
    assert pod_ref(entry("10.0.0.1", None), namespace="llm") is None


def test_the_pods_facts_override_the_slices_labels_where_it_states_them() -> None:
    item = a_slice(entry("10.0.0.1", POD_REF), entry("10.0.0.2", None))
    pods = {UID: PodFacts(batch_slots=16, device=Device(gpu_uuid="GPU-a"))}
    with_pod, without = slice_endpoints(item, port=None, weight=1, pods=pods)
    assert (with_pod.engine, with_pod.batch_slots, with_pod.device) == (
        "vllm",
        16,
        Device(gpu_uuid="GPU-a"),
    )
    assert (without.engine, without.batch_slots, without.device) == ("vllm", 64, None)
    assert slice_pods(item) == (PodRef("llm", "vllm-0", UID),)


def test_the_pods_engine_label_is_authoritative_over_the_slices() -> None:
    pod = a_pod({"xds-control.io/engine": "triton"})
    (endpoint,) = slice_endpoints(
        a_slice(entry("10.0.0.1", POD_REF)), port="http", weight=10, pods={UID: pod_facts(pod)}
    )
    assert endpoint.engine is Engine.TRITON


def test_an_unknown_engine_label_is_warned_once_and_the_pools_engine_is_used() -> None:
    pod = a_pod({"xds-control.io/engine": "tgi-unknown"})
    with capture_logs() as logs:
        for _ in range(3):
            (endpoint,) = slice_endpoints(
                a_slice(entry("10.0.0.1", POD_REF)),
                port="http",
                weight=10,
                pods={UID: pod_facts(pod)},
            )
    # The pod names no engine this control plane knows: the slice's label (vllm) stays.
    assert endpoint.engine is Engine.VLLM
    warned = [e for e in logs if e.get("value") == "tgi-unknown"]
    assert len(warned) == 1
    assert warned[0]["log_level"] == "warning"
    # With no label anywhere, the endpoint names none, and the pool's engine applies.
    assert label_facts({"xds-control.io/engine": "tgi-unknown"}).engine is None
    assert engine_of(Pool(name="p", engine=Engine.SGLANG), replace(endpoint, engine=None)) is (
        Engine.SGLANG
    )


def test_kv_event_ports_from_annotations_else_named_container_ports() -> None:
    annotated = a_pod(
        {}, {"xds-control.io/kv-events-port": "6557", "xds-control.io/kv-replay-port": "6558"}
    )
    assert pod_facts(annotated).kv_events == KvEventPorts(port=6557, replay_port=6558)
    named = a_pod({})
    named["spec"] = {
        "containers": [
            {"name": "vllm", "ports": [{"name": "http", "containerPort": 8000}]},
            {"name": "side", "ports": [{"name": "kv-events", "containerPort": 5557}]},
        ]
    }
    assert pod_facts(named).kv_events == KvEventPorts(port=5557)
    typo = a_pod({}, {"xds-control.io/kv-events-port": "55x7"})
    assert pod_facts(typo).kv_events is None
    slices = slice_endpoints(
        a_slice(entry("10.0.0.1", POD_REF)),
        port="http",
        weight=10,
        pods={UID: pod_facts(annotated)},
    )
    assert slices[0].kv_events == KvEventPorts(port=6557, replay_port=6558)
