"""EndpointSlice JSON -> endpoints: conditions to EDS health, the port chosen, the Service's
labels carried, and one entry per address across slices."""

from __future__ import annotations

from typing import Any

import pytest

from xds_control.discovery import Health
from xds_control.discovery.kubernetes.slices import (
    SliceError,
    condition_health,
    merge_slices,
    slice_endpoints,
)


@pytest.mark.parametrize(
    ("conditions", "health"),
    [
        ({"ready": True, "serving": True, "terminating": False}, Health.HEALTHY),
        ({"ready": False, "serving": False, "terminating": False}, Health.UNHEALTHY),
        ({"ready": False, "serving": True, "terminating": True}, Health.DRAINING),
        ({"ready": False, "serving": False, "terminating": True}, Health.DRAINING),
        ({}, Health.HEALTHY),  # the API: a missing ready means ready
        (None, Health.HEALTHY),
    ],
)
def test_conditions_map_to_eds_health(conditions: dict[str, bool] | None, health: Health) -> None:
    assert condition_health(conditions) is health


def a_slice(**overrides: Any) -> dict[str, Any]:
    item: dict[str, Any] = {
        "metadata": {"name": "s1", "labels": {"xds-control.io/batch-slots": "32"}},
        "addressType": "IPv4",
        "endpoints": [
            {"addresses": ["10.0.0.1"], "conditions": {"ready": True}},
            {"addresses": [], "conditions": {"ready": True}},
        ],
        "ports": [{"name": "http", "port": 8000}, {"name": "metrics", "port": 9000}],
    }
    item.update(overrides)
    return item


def test_the_named_or_numbered_port_is_chosen() -> None:
    by_name = slice_endpoints(a_slice(), port="metrics", weight=5)
    assert [(e.address, e.weight, e.batch_slots) for e in by_name] == [("10.0.0.1:9000", 5, 32)]
    assert slice_endpoints(a_slice(), port=8000, weight=5)[0].port == 8000


def test_an_ambiguous_or_missing_port_is_an_error_naming_the_ports() -> None:
    with pytest.raises(SliceError, match=r"\['http', 'metrics'\]"):
        slice_endpoints(a_slice(), port=None, weight=5)
    with pytest.raises(SliceError, match="grpc"):
        slice_endpoints(a_slice(), port="grpc", weight=5)


def test_ipv6_is_bracketed_and_fqdn_slices_are_skipped() -> None:
    v6 = a_slice(
        addressType="IPv6",
        endpoints=[{"addresses": ["fd00:0::1"]}],
        ports=[{"port": 8000}],
    )
    assert slice_endpoints(v6, port=None, weight=1)[0].address == "[fd00::1]:8000"
    assert slice_endpoints(a_slice(addressType="FQDN"), port=None, weight=1) == ()


def test_a_bad_batch_slots_label_is_ignored() -> None:
    item = a_slice(metadata={"name": "s", "labels": {"xds-control.io/batch-slots": "lots"}})
    assert slice_endpoints(item, port="http", weight=1)[0].batch_slots is None


def test_an_address_in_two_slices_is_one_endpoint_the_healthier() -> None:
    old = slice_endpoints(
        a_slice(endpoints=[{"addresses": ["10.0.0.1"], "conditions": {"terminating": True}}]),
        port="http",
        weight=1,
    )
    new = slice_endpoints(a_slice(), port="http", weight=1)
    merged = merge_slices({"b": old, "a": new})
    assert [(e.address, e.health) for e in merged] == [("10.0.0.1:8000", Health.HEALTHY)]
    assert merge_slices({"b": old, "a": new}) == merge_slices({"a": new, "b": old})
