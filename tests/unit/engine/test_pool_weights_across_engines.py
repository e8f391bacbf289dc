"""A route over pools of different engines gets engine weights only when their capacities are
in the same unit: a per-token step (vLLM, SGLang) is not a per-request compute time (Triton)."""

from __future__ import annotations

from decisions import steady_decision
from engine_rows import NOW, a_sample, an_endpoint
from xds_control.config import Engine, measures_comparable, parse_config
from xds_control.engine import WeightDecision, compute_weights, states_of
from xds_control.engine.pool_weights import compute_route_weights

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


def test_a_pool_that_prefills_slower_is_weighed_by_its_steps_under_the_work() -> None:
    """Two single-server pools behind one route, under the same prompt-heavy work (20 and 80
    prefill tokens per step in turn): the A100 decodes 1.8x slower than the H100 but prefills
    3.6x slower. What its steps take under that work, not its decode step alone, sets its
    share: about 0.43 of the H100's here, where the decode step gives 0.56."""
    config = parse_config(text=CONFIG)
    # Each pool's server and its line: decode step, prefill time per token over it.
    servers = {"h100": (an_endpoint(1), 0.010, 0.02), "a100": (an_endpoint(2), 0.018, 0.04)}
    decisions: dict[str, dict[str, WeightDecision]] = {"h100": {}, "a100": {}}
    for cycle in range(40):
        work = 20.0 if cycle % 2 else 80.0
        samples = {
            server.address: a_sample(
                server.address,
                at=NOW + cycle,
                decode_step_s=decode * (1.0 + shape * work),
                running=10.0,
                prefill_ratio=work / 10.0,
            )
            for server, decode, shape in servers.values()
        }
        for name, (server, _, _) in servers.items():
            decisions[name] = compute_weights(
                pool=config.pool(name),
                endpoints=[server],
                samples=samples,
                previous=states_of(decisions[name]),
                now=NOW + cycle,
            )
    by_pool = {name: tuple(found.values()) for name, found in decisions.items()}
    weights = compute_route_weights(config=config, decisions=by_pool, previous={}, now=NOW)
    assert 35 <= weights["gw/tokens"]["a100"].weight <= 45
    assert weights["gw/tokens"]["h100"].weight == 100
