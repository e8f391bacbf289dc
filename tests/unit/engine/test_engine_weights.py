"""The weight engine's behaviour: bounds, monotonicity, bad inputs, staleness, warm-up,
hysteresis and convergence, as an operator would notice them."""

from __future__ import annotations

import json
import math
import random
from collections.abc import Mapping

from hypothesis import given, settings
from hypothesis import strategies as st

from xds_control.config import Engine, Pool, WeightPolicy
from xds_control.discovery import Endpoint, Health
from xds_control.engine import WeightDecision, changed_meaningfully, compute_weights, states_of
from xds_control.signals import Sample, Signal

NOW = 1_700_000_000.0


def endpoint(i: int) -> Endpoint:
    return Endpoint(address=f"10.0.0.{i}:8000", host=f"10.0.0.{i}", port=8000, weight=10)


def sample(address: str, *, at: float = NOW, failures: int = 0, **values: float) -> Sample:
    return Sample.build(
        address=address,
        values=[(Signal(k), v) for k, v in values.items()],
        observed_at=at,
        source="test",
        scrape_failures=failures,
    )


def run(
    pool: Pool,
    endpoints: list[Endpoint],
    samples: Mapping[str, Sample],
    previous: Mapping[str, WeightDecision] | None = None,
    now: float = NOW,
) -> dict[str, WeightDecision]:
    return compute_weights(
        pool=pool, endpoints=endpoints, samples=samples, previous=states_of(previous or {}), now=now
    )


POOL = Pool(name="p")

anything = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.floats(min_value=0, max_value=1),
    st.floats(min_value=0, max_value=1e4),
)
signal_values = st.dictionaries(st.sampled_from([s.value for s in Signal]), anything, max_size=11)


@settings(max_examples=200, deadline=None)
@given(
    values=st.lists(signal_values, min_size=1, max_size=6),
    cycles=st.integers(min_value=1, max_value=4),
    failures=st.integers(min_value=0, max_value=5),
    stale=st.floats(min_value=0, max_value=500),
)
def test_weights_always_within_1_to_100_whatever_the_inputs(
    values: list[dict[str, float]], cycles: int, failures: int, stale: float
) -> None:
    eps = [endpoint(i) for i in range(len(values))]
    previous: dict[str, WeightDecision] = {}
    for cycle in range(cycles):
        now = NOW + cycle * stale
        samples = {
            e.address: sample(e.address, at=NOW, failures=failures, **v)
            for e, v in zip(eps, values, strict=True)
        }
        previous = run(POOL, eps, samples, previous, now=now)
        for decision in previous.values():
            assert isinstance(decision.weight, int)
            assert 1 <= decision.weight <= 100
            assert math.isfinite(decision.state.smoothed)
            assert decision.health in Health
            json.dumps(decision.to_json())


def test_nan_infinite_negative_and_out_of_range_values_are_rejected_with_a_reason() -> None:
    e = endpoint(1)
    s = sample(
        e.address,
        waiting=math.nan,
        kv_usage=math.inf,
        running=-3.0,
        gpu_memory_used=7.0,
        decode_step_s=0.02,
    )
    assert set(s.rejected) == {
        Signal.WAITING,
        Signal.KV_USAGE,
        Signal.RUNNING,
        Signal.GPU_MEMORY_USED,
    }
    decision = run(POOL, [e], {e.address: s})[e.address]
    explained = decision.to_json()
    assert explained["rejected"]["waiting"] == "NaN"
    assert explained["rejected"]["kv_usage"] == "infinite"
    assert explained["rejected"]["running"].startswith("negative")
    # Rejected signals are neutral, not zero: the endpoint keeps a full weight.
    assert decision.state.factors.queue == 1.0
    assert decision.state.factors.kv == 1.0
    assert decision.weight == 100


def test_an_endpoint_with_no_data_gets_the_base_weight() -> None:
    eps = [endpoint(1), endpoint(2)]
    decisions = run(POOL, eps, {})
    policy = POOL.weights
    assert {d.weight for d in decisions.values()} == {round(100 * policy.base_fraction)}
    assert all("no data" in d.explanation.reason for d in decisions.values())
    onnx = Pool(name="o", engine=Engine.ONNXRUNTIME)
    # ONNX Runtime's base: 100 x 0.6 x 0.5 = 30.
    assert {d.weight for d in run(onnx, eps, {}).values()} == {30}


