"""The replica recommendation follows a load ramp up and down without flapping, in bounded
steps, and holds scale-out while the newest replicas miss their P95 TTFT target."""

from __future__ import annotations

import math
import random
from itertools import pairwise

from hypothesis import given, settings
from hypothesis import strategies as st

from xds_control.config import Pool
from xds_control.config.autoscale import AutoscalePolicy
from xds_control.discovery import Endpoint
from xds_control.engine import compute_weights, states_of
from xds_control.engine.autoscale import PoolLoad, Recommendation, recommend, recommend_pools
from xds_control.signals import Sample, Signal

POLICY = AutoscalePolicy(
    enabled=True,
    qps_per_replica=10.0,
    gpu_memory_target=0.85,
    scale_up_window_s=30.0,
    scale_down_window_s=300.0,
    max_step=2,
    min_replicas=1,
    max_replicas=40,
)
PERIOD = 5.0


def simulate(
    rates: list[float], *, policy: AutoscalePolicy = POLICY, idle_memory: float = 0.3
) -> list[int]:
    """Recommendations over ``rates`` (one per cycle) with replicas that follow each
    recommendation one cycle later, as an HPA does. GPU memory grows with each replica's
    share of the load, from ``idle_memory`` (the model's weights) to 0.8 at its rated load."""
    previous: Recommendation | None = None
    replicas, out = policy.min_replicas, []
    for cycle, rate in enumerate(rates):
        share = rate / (replicas * policy.qps_per_replica)
        memory = min(1.0, idle_memory + (0.8 - idle_memory) * share)
        load = PoolLoad(replicas=replicas, request_rate=rate, gpu_memory=memory)
        previous = recommend(policy=policy, load=load, previous=previous, now=cycle * PERIOD)
        out.append(previous.replicas)
        replicas = previous.replicas
    return out


def ramp(*, peak: float, cycles: int, noise: float, seed: int = 1) -> list[float]:
    """Up from 0 to ``peak`` and back down, each half ``cycles`` long, with multiplicative noise."""
    rng = random.Random(seed)
    half = [peak * i / cycles for i in range(cycles)]
    shape = half + [peak] * 60 + half[::-1] + [0.0] * 180
    return [r * (1 + rng.uniform(-noise, noise)) for r in shape]


def changes(series: list[int]) -> list[tuple[int, int]]:
    """(cycle, +1 or -1) of every move."""
    return [(i, 1 if b > a else -1) for i, (a, b) in enumerate(pairwise(series)) if b != a]


def test_follows_a_noisy_ramp_up_and_down_monotonically() -> None:
    cycles = 240  # 20 minutes up, 5 at the peak, 20 down, 15 idle
    series = simulate(ramp(peak=200.0, cycles=cycles, noise=0.08))
    up, top, down = series[:cycles], series[cycles : cycles + 60], series[cycles + 60 :]
    assert all(a <= b for a, b in pairwise(up)), "scaled in while the load only rose"
    assert all(a >= b for a, b in pairwise(down)), "scaled out while the load only fell"
    assert max(top) >= 19  # 200 req/s at 10 per replica, less the noise within tolerance
    assert series[-1] == POLICY.min_replicas
    assert series[0] == 1


def test_no_reversal_within_the_windows_and_steps_are_bounded() -> None:
    series = simulate(ramp(peak=120.0, cycles=60, noise=0.15, seed=7))
    assert all(abs(b - a) <= POLICY.max_step for a, b in pairwise(series))
    moves = changes(series)
    for (i, a), (j, b) in pairwise(moves):
        if a > b:  # up then down
            assert (j - i) * PERIOD >= POLICY.scale_down_window_s, (i, j)
        if a < b:  # down then up
            assert (j - i) * PERIOD >= POLICY.scale_up_window_s, (i, j)


def test_noise_around_a_threshold_does_not_move_it() -> None:
    rng = random.Random(3)
    rates = [50.0 * (1 + rng.uniform(-0.09, 0.09)) for _ in range(400)]
    series = simulate(rates, policy=POLICY.model_copy(update={"min_replicas": 5}))
    assert set(series) == {5}


