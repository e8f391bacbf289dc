"""The columnar steady-state path decides exactly what the one-endpoint-at-a-time path does.

Random fleets over several cycles: endpoints come and go, signals go missing, stale, garbage
(rejected) or restart, scrapes fail, policies vary. Two engines run side by side, each fed
its own previous decisions; every decision of every cycle must match.
"""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from xds_control.config import Pool, WeightPolicy
from xds_control.discovery import Endpoint
from xds_control.engine import WEIGHT_SIGNALS, WeightDecision, compute_weights
from xds_control.signals import Reading, Sample, Signal, make_reading

NOW = 1_700_000_000.0
FLOATS = ("score", "target", "smoothed", "warmup", "held", "capacity_estimate")
EXACT = (
    "address",
    "weight",
    "health",
    "reason",
    "health_reason",
    "computed_at",
    "first_seen_at",
    "last_fresh_at",
    "started_at",
    "warmup_from",
    "candidate",
    "candidate_since",
)

value = st.one_of(
    st.floats(min_value=0, max_value=1),
    st.floats(min_value=0, max_value=2000),
    st.sampled_from([0.0, 1.0, 1e-9, 1e-6, 0.5, 256.0]),
    st.floats(allow_nan=True, allow_infinity=True),  # garbage: rejected, as in production
)
# A reading: signal, value, and how many seconds before now it was observed (15: stale).
age = st.sampled_from([0.0, 0.0, 0.0, 0.0, 3.0, 15.0])
reading = st.tuples(st.sampled_from(list(Signal)), value, age)
# Mostly steady endpoints (the columnar path's): fresh weight signals, up, the same start time;
# every way out of steady mixed in.
healthy = st.tuples(
    st.sampled_from(sorted(WEIGHT_SIGNALS)),
    st.floats(min_value=0, max_value=1) | st.floats(min_value=0, max_value=2000),
    st.just(0.0),
)
steady = st.sampled_from([(Signal.UP, 1.0, 0.0), (Signal.STARTED_AT, NOW - 1e3, 0.0)])
failures = st.sampled_from([0, 0, 0, 0, 0, 0, 1, 3])
mostly_steady = st.tuples(
    st.lists(healthy | healthy | healthy | steady | reading, min_size=3, max_size=14), failures
)
endpoint_sample = st.one_of(
    mostly_steady,
    mostly_steady,
    mostly_steady,
    st.tuples(st.lists(reading, max_size=14), failures),
    st.none(),
)
cycle = st.tuples(
    st.lists(endpoint_sample, min_size=1, max_size=16),  # per endpoint slot; None: no sample
    st.sets(st.integers(0, 15), max_size=3),  # slots absent from the fleet this cycle
    st.sampled_from([0.5, 1.0, 1.0, 5.0, 20.0, 45.0, 120.0]),  # seconds since last cycle
)
policy = st.builds(
    WeightPolicy,
    capacity_exponent=st.sampled_from([0.0, 0.5, 1.0, 2.0]),
    queue_exponent=st.sampled_from([0.0, 1.0, 2.0, 3.5]),
    capacity_alpha=st.sampled_from([0.1, 1.0]),
    max_num_seqs=st.sampled_from([1, 256]),
    warmup_s=st.sampled_from([0.0, 60.0]),
)


def build_sample(
    address: str, readings: list[tuple[Signal, float, float]], failures: int, now: float
) -> Sample:
    kept: dict[Signal, Reading] = {}
    rejected: dict[Signal, str] = {}
    for signal, raw, age in readings:
        made = make_reading(signal=signal, value=raw, observed_at=now - age, source="test")
        if isinstance(made, Reading):
            kept[signal] = made
        else:
            rejected[signal] = made
    return Sample(address=address, readings=kept, rejected=rejected, scrape_failures=failures)


def assert_same(vector: dict[str, WeightDecision], scalar: dict[str, WeightDecision]) -> None:
    assert list(vector) == list(scalar)
    for address, expected in scalar.items():
        got = vector[address]
        for name in EXACT:
            assert getattr(got, name) == getattr(expected, name), (address, name)
        assert got.sample is expected.sample
        for name in FLOATS:
            a, b = getattr(got, name), getattr(expected, name)
            assert (a is None) == (b is None), (address, name)
            if a is not None:
                assert math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9), (address, name, a, b)
        for a, b in zip(got.factors, expected.factors, strict=True):
            assert math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9), (address, "factors", a, b)


@settings(max_examples=300, deadline=None)
@given(cycles=st.lists(cycle, min_size=2, max_size=6), weights=policy)
def test_the_columnar_path_decides_exactly_as_the_scalar_path(
    cycles: list[
        tuple[list[tuple[list[tuple[Signal, float, float]], int] | None], set[int], float]
    ],
    weights: WeightPolicy,
) -> None:
    pool = Pool(name="p", weights=weights)
    vector: dict[str, WeightDecision] = {}
    scalar: dict[str, WeightDecision] = {}
    now = NOW
    for per_endpoint, absent, elapsed in cycles:
        now += elapsed
        endpoints = [
            Endpoint(address=f"10.0.0.{i}:8000", host=f"10.0.0.{i}", port=8000, weight=10)
            for i in range(len(per_endpoint))
            if i not in absent
        ]
        samples = {
            e.address: build_sample(e.address, *data, now)
            for e, data in zip(endpoints, per_endpoint, strict=False)
            if data is not None
        }
        vector = compute_weights(
            pool=pool, endpoints=endpoints, samples=samples, previous=vector, now=now
        )
        scalar = compute_weights(
            pool=pool,
            endpoints=endpoints,
            samples=samples,
            previous=scalar,
            now=now,
            vectorised=False,
        )
        assert_same(vector, scalar)