def _single(pool: Pool, **values: float) -> int:
    e = endpoint(1)
    other = endpoint(2)
    samples = {
        e.address: sample(e.address, failures=0, decode_step_s=0.02, **values),  # values: signals
        other.address: sample(other.address, decode_step_s=0.02),
    }
    return run(pool, [e, other], samples)[e.address].weight


unit = st.floats(min_value=0, max_value=1)


@settings(max_examples=300, deadline=None)
@given(a=unit, b=unit, waiting=st.floats(0, 2000), kv=unit, slo=unit, gpu=unit)
def test_more_free_gpu_memory_never_lowers_a_weight(
    a: float, b: float, waiting: float, kv: float, slo: float, gpu: float
) -> None:
    low, high = sorted((a, b))  # used fraction: high used = less free
    base = {"waiting": waiting, "kv_usage": kv, "slo_ttft": slo}
    assert _single(POOL, gpu_memory_used=low, **base) >= _single(POOL, gpu_memory_used=high, **base)


@settings(max_examples=300, deadline=None)
@given(a=unit, b=unit, waiting=st.floats(0, 2000), slo=unit, gpu=unit)
def test_more_kv_headroom_never_lowers_a_weight(
    a: float, b: float, waiting: float, slo: float, gpu: float
) -> None:
    low, high = sorted((a, b))
    base = {"waiting": waiting, "gpu_memory_used": gpu, "slo_ttft": slo}
    assert _single(POOL, kv_usage=low, **base) >= _single(POOL, kv_usage=high, **base)


@settings(max_examples=300, deadline=None)
@given(a=unit, b=unit, waiting=st.floats(0, 2000), kv=unit, gpu=unit)
def test_better_slo_compliance_never_lowers_a_weight(
    a: float, b: float, waiting: float, kv: float, gpu: float
) -> None:
    low, high = sorted((a, b))
    base = {"waiting": waiting, "gpu_memory_used": gpu, "kv_usage": kv}
    assert _single(POOL, slo_ttft=high, **base) >= _single(POOL, slo_ttft=low, **base)


@settings(max_examples=200, deadline=None)
@given(
    step=st.floats(1e-4, 1.0),
    best_step=st.floats(1e-4, 1.0),
    waiting=st.floats(0, 5000),
    slots=st.floats(1, 1024),
    more=st.floats(0, 5000),
)
def test_a_slower_or_busier_server_never_gets_more_weight(
    step: float, best_step: float, waiting: float, slots: float, more: float
) -> None:
    e, other = endpoint(1), endpoint(2)

    def weight_of(step: float, waiting: float) -> int:
        samples = {
            e.address: sample(e.address, decode_step_s=step, waiting=waiting, batch_slots=slots),
            other.address: sample(other.address, decode_step_s=best_step, batch_slots=slots),
        }
        return run(POOL, [e, other], samples)[e.address].weight

    assert weight_of(step * 2, waiting) <= weight_of(step, waiting)
    assert weight_of(step, waiting + more) <= weight_of(step, waiting)


def test_capacity_queue_and_kv_drive_the_weight() -> None:
    eps = [endpoint(1), endpoint(2), endpoint(3), endpoint(4)]
    samples = {
        eps[0].address: sample(eps[0].address, decode_step_s=0.01),
        eps[1].address: sample(eps[1].address, decode_step_s=0.04),  # 4x slower
        eps[2].address: sample(eps[2].address, decode_step_s=0.01, waiting=256.0),
        eps[3].address: sample(eps[3].address, decode_step_s=0.01, kv_usage=1.0),
    }
    w = {a: d.weight for a, d in run(POOL, eps, samples).items()}
    assert w[eps[0].address] == 100
    assert w[eps[1].address] == 25  # capacity 1/4
    assert w[eps[2].address] == 25  # queue as long as the batch: 1/(1+1)^2
    assert w[eps[3].address] == 50  # full KV cache halves


def _steady(pool: Pool, eps: list[Endpoint], at: float) -> dict[str, Sample]:
    return {e.address: sample(e.address, at=at, decode_step_s=0.02, waiting=10.0) for e in eps}


