"""Pool weights for routes over several pools: each pool's capacity, kept steady by the same
smoothing, quantising and hysteresis as endpoint weights."""

from __future__ import annotations

from decisions import steady_decision
from xds_control.config import Config, parse_config
from xds_control.discovery import Health
from xds_control.engine import WeightDecision
from xds_control.engine.pool_weights import compute_route_weights, pool_capacity

CONFIG = """
pools:
  - {name: big, endpoints: [{address: 127.0.0.1:8001}], weights: {ewma_alpha: 1.0}}
  - {name: small, endpoints: [{address: 127.0.0.1:8002}]}
  - {name: unmeasured, endpoints: [{address: 127.0.0.1:8003}]}
listeners:
  - name: gw
    address: 127.0.0.1:10000
    routes:
      - {name: split, pools: [{name: big}, {name: small}]}
      - {name: partly, pools: [{name: big}, {name: unmeasured}]}
      - {name: one, pool: big}
"""


def _decision(
    capacity: float | None, *, health: Health = Health.HEALTHY, warmup: float = 1.0
) -> WeightDecision:
    return steady_decision(capacity_estimate=capacity, health=health, warmup=warmup)


def _config() -> Config:
    return parse_config(text=CONFIG)


def test_a_pool_counts_its_in_service_capacity() -> None:
    assert pool_capacity([_decision(None), _decision(None)]) is None
    found = pool_capacity(
        [
            _decision(10.0),
            _decision(30.0),
            _decision(None),  # counts as the mean, 20
            _decision(40.0, warmup=0.5),  # half way up its ramp
            _decision(99.0, health=Health.UNHEALTHY),
            _decision(99.0, health=Health.DRAINING),
        ]
    )
    assert found is not None
    capacity, counted = found
    assert round(capacity, 6) == round(10 + 30 + (10 + 30 + 40 + 99 + 99) / 5 + 20, 6)
    assert counted == 3.5


def test_route_weights_follow_capacity_and_hold_through_noise() -> None:
    config = _config()
    pools = {"big": [_decision(30.0), _decision(30.0)], "small": [_decision(20.0)]}
    first = compute_route_weights(config=config, decisions=pools, previous={}, now=0.0)
    # Only the route whose every pool is measured gets engine weights.
    assert set(first) == {"gw/split"}
    assert {p: w.weight for p, w in first["gw/split"].items()} == {"big": 100, "small": 35}

    # Small changes stay inside the hysteresis band: nothing moves, nothing is republished.
    noisy = {"big": [_decision(31.0), _decision(30.0)], "small": [_decision(19.0)]}
    held = compute_route_weights(config=config, decisions=noisy, previous=first, now=1.0)
    assert {p: w.weight for p, w in held["gw/split"].items()} == {"big": 100, "small": 35}

    # The small pool doubles: its weight climbs, at most max_step (30) per cycle.
    grown = {"big": [_decision(30.0), _decision(30.0)], "small": [_decision(60.0)]}
    moved = compute_route_weights(config=config, decisions=grown, previous=held, now=2.0)
    assert {p: w.weight for p, w in moved["gw/split"].items()} == {"big": 100, "small": 65}
    near = compute_route_weights(config=config, decisions=grown, previous=moved, now=3.0)
    assert near["gw/split"]["small"].weight == 95
    # The last quantum is inside the hysteresis band, but the weight's slow average is past
    # three quarters of a quantum and nothing measured says it is noise: it lands.
    settled = compute_route_weights(config=config, decisions=grown, previous=near, now=4.0)
    assert {p: w.weight for p, w in settled["gw/split"].items()} == {"big": 100, "small": 100}
    assert settled["gw/split"]["small"].to_json()["capacity"] == 60.0
