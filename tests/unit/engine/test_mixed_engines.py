"""A pool that mixes engines: each endpoint's engine base weight is its own engine's, and
capacity compares like with like. vLLM's decode step and Triton's compute per execution (a whole
request) are not one measure, so in a mixed pool a Triton endpoint has no capacity reading and
is assumed at the pool's typical capacity; a Triton-only pool compares compute per execution as
it always has."""

from __future__ import annotations

import numpy as np
import pytest

from engine_rows import NOW, a_sample, an_endpoint
from xds_control.config import Engine, Pool
from xds_control.discovery import Endpoint
from xds_control.engine import WeightDecision, compute_weights, states_of
from xds_control.engine.factors import capacity_factor
from xds_control.signals import Sample


def cycles(
    pool: Pool, endpoints: list[Endpoint], samples: dict[str, Sample], n: int = 8
) -> dict[str, WeightDecision]:
    previous: dict[str, WeightDecision] = {}
    for cycle in range(n):
        previous = compute_weights(
            pool=pool,
            endpoints=endpoints,
            samples=samples,
            previous=states_of(previous),
            now=NOW + cycle,
        )
    return previous


def test_in_a_mixed_pool_vllm_is_measured_by_decode_step_and_triton_assumed_typical() -> None:
    pool = Pool(name="mixed", engine=Engine.VLLM)
    fast, slow, triton = an_endpoint(1), an_endpoint(2), an_endpoint(3, Engine.TRITON)
    samples = {
        fast.address: a_sample(fast.address, decode_step_s=0.02, waiting=0),
        slow.address: a_sample(slow.address, decode_step_s=0.04, waiting=0),
        # A whole request's compute: 40x a decode step. Read as one, Triton would look slow.
        triton.address: a_sample(triton.address, exec_compute_s=0.8, waiting=0),
    }
    out = cycles(pool, [fast, slow, triton], samples)
    assert out[fast.address].state.factors.capacity == pytest.approx(1.0)
    assert out[slow.address].state.factors.capacity < out[fast.address].state.factors.capacity
    # Typical: the median relative capacity of the measured endpoints (1.0 and 0.5): 0.75.
    expected = capacity_factor(np.array([0.75]), exponent=pool.weights.capacity_exponent)
    assert out[triton.address].state.factors.capacity == pytest.approx(float(expected[0]), rel=1e-3)
    assert out[triton.address].explanation.capacity_estimate is None
    assert out[triton.address].state.factors.capacity > out[slow.address].state.factors.capacity
    assert "capacity: decode step (engine)" in out[fast.address].explanation.reason
    assert "capacity: none: assumed typical" in out[triton.address].explanation.reason
    # Each endpoint's engine base weight is its own engine's.
    base = pool.weights.engine_base_weights
    assert out[fast.address].state.factors.engine == base.vllm
    assert out[triton.address].state.factors.engine == base.triton


def test_the_assumed_capacity_is_the_pools_typical_every_cycle() -> None:
    pool = Pool(name="mixed", engine=Engine.VLLM)
    eps = [an_endpoint(1), an_endpoint(2), an_endpoint(3), an_endpoint(4, Engine.TRITON)]
    steps = (0.02, 0.04, 0.08)
    samples = {
        e.address: a_sample(e.address, decode_step_s=s) for e, s in zip(eps, steps, strict=False)
    }
    samples[eps[3].address] = a_sample(eps[3].address, exec_compute_s=0.5)
    out = cycles(pool, eps, samples, n=12)
    # Typical = the middle vLLM endpoint's relative capacity: the Triton one's factor is its.
    assert out[eps[3].address].state.factors.capacity == pytest.approx(
        out[eps[1].address].state.factors.capacity, rel=1e-6
    )
    # The vLLM one drops: the assumption follows it (not the first cycle's typical kept).
    samples[eps[1].address] = a_sample(eps[1].address, decode_step_s=0.07)
    samples[eps[2].address] = a_sample(eps[2].address, decode_step_s=0.07)
    later = cycles(pool, eps, samples, n=30)
    assert later[eps[3].address].state.factors.capacity == pytest.approx(
        later[eps[1].address].state.factors.capacity, rel=1e-3
    )
    assert later[eps[3].address].state.factors.capacity < out[eps[3].address].state.factors.capacity


def test_a_triton_only_pool_compares_compute_per_execution_as_before() -> None:
    pool = Pool(name="l4", engine=Engine.TRITON)
    eps = [an_endpoint(1), an_endpoint(2)]
    # Today's readings (exec compute) against the same numbers as the step they used to be.
    by_exec = {
        eps[0].address: a_sample(eps[0].address, exec_compute_s=0.5, waiting=1),
        eps[1].address: a_sample(eps[1].address, exec_compute_s=1.0, waiting=0),
    }
    as_step = {
        eps[0].address: a_sample(eps[0].address, decode_step_s=0.5, waiting=1),
        eps[1].address: a_sample(eps[1].address, decode_step_s=1.0, waiting=0),
    }
    now, before = cycles(pool, eps, by_exec), cycles(pool, eps, as_step)
    for address in now:
        assert now[address].weight == before[address].weight
        assert now[address].state.factors == before[address].state.factors
        assert (
            now[address].explanation.capacity_estimate
            == before[address].explanation.capacity_estimate
        )
    assert now[eps[1].address].state.factors.capacity < now[eps[0].address].state.factors.capacity
    assert "capacity: compute per execution (engine)" in now[eps[0].address].explanation.reason


def test_an_endpoint_with_no_data_gets_its_own_engines_base_weight() -> None:
    pool = Pool(name="mixed", engine=Engine.VLLM)
    eps = [an_endpoint(1), an_endpoint(2, Engine.ONNXRUNTIME)]
    out = compute_weights(pool=pool, endpoints=eps, samples={}, previous={}, now=NOW)
    base = pool.weights.engine_base_weights
    fraction = pool.weights.base_fraction
    assert out[eps[0].address].state.smoothed == pytest.approx(100 * base.vllm * fraction)
    assert out[eps[1].address].state.smoothed == pytest.approx(100 * base.onnxruntime * fraction)