def test_stale_signals_hold_then_decay_to_base() -> None:
    policy = WeightPolicy(hold_s=30, decay_s=60, stale_after_s=5, hysteresis=0.0)
    pool = Pool(name="p", weights=policy)
    eps = [endpoint(1)]
    fresh = _steady(pool, eps, NOW)
    decisions = run(pool, eps, fresh)
    start = decisions[eps[0].address].weight
    assert start == 95
    weights: dict[float, int] = {}
    for t in range(1, 121):
        decisions = run(pool, eps, fresh, decisions, now=NOW + t)  # samples age
        weights[t] = decisions[eps[0].address].weight
    # Fresh until stale_after_s (5 s), then held for hold_s, then decaying for decay_s.
    assert all(weights[t] == start for t in range(1, 36)), "held during hold_s"
    assert 50 < weights[65] < start, "decaying after hold_s"
    assert weights[96] == 50, "base (100 x 1.0 x 0.5) after decay"
    assert weights[120] == 50
    assert "no fresh signal" in decisions[eps[0].address].explanation.reason


def test_prometheus_down_from_the_start_gives_equal_base_weights() -> None:
    eps = [endpoint(i) for i in range(5)]
    decisions: dict[str, WeightDecision] = {}
    for t in range(10):
        decisions = run(POOL, eps, {}, decisions, now=NOW + t)
    assert {d.weight for d in decisions.values()} == {50}


def test_a_new_endpoint_ramps_up_over_the_warmup_window() -> None:
    policy = WeightPolicy(warmup_s=60, warmup_start_fraction=0.1)
    pool = Pool(name="p", weights=policy)
    old, new = endpoint(1), endpoint(2)
    decisions = run(pool, [old], _steady(pool, [old], NOW))
    series = []
    for t in range(1, 121):
        now = NOW + t
        decisions = run(pool, [old, new], _steady(pool, [old, new], now), decisions, now=now)
        series.append(decisions[new.address].weight)
    peer = decisions[old.address].weight
    assert series[0] <= 0.15 * peer, "starts low"
    assert series == sorted(series), "never goes down while ramping"
    # Within the settle margin (3/4 quantum on the smoothed value), not necessarily exactly.
    assert peer - series[-1] <= pool.weights.quantum, "reaches its computed weight"
    assert any(w < peer for w in series[20:40]), "still below its share a third of the way in"


def test_endpoints_present_at_start_do_not_ramp() -> None:
    eps = [endpoint(1), endpoint(2)]
    decisions = run(POOL, eps, _steady(POOL, eps, NOW))
    assert all(d.explanation.warmup == 1.0 for d in decisions.values())


def test_a_restart_seen_as_a_later_start_time_triggers_warmup() -> None:
    eps = [endpoint(1), endpoint(2)]

    def samples(now: float, started: float) -> dict[str, Sample]:
        return {
            e.address: sample(e.address, at=now, decode_step_s=0.02, started_at=started)
            for e in eps
        }

    decisions = run(POOL, eps, samples(NOW, NOW - 1000))
    decisions = run(POOL, eps, samples(NOW + 1, NOW - 1000), decisions, now=NOW + 1)
    assert all(d.explanation.warmup == 1.0 for d in decisions.values())
    restarted = samples(NOW + 2, NOW - 1000)
    restarted[eps[1].address] = sample(
        eps[1].address, at=NOW + 2, decode_step_s=0.02, started_at=NOW + 1.5
    )
    decisions = run(POOL, eps, restarted, decisions, now=NOW + 2)
    assert decisions[eps[1].address].explanation.warmup < 0.2
    assert decisions[eps[1].address].weight < decisions[eps[0].address].weight


def test_hysteresis_suppresses_small_moves_and_passes_large_ones() -> None:
    # Capacity smoothing off: this is about hysteresis alone.
    pool = Pool(name="p", weights=WeightPolicy(capacity_alpha=1.0))
    eps = [endpoint(1), endpoint(2)]
    ref = sample(eps[1].address, decode_step_s=0.01)

    def at(step: float, now: float) -> dict[str, Sample]:
        return {
            eps[0].address: sample(eps[0].address, at=now, decode_step_s=step),
            **{eps[1].address: sample(eps[1].address, at=now, decode_step_s=0.01)},
        }

    assert ref.value(Signal.DECODE_STEP_S) == 0.01
    decisions = run(pool, eps, at(0.02, NOW))
    assert decisions[eps[0].address].weight == 50
    # 50 -> ~45 target: a 10% move, under the 15% hysteresis.
    small = run(pool, eps, at(0.022, NOW + 1), decisions, now=NOW + 1)
    assert small[eps[0].address].weight == 50
    assert not changed_meaningfully(decisions, small)
    assert (
        "within hysteresis" in small[eps[0].address].explanation.reason
        or small[eps[0].address].state.candidate == 50
    )
    # 50 -> 100 target: passes at once, limited by max_step and smoothing.
    big = run(pool, eps, at(0.01, NOW + 2), small, now=NOW + 2)
    assert big[eps[0].address].weight > 50
    assert changed_meaningfully(small, big)


