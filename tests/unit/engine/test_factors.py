"""Each factor of the score and the publish step on their own: bounds, monotonicity, and the
values docs/weights.md promises."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from xds_control.config import WeightPolicy
from xds_control.engine.factors import (
    capacity_estimate,
    capacity_factor,
    gpu_memory_factor,
    kv_factor,
    prefix_factor,
    queue_factor,
    slo_factor,
)
from xds_control.engine.stability import publish

ratio = st.floats(min_value=0, max_value=1)
count = st.floats(min_value=0, max_value=1e6)
coefficient = st.floats(min_value=0, max_value=1)
exponent = st.floats(min_value=0, max_value=4)


def col(*values: float) -> np.ndarray:
    return np.array(values, dtype=np.float64)


@settings(max_examples=300, deadline=None)
@given(a=ratio, b=ratio, c=coefficient)
def test_ratio_factors_stay_in_0_1_and_fall_as_the_load_rises(a: float, b: float, c: float) -> None:
    low, high = sorted((a, b))
    for factor in (kv_factor, gpu_memory_factor):
        values = factor(col(low, high), coefficient=c)
        assert 0 < values[1] <= values[0] <= 1
    slo = slo_factor(col(low, high), coefficient=c)  # compliance: more is better
    assert 0 < slo[0] <= slo[1] <= 1
    prefix = prefix_factor(col(low, high), coefficient=c)  # hits: more is better
    assert 0 < prefix[0] <= prefix[1] <= 1


@settings(max_examples=300, deadline=None)
@given(a=count, b=count, slots=st.floats(min_value=0, max_value=4096), e=exponent)
def test_a_longer_queue_never_raises_the_queue_factor(
    a: float, b: float, slots: float, e: float
) -> None:
    low, high = sorted((a, b))
    values = queue_factor(col(low, high), slots=col(slots, slots), exponent=e)
    assert 0 <= values[1] <= values[0] <= 1


@settings(max_examples=300, deadline=None)
@given(a=ratio, b=ratio, e=exponent)
def test_a_relatively_faster_server_never_gets_a_lower_capacity_factor(
    a: float, b: float, e: float
) -> None:
    low, high = sorted((a, b))
    values = capacity_factor(col(low, high), exponent=e)
    assert 0 <= values[0] <= values[1] <= 1


def test_the_documented_values() -> None:
    # A queue as long as the batch quarters the weight (exponent 2).
    assert queue_factor(col(256.0), slots=col(256.0), exponent=2.0)[0] == 0.25
    # A full KV cache halves it (c = 0.5); a perfect prefix cache is worth exactly 1.
    assert kv_factor(col(1.0), coefficient=0.5)[0] == 0.5
    assert prefix_factor(col(1.0), coefficient=0.1)[0] == 1.0
    # A broken decode step (faster than 10 us) is floored, not trusted.
    assert capacity_estimate(batch_slots=col(256.0), decode_step_s=col(0.0))[0] == 256 / 1e-5


def test_a_missing_reading_is_missing_not_a_value() -> None:
    nan = float("nan")
    for factor in (kv_factor, gpu_memory_factor, slo_factor, prefix_factor):
        assert np.isnan(factor(col(nan), coefficient=0.5)[0])
    assert np.isnan(queue_factor(col(nan), slots=col(256.0), exponent=2.0)[0])


weight = st.integers(min_value=1, max_value=100)
smoothed = st.floats(min_value=0, max_value=100)


@settings(max_examples=300, deadline=None)
@given(
    published=weight,
    candidate_before=weight,
    value=smoothed,
    waited=st.floats(min_value=0, max_value=100),
    max_step=st.integers(min_value=1, max_value=100),
    quantum=st.integers(min_value=1, max_value=50),
    mean=smoothed,
    spread=st.floats(min_value=0, max_value=1e4),
)
def test_a_published_weight_moves_at_most_max_step_and_stays_in_1_to_100(
    published: int,
    candidate_before: int,
    value: float,
    waited: float,
    max_step: int,
    quantum: int,
    mean: float,
    spread: float,
) -> None:
    policy = WeightPolicy(max_step=max_step, quantum=quantum)
    out = publish(
        smoothed=col(value),
        published=col(published),
        candidate_before=col(candidate_before),
        candidate_since=col(0.0),
        mean_before=col(mean),
        spread_before=col(spread),
        measured=np.array([True]),
        alpha=col(0.05),
        now=waited,
        policy=policy,
    )
    new = out.weight[0]
    assert 1 <= new <= 100
    assert abs(new - published) <= max_step
    assert (new == published) or not out.suppressed[0]


def test_a_first_publication_takes_the_candidate_at_once() -> None:
    out = publish(
        smoothed=col(42.0),
        published=col(float("nan")),
        candidate_before=col(float("nan")),
        candidate_since=col(float("nan")),
        mean_before=col(float("nan")),
        spread_before=col(float("nan")),
        measured=np.array([True]),
        alpha=col(0.05),
        now=7.0,
        policy=WeightPolicy(quantum=5),
    )
    assert (out.weight[0], out.candidate[0], out.candidate_since[0]) == (40, 40, 7.0)
    assert not out.suppressed[0]
