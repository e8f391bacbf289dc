"""The scrape-time metrics: a weight, its factors and its signals' ages per endpoint, streams per
node group; an endpoint that left takes its series with it."""

from __future__ import annotations

import time
from types import MappingProxyType

from prometheus_client import REGISTRY

from decisions import steady_decision
from xds_control.admin.exporter import refresh
from xds_control.control import EngineView
from xds_control.engine import Factors, WeightDecision
from xds_control.server import StreamRegistry
from xds_control.signals import Sample, Signal
from xds_control.signals.sample import Reading


def decision(address: str, weight: int, *, observed_at: float) -> WeightDecision:
    reading = Reading(value=3.0, observed_at=observed_at, source="scrape")
    return steady_decision(
        address=address,
        weight=weight,
        factors=Factors(capacity=0.8, queue=0.5),
        score=0.4,
        target=40.0,
        smoothed=40.0,
        reason="fresh signals",
        computed_at=observed_at,
        sample=Sample(address=address, readings={Signal.WAITING: reading}),
        last_fresh_at=observed_at,
        last_fresh_weight=40.0,
        candidate=weight,
        candidate_since=observed_at,
        capacity_estimate=1.0,
        slowness_recent=1.0,
    )


def view(*decisions: WeightDecision) -> EngineView:
    return EngineView(
        enabled=True, cycle=1, source_error=None, pools=MappingProxyType({"chat": decisions})
    )


def value(name: str, **labels: str) -> float | None:
    return REGISTRY.get_sample_value(name, labels)


def test_weights_factors_and_ages_per_endpoint_and_a_leaver_goes() -> None:
    registry = StreamRegistry()
    old = time.time() - 30
    refresh(
        engine=view(decision("a:1", 40, observed_at=old), decision("b:1", 60, observed_at=old)),
        registry=registry,
        groups=["default"],
    )
    assert value("xds_control_endpoint_weight", pool="chat", endpoint="a:1") == 40
    assert value("xds_control_endpoint_weight", pool="chat", endpoint="b:1") == 60
    assert (
        value("xds_control_endpoint_weight_factor", pool="chat", endpoint="a:1", factor="queue")
        == 0.5
    )
    age = value("xds_control_signal_age_seconds", pool="chat", endpoint="a:1", signal="waiting")
    assert age is not None
    assert 29 <= age <= 40
    assert value("xds_control_connected_streams", group="default") == 0

    refresh(engine=view(decision("a:1", 45, observed_at=old)), registry=registry, groups=[])
    assert value("xds_control_endpoint_weight", pool="chat", endpoint="a:1") == 45
    assert value("xds_control_endpoint_weight", pool="chat", endpoint="b:1") is None
    assert (
        value("xds_control_endpoint_weight_factor", pool="chat", endpoint="b:1", factor="queue")
        is None
    )


def test_static_weights_export_no_engine_series() -> None:
    refresh(engine=None, registry=StreamRegistry(), groups=["default"])
    assert value("xds_control_endpoint_weight", pool="chat", endpoint="a:1") is None
