"""A route over pools of different engines gets engine weights only when their capacities are
in the same unit: a per-token step (vLLM, SGLang) is not a per-request compute time (Triton)."""

from __future__ import annotations

from decisions import steady_decision
from xds_control.config import Engine, measures_comparable, parse_config
from xds_control.engine import WeightDecision
from xds_control.engine.pools import compute_route_weights

CONFIG = """
pools:
  - {name: h100, engine: vllm, endpoints: [{address: 127.0.0.1:8001}]}
  - {name: a100, engine: sglang, endpoints: [{address: 127.0.0.1:8002}]}
  - {name: l4, engine: triton, endpoints: [{address: 127.0.0.1:8003}]}
  - {name: l4b, engine: onnxruntime, endpoints: [{address: 127.0.0.1:8004}]}
listeners:
  - name: gw
    address: 127.0.0.1:10000
    routes:
      - {name: tokens, pools: [{name: h100}, {name: a100}]}
      - {name: mixed, pools: [{name: h100}, {name: l4}]}
      - {name: requests, pools: [{name: l4}, {name: l4b}]}
"""


def _decision(capacity: float) -> WeightDecision:
    return steady_decision(capacity_estimate=capacity)


def test_only_routes_over_comparable_measures_get_engine_weights() -> None:
    config = parse_config(text=CONFIG)
    pools = {name: [_decision(c)] for name, c in {"h100": 800, "a100": 500, "l4": 20}.items()}
    pools["l4b"] = [_decision(10)]
    weights = compute_route_weights(config=config, decisions=pools, previous={}, now=0.0)
    # vLLM against Triton would read the Triton pool ~40x slow (a request's compute per
    # "step"): that route keeps its static weights.
    assert set(weights) == {"gw/tokens", "gw/requests"}
    assert {p: w.weight for p, w in weights["gw/tokens"].items()} == {"h100": 100, "a100": 65}


def test_measures_comparable() -> None:
    assert measures_comparable([Engine.VLLM, Engine.SGLANG])
    assert measures_comparable([Engine.TRITON, Engine.ONNXRUNTIME])
    assert not measures_comparable([Engine.SGLANG, Engine.ONNXRUNTIME])