def test_gpu_memory_alone_scales_out_but_both_must_be_low_to_scale_in() -> None:
    policy = POLICY.model_copy(update={"scale_up_window_s": 0.0, "scale_down_window_s": 0.0})
    full = PoolLoad(replicas=4, request_rate=5.0, gpu_memory=0.99)
    first = recommend(policy=policy, load=full, previous=None, now=0.0)
    out = recommend(policy=policy, load=full, previous=first, now=5.0)
    assert out.replicas == 5, out.reason  # ceil(4 * 0.99 / 0.95)
    busy = PoolLoad(replicas=4, request_rate=40.0, gpu_memory=0.2)
    assert recommend(policy=policy, load=busy, previous=out, now=10.0).replicas == 4
    idle = PoolLoad(replicas=4, request_rate=5.0, gpu_memory=0.2)
    assert recommend(policy=policy, load=idle, previous=out, now=10.0).replicas == 2


def test_holds_scale_out_while_the_newest_replicas_miss_p95() -> None:
    policy = POLICY.model_copy(update={"scale_up_window_s": 0.0})
    start = recommend(policy=policy, load=PoolLoad(4, 80.0, 0.5), previous=None, now=0.0)
    asked = recommend(policy=policy, load=PoolLoad(4, 80.0, 0.5), previous=start, now=5.0)
    assert asked.replicas == 6
    # Two replicas arrived; one of them misses its target: no more than the 6 already asked.
    lagging = PoolLoad(6, 200.0, 0.5, lagging=("10.0.0.6:8000",))
    held = recommend(policy=policy, load=lagging, previous=asked, now=10.0)
    assert held.replicas == 6
    assert "10.0.0.6:8000" in held.reason
    # Only one arrived so far: the pending one stays recommended, nothing is added.
    partial = PoolLoad(5, 200.0, 0.5, lagging=("10.0.0.5:8000",))
    assert recommend(policy=policy, load=partial, previous=asked, now=10.0).replicas == 6
    healthy = PoolLoad(6, 200.0, 0.5)
    assert recommend(policy=policy, load=healthy, previous=held, now=15.0).replicas == 8


def endpoint(i: int) -> Endpoint:
    return Endpoint(address=f"10.0.0.{i}:8000", host=f"10.0.0.{i}", port=8000, weight=10)


def sample(i: int, *, at: float, slo: float | None) -> Sample:
    values = [(Signal.REQUEST_RATE, 30.0), (Signal.GPU_MEMORY_USED, 0.5)]
    if slo is not None:
        values.append((Signal.SLO_TTFT, slo))
    return Sample.build(address=endpoint(i).address, values=values, observed_at=at, source="t")


def test_pool_load_from_the_engine_names_the_newest_replicas_that_lag() -> None:
    pool = Pool(name="p", autoscale=POLICY)
    old = [endpoint(1), endpoint(2)]
    samples = {e.address: sample(i, at=0.0, slo=0.99) for i, e in enumerate(old, 1)}
    first = compute_weights(pool=pool, endpoints=old, samples=samples, previous={}, now=0.0)
    grown = [*old, endpoint(3), endpoint(4)]
    samples |= {
        "10.0.0.3:8000": sample(3, at=5.0, slo=0.9),
        "10.0.0.4:8000": sample(4, at=5.0, slo=None),
    }
    second = compute_weights(
        pool=pool, endpoints=grown, samples=samples, previous=states_of(first), now=5.0
    )
    decided = {"p": tuple(second[e.address] for e in grown)}
    out = recommend_pools(pools=[pool], decisions=decided, previous={}, now=5.0)["p"]
    assert out.load.replicas == 4
    assert out.load.request_rate == 120.0
    assert out.load.lagging == ("10.0.0.3:8000", "10.0.0.4:8000")
    assert recommend_pools(pools=[Pool(name="p")], decisions=decided, previous={}, now=5.0) == {}


@settings(max_examples=60, deadline=None)
@given(
    steps=st.lists(st.floats(min_value=0, max_value=30), min_size=5, max_size=80),
    memory=st.floats(min_value=0, max_value=0.8),
)
def test_a_rising_load_never_lowers_the_recommendation(steps: list[float], memory: float) -> None:
    rates = [sum(steps[: i + 1]) for i in range(len(steps))]
    series = simulate(rates, idle_memory=memory)
    assert all(a <= b for a, b in pairwise(series))
    assert all(POLICY.min_replicas <= r <= POLICY.max_replicas for r in series)
    # Never beyond what the load asked for (memory stays under its target here).
    assert all(r <= max(1, math.ceil(rate / 10.0)) for r, rate in zip(series, rates, strict=True))
