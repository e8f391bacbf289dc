"""A restarted control plane resumes the pool weights of routes over several pools, as it
resumes endpoint weights: the first snapshot after a restart splits as the last one did."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path

from decisions import steady_decision
from xds_control.config import Config, parse_config
from xds_control.control.warm_start import (
    EngineState,
    WarmStart,
    config_hash,
    decode_state,
    encode_state,
    save_state,
)
from xds_control.control.weigher import Weigher
from xds_control.engine import WeightDecision
from xds_control.engine.pool_weights import PoolWeight
from xds_control.errors import SignalError
from xds_control.signals import Sample, Target


class NoSource:
    """A configured source that has answered nothing yet (the engine is on)."""

    async def fetch(self, targets: Iterable[Target]) -> Mapping[str, Sample]:
        raise SignalError("not answered yet")


def _config(state_file: Path) -> Config:
    return parse_config(
        text=f"""
pools:
  - {{name: a, endpoints: [{{address: 127.0.0.1:8001}}]}}
  - {{name: b, endpoints: [{{address: 127.0.0.1:8002}}]}}
listeners:
  - name: gw
    address: 127.0.0.1:10000
    routes: [{{name: split, pools: [{{name: a}}, {{name: b}}]}}]
restart: {{state_file: {state_file}}}
"""
    )


def _decision(address: str, weight: int) -> WeightDecision:
    return steady_decision(
        address=address,
        weight=weight,
        target=float(weight),
        smoothed=float(weight),
        last_fresh_weight=float(weight),
        candidate=weight,
        reason="fresh signals",
        computed_at=1000.0,
        last_fresh_at=999.0,
        candidate_since=990.0,
        capacity_estimate=400.0,
    )


def _pool_weight(pool: str, weight: int) -> PoolWeight:
    return PoolWeight(
        pool=pool,
        weight=weight,
        capacity=8.0 * weight,
        in_service=1.0,
        target=float(weight),
        smoothed=weight + 0.4,
        candidate=weight,
        candidate_since=990.0,
    )


def _state(config: Config) -> EngineState:
    return EngineState(
        config_hash=config_hash(config),
        version="v7",
        saved_at=1000.0,
        pools={
            "a": {"127.0.0.1:8001": _decision("127.0.0.1:8001", 90).state},
            "b": {"127.0.0.1:8002": _decision("127.0.0.1:8002", 70).state},
        },
        routes={"gw/split": {"a": _pool_weight("a", 100), "b": _pool_weight("b", 35)}},
    )


def test_pool_weights_come_back_from_the_state_file(tmp_path: Path) -> None:
    state = _state(_config(tmp_path / "state.json"))
    assert decode_state(encode_state(state)) == state
    # A file saved before pool weights were kept resumes endpoint weights and no pool weights.
    older = json.loads(encode_state(state))
    del older["routes"]
    assert decode_state(json.dumps(older)).routes == {}


async def test_a_resumed_engine_publishes_the_saved_pool_weights(tmp_path: Path) -> None:
    config = _config(tmp_path / "state.json")
    save_state(tmp_path / "state.json", _state(config))
    weigher = Weigher(prometheus=NoSource(), scrape=None)
    warm = WarmStart(weigher=weigher, config_path=tmp_path / "config.yaml", clock=lambda: 1005.0)
    await warm.resume(config)
    weights = await warm.weigh(config=config, endpoints={})
    assert weights is not None
    assert weights.pools == {"gw": {"split": {"a": 100, "b": 35}}}
    assert {a: w.weight for a, w in weights.endpoints.items()} == {
        "127.0.0.1:8001": 90,
        "127.0.0.1:8002": 70,
    }
    # The next cycle smooths from the saved pool weights, not from nothing.
    assert weigher.view().routes["gw/split"]["b"].smoothed == 35.4
