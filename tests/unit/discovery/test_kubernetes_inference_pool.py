"""An InferencePool and its pods -> the pool's endpoints, pure: only Ready pods with an IP that
are not being deleted and that the selector matches, on every target port, with the pod's
labels and GPU annotations as their facts; an InferencePool without a selector or target port
is refused with the reason; the endpoint picker's failureMode is kept (FailClose by default)."""

from __future__ import annotations

from typing import Any

import pytest

from xds_control.discovery.kubernetes.inference_pool import (
    InferencePoolError,
    PickerRef,
    label_selector,
    pool_endpoints,
    pool_spec,
)

SELECTOR = {"app": "vllm", "model": "llama"}


def a_pool(**spec: Any) -> dict[str, Any]:
    base = {"selector": {"matchLabels": SELECTOR}, "targetPorts": [{"number": 8000}]}
    return {"kind": "InferencePool", "metadata": {"name": "llama"}, "spec": {**base, **spec}}


def a_pod(
    ip: str | None,
    *,
    labels: dict[str, str] | None = None,
    ready: str = "True",
    deleting: bool = False,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    metadata: dict[str, Any] = {
        "name": f"vllm-{ip}",
        "labels": SELECTOR if labels is None else labels,
        "annotations": annotations or {},
    }
    if deleting:
        metadata["deletionTimestamp"] = "2026-11-30T12:05:00Z"
    status: dict[str, Any] = {"conditions": [{"type": "Ready", "status": ready}]}
    if ip is not None:
        status["podIP"] = ip
    return {"kind": "Pod", "metadata": metadata, "status": status}


def addresses(pods: list[dict[str, Any]], **spec: Any) -> list[str]:
    endpoints = pool_endpoints(pods, spec=pool_spec(a_pool(**spec)), weight=10)
    return [e.address for e in endpoints]


def test_only_ready_serving_selected_pods_are_endpoints() -> None:
    pods = [
        a_pod("10.0.0.3"),
        a_pod("10.0.0.1"),
        a_pod("10.0.0.2", ready="False"),
        a_pod("10.0.0.4", deleting=True),
        a_pod(None),  # scheduled, no IP yet
        a_pod("10.0.0.5", labels={"app": "vllm"}),  # half the selector is not a match
        a_pod("10.0.0.6", labels={**SELECTOR, "extra": "x"}),
    ]
    assert addresses(pods) == ["10.0.0.1:8000", "10.0.0.3:8000", "10.0.0.6:8000"]


def test_a_pod_without_a_ready_condition_is_not_ready() -> None:
    pod = a_pod("10.0.0.1")
    pod["status"]["conditions"] = [{"type": "ContainersReady", "status": "True"}]
    assert addresses([pod]) == []


def test_several_target_ports_give_one_endpoint_per_port() -> None:
    ports = [{"number": 8000}, {"number": 8001}]
    assert addresses([a_pod("10.0.0.1"), a_pod("fd00::1")], targetPorts=ports) == [
        "10.0.0.1:8000",
        "10.0.0.1:8001",
        "[fd00::1]:8000",
        "[fd00::1]:8001",
    ]


def test_the_pods_labels_and_annotations_are_the_endpoints_facts() -> None:
    labels = {
        **SELECTOR,
        "xds-control.io/engine": "sglang",
        "xds-control.io/gpu-class": "l4",
        "xds-control.io/model": "llama-3-8b",
        "xds-control.io/batch-slots": "32",
    }
    gpu = {"xds-control.io/gpu-uuid": "GPU-b", "xds-control.io/mig-instance": "2"}
    (endpoint,) = pool_endpoints(
        [a_pod("10.0.0.1", labels=labels, annotations=gpu)],
        spec=pool_spec(a_pool()),
        weight=25,
    )
    assert (endpoint.engine, endpoint.gpu_class, endpoint.model, endpoint.batch_slots) == (
        "sglang",
        "l4",
        "llama-3-8b",
        32,
    )
    assert endpoint.weight == 25
    assert endpoint.device is not None
    assert (endpoint.device.gpu_uuid, endpoint.device.mig_instance) == ("GPU-b", "2")


def test_the_selector_becomes_a_sorted_label_selector() -> None:
    assert label_selector(pool_spec(a_pool())) == "app=vllm,model=llama"


def test_the_pickers_failure_mode_is_kept_and_defaults_to_fail_close() -> None:
    ref = {"name": "llama-epp", "kind": "Service", "port": {"number": 9002}}
    assert pool_spec(a_pool(endpointPickerRef=ref)).picker == PickerRef(
        name="llama-epp", kind="Service", port=9002, failure_mode="FailClose"
    )
    opened = pool_spec(a_pool(endpointPickerRef={**ref, "failureMode": "FailOpen"}))
    assert opened.picker is not None
    assert opened.picker.failure_mode == "FailOpen"
    assert pool_spec(a_pool()).picker is None


@pytest.mark.parametrize(
    ("spec", "reason"),
    [
        ({"selector": {}}, "no selector"),
        ({"selector": {"matchLabels": {}}}, "no selector"),
        ({"targetPorts": []}, "no targetPorts"),
        ({"targetPorts": [{"number": 0}]}, "1..65535"),
        ({"targetPorts": [{"name": "http"}]}, "no port number"),
        ({"targetPorts": [{"number": 8000 + i} for i in range(9)]}, "allows 8"),
        ({"endpointPickerRef": {"name": "epp", "failureMode": "Maybe"}}, "failureMode"),
    ],
)
def test_an_unusable_inference_pool_is_refused_with_the_reason(
    spec: dict[str, Any], reason: str
) -> None:
    with pytest.raises(InferencePoolError, match=reason):
        pool_spec(a_pool(**spec))


def test_an_inference_pool_without_a_spec_is_refused() -> None:
    with pytest.raises(InferencePoolError, match="no spec"):
        pool_spec({"metadata": {"name": "llama"}})


def test_an_unknown_engine_label_leaves_the_endpoint_on_its_pools_engine() -> None:
    labels = {**SELECTOR, "xds-control.io/engine": "not-an-engine"}
    known = {**SELECTOR, "xds-control.io/engine": "triton"}
    odd, triton = pool_endpoints(
        [a_pod("10.0.0.1", labels=labels), a_pod("10.0.0.2", labels=known)],
        spec=pool_spec(a_pool()),
        weight=10,
    )
    assert (odd.engine, triton.engine) == (None, "triton")