def test_capacity_is_smoothed_across_noisy_windows() -> None:
    eps = [endpoint(1), endpoint(2)]
    decisions: dict[str, WeightDecision] = {}
    seen = []
    for t in range(80):
        now = NOW + t
        noisy = 0.03 * (1.25 if t % 2 else 0.75)  # +-25% around 3x the reference step
        samples = {
            eps[0].address: sample(eps[0].address, at=now, decode_step_s=noisy),
            eps[1].address: sample(eps[1].address, at=now, decode_step_s=0.01),
        }
        decisions = run(POOL, eps, samples, decisions, now=now)
        seen.append(decisions[eps[0].address].state.factors.capacity)
    late = seen[40:]
    assert max(late) - min(late) < 0.1, late  # raw readings swing 0.27..0.44
    assert 0.25 < sum(late) / len(late) < 0.42


def test_configured_batch_slots_scale_capacity_when_the_server_does_not_export_them() -> None:
    big = Endpoint(address="10.0.0.1:8000", host="10.0.0.1", port=8000, weight=10)
    small = Endpoint(address="10.0.0.2:8000", host="10.0.0.2", port=8000, weight=10, batch_slots=64)
    eps = [big, small]
    decisions: dict[str, WeightDecision] = {}
    for t in range(3):  # the first cycle decides new endpoints, the next ones known ones
        now = NOW + t
        samples = {e.address: sample(e.address, at=now, decode_step_s=0.02) for e in eps}
        decisions = run(POOL, eps, samples, decisions, now=now)
        # Same decode step, a quarter of the slots (256 assumed for the other): a quarter.
        assert decisions[small.address].state.factors.capacity == 0.25
        assert decisions[big.address].state.factors.capacity == 1.0
    exported = {
        small.address: sample(small.address, at=NOW + 3, decode_step_s=0.02, batch_slots=256),
        big.address: sample(big.address, at=NOW + 3, decode_step_s=0.02),
    }
    pool = Pool(name="p", weights=WeightPolicy(capacity_alpha=1.0))
    fresh = run(pool, eps, exported, decisions, now=NOW + 3)
    assert fresh[small.address].state.factors.capacity == 1.0  # an exported value wins


def test_an_idle_fast_server_still_sets_the_pools_best_capacity() -> None:
    fast, slow = endpoint(1), endpoint(2)
    eps = [fast, slow]
    decisions: dict[str, WeightDecision] = {}
    for t in range(40):
        now = NOW + t
        busy = t < 10  # then the fast server goes idle: no tokens, so no decode-step reading
        samples = {
            fast.address: sample(fast.address, at=now, decode_step_s=0.01, running=8)
            if busy
            else sample(fast.address, at=now, running=0, waiting=0),
            slow.address: sample(slow.address, at=now, decode_step_s=0.05, running=2),
        }
        decisions = run(POOL, eps, samples, decisions, now=now)
        # The slow server stays a fifth of the fast one; it does not become the best.
        assert decisions[slow.address].state.factors.capacity <= 0.25, t
        assert decisions[slow.address].weight <= 25, (t, decisions[slow.address])


def test_a_slowed_server_loses_weight_within_seconds_and_wins_it_back_gradually() -> None:
    eps = [endpoint(1), endpoint(2)]
    decisions: dict[str, WeightDecision] = {}
    weights: list[int] = []
    for t in range(150):
        now = NOW + t
        slowed = 40 <= t < 80  # every engine step of endpoint 1 four times longer
        samples = {
            eps[0].address: sample(eps[0].address, at=now, decode_step_s=0.04 if slowed else 0.01),
            eps[1].address: sample(eps[1].address, at=now, decode_step_s=0.01),
        }
        decisions = run(POOL, eps, samples, decisions, now=now)
        weights.append(decisions[eps[0].address].weight)
    before = weights[39]
    assert before >= 90, weights
    assert max(weights[48:80]) <= 0.5 * before, weights  # quick capacity catches the drop
    assert weights[85] < 0.6 * before, weights  # recovery trusts capacity slowly ...
    assert weights[-1] >= 0.8 * before, weights  # ... but wins it back (within hysteresis)


def test_weights_settle_near_the_capacity_ratio_without_flapping() -> None:
    rng = random.Random(7)
    fast = [endpoint(i) for i in range(1, 3)]
    slow = [endpoint(i) for i in range(3, 5)]
    eps = fast + slow
    decisions: dict[str, WeightDecision] = {}
    pushes = 0
    for t in range(180):
        now = NOW + t
        samples = {}
        for e in eps:
            step = (0.01 if e in fast else 0.03) * rng.uniform(0.9, 1.1)
            samples[e.address] = sample(
                e.address,
                at=now,
                decode_step_s=step,
                waiting=rng.uniform(0, 8),
                kv_usage=rng.uniform(0.3, 0.4),
            )
        new = run(POOL, eps, samples, decisions, now=now)
        if t >= 60 and changed_meaningfully(decisions, new):
            pushes += 1
        decisions = new
    fast_w = sum(decisions[e.address].weight for e in fast) / 2
    slow_w = sum(decisions[e.address].weight for e in slow) / 2
    assert 2.2 <= fast_w / slow_w <= 4.0, (fast_w, slow_w)  # capacity ratio 3
    assert pushes <= 4, f"{pushes} pushes in 120 steady cycles"


def test_failing_scrapes_mark_unhealthy_and_errors_drain_never_weight_zero() -> None:
    eps = [endpoint(1), endpoint(2), endpoint(3)]
    samples = {
        eps[0].address: sample(eps[0].address, failures=3),
        eps[1].address: sample(eps[1].address, decode_step_s=0.02, error_ratio=0.3),
        eps[2].address: sample(eps[2].address, decode_step_s=0.02, up=0.0),
    }
    d = run(POOL, eps, samples)
    assert d[eps[0].address].health is Health.UNHEALTHY
    assert d[eps[1].address].health is Health.DRAINING
    assert d[eps[2].address].health is Health.UNHEALTHY
    assert all(x.weight >= 1 for x in d.values())
    assert "3 consecutive failed scrapes" in d[eps[0].address].explanation.health_reason


def test_health_change_alone_is_meaningful() -> None:
    eps = [endpoint(1)]
    ok = run(POOL, eps, {eps[0].address: sample(eps[0].address, decode_step_s=0.02)})
    bad_samples = {eps[0].address: sample(eps[0].address, decode_step_s=0.02, failures=5)}
    bad = run(POOL, eps, bad_samples, ok)
    assert bad[eps[0].address].weight == ok[eps[0].address].weight
    assert changed_meaningfully(ok, bad)
    assert changed_meaningfully(ok, {})


def test_removed_endpoints_are_dropped() -> None:
    eps = [endpoint(1), endpoint(2)]
    decisions = run(POOL, eps, _steady(POOL, eps, NOW))
    later = run(POOL, eps[:1], _steady(POOL, eps, NOW + 1), decisions, now=NOW + 1)
    assert set(later) == {eps[0].address}


def test_a_first_start_time_after_a_known_stretch_without_one_triggers_warmup() -> None:
    # Servers that export no process start time (Triton) get one from the scrape source only
    # when their counters go back: the first such start is a restart and must ramp.
    eps = [endpoint(1), endpoint(2)]

    def samples(now: float) -> dict[str, Sample]:
        return {e.address: sample(e.address, at=now, decode_step_s=0.02) for e in eps}

    decisions = run(POOL, eps, samples(NOW))
    decisions = run(POOL, eps, samples(NOW + 1), decisions, now=NOW + 1)
    assert all(d.explanation.warmup == 1.0 for d in decisions.values())
    restarted = samples(NOW + 2)
    restarted[eps[1].address] = sample(
        eps[1].address, at=NOW + 2, decode_step_s=0.02, started_at=NOW + 1.5
    )
    decisions = run(POOL, eps, restarted, decisions, now=NOW + 2)
    assert decisions[eps[1].address].explanation.warmup < 0.2
    # A start time long past is no restart worth a ramp.
    old = samples(NOW + 3)
    old[eps[0].address] = sample(
        eps[0].address, at=NOW + 3, decode_step_s=0.02, started_at=NOW - 10_000
    )
    decisions = run(POOL, eps, old, decisions, now=NOW + 3)
    assert decisions[eps[0].address].explanation.warmup == 1.0
