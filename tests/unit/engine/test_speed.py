"""Speed against the pool's common line: identical servers read alike under prompt-heavy load
whatever their share, different GPUs and a slowed server stay apart, and pooling is exact
enough at any pool size."""

from __future__ import annotations

import random

import numpy as np
import pytest

from xds_control.config import Pool, WeightPolicy
from xds_control.discovery import Endpoint
from xds_control.engine import WeightDecision, compute_weights, states_of
from xds_control.engine.averages import kernel_mean
from xds_control.engine.speed import Speed, read_speed
from xds_control.signals import Sample, Signal

NOW = 1_000_000.0
DECODE_S = 0.020
PREFILL_PER_TOKEN_S = 0.0002


def endpoint(i: int) -> Endpoint:
    return Endpoint(address=f"10.0.0.{i}:8000", host=f"10.0.0.{i}", port=8000, weight=10)


def reading(
    address: str, *, at: float, slower: float, rng: random.Random, piled: bool = False
) -> Sample:
    """A prompt-heavy window: a share of the traffic that wanders, so the prefill work and the
    stalls in the mean time between tokens wander with it (the reading is mostly stall), with
    10% noise on top. ``piled``: the server holds its requests as much longer as it is slower
    (its batch grows with its slowness at one arrival rate), so its work grows too."""
    running = rng.uniform(5.0, 45.0) * (slower if piled else 1.0)
    ratio = rng.uniform(2.0, 40.0)  # prompt tokens prefilled per output token
    step = slower * (DECODE_S + PREFILL_PER_TOKEN_S * running * ratio) * rng.gauss(1.0, 0.1)
    return Sample.build(
        address=address,
        values=[
            (Signal.DECODE_STEP_S, step),
            (Signal.RUNNING_MEAN, running),
            (Signal.RUNNING, running),
            (Signal.PREFILL_RATIO, ratio),
        ],
        observed_at=at,
        source="test",
    )


def run(
    slower: list[float],
    *,
    cycles: int,
    seed: int = 1,
    piled: bool = False,
    after: list[dict[str, WeightDecision]] | None = None,
) -> list[dict[str, WeightDecision]]:
    """``cycles`` engine cycles of servers ``slower`` than an H100, from a cold start or
    going on from the history ``after``."""
    pool = Pool(name="p")
    eps = [endpoint(i) for i in range(len(slower))]
    rng = random.Random(seed)
    previous: dict[str, WeightDecision] = after[-1] if after else {}
    start = len(after) if after else 0
    history = []
    for cycle in range(start, start + cycles):
        at = NOW + cycle
        samples = {
            e.address: reading(e.address, at=at, slower=s, rng=rng, piled=piled)
            for e, s in zip(eps, slower, strict=True)
        }
        previous = compute_weights(
            pool=pool, endpoints=eps, samples=samples, previous=states_of(previous), now=at
        )
        history.append(previous)
    return history


def capacity_factors(decisions: dict[str, WeightDecision]) -> list[float]:
    return [d.state.factors.capacity for d in decisions.values()]


def test_identical_servers_read_alike_whatever_their_share_of_the_prefills() -> None:
    """Each window's reading is mostly stall (20 ms of decode under up to 360 ms of prefill)
    and follows the share each server had: read against the common line, every cycle of the
    last two minutes gives the four of them capacity factors within 2% of each other."""
    history = run([1.0, 1.0, 1.0, 1.0], cycles=180)
    for decisions in history[60:]:
        factors = capacity_factors(decisions)
        assert min(factors) >= 0.98, factors


def test_a_slower_gpu_and_a_slowed_server_stay_apart() -> None:
    """An A100-like server 1.9x slower than two H100s keeps its ratio (pooling leaves a
    difference many noise widths wide alone); one H100 slowed 4x falls to about a quarter
    within ten cycles, and the other two are unmoved."""
    history = run([1.0, 1.0, 1.9], cycles=90)
    factors = capacity_factors(history[-1])
    assert min(factors[:2]) >= 0.98, factors
    assert 1.9 * 0.85 <= 1.0 / factors[2] <= 1.9 * 1.15, factors

    seen = [capacity_factors(d) for d in run([4.0, 1.0, 1.0], cycles=40, seed=2, after=history)]
    assert seen[9][0] <= 0.5, [f[0] for f in seen[:12]]
    assert 0.15 <= seen[-1][0] <= 0.35, seen[-1]
    assert min(seen[-1][1:]) >= 0.98, seen[-1]


def test_a_slower_server_whose_requests_pile_up_reads_its_speed_from_a_cold_start() -> None:
    """Two L4-like servers 3.5x slower than two H100s hold their requests 3.5x longer, so
    their batches, and with them the prefill work in each step, are 3.5x larger: slowness
    and work rise together across the servers. The shape of the line is learnt from how each
    server's step moves with its own work, so the work does not hide the slowness: from a
    cold start the two read within 15% of 3.5x within 30 cycles and stay there."""
    for seed in (1, 2, 3):
        history = run([1.0, 1.0, 3.5, 3.5], cycles=90, seed=seed, piled=True)
        for cycle, decisions in enumerate(history[30:], start=30):
            factors = capacity_factors(decisions)
            assert min(factors[:2]) >= 0.98, (seed, cycle, factors)
            for slow in factors[2:]:
                assert 3.5 * 0.85 <= 1.0 / slow <= 3.5 * 1.15, (seed, cycle, factors)


def test_a_slowdown_past_the_noise_is_not_smoothed_again() -> None:
    """The cycle an H100's speed reading passes the noise band after it slowed 4x, its
    smoothed weight is its target: the capacity is smoothed already, and a second average
    would only hold traffic on a slow server for a few more cycles."""
    history = run([1.0, 1.0, 1.0], cycles=60)
    slowed_down = run([4.0, 1.0, 1.0], cycles=20, seed=4, after=history)
    server = endpoint(0).address
    for cycle, (last, now) in enumerate(
        zip([history[-1], *slowed_down[:-1]], slowed_down, strict=True)
    ):
        before, slowed = last[server], now[server]
        if slowed.state.factors.capacity < 0.75 * before.state.factors.capacity:
            assert slowed.state.smoothed == slowed.explanation.target < before.state.smoothed, (
                cycle,
                slowed,
            )
            return
    raise AssertionError("the slowed server's capacity never fell")


@pytest.mark.xfail(
    strict=True,
    reason="the group's shape learns a slowed server's own slow steps as work: its slowness "
    "settles at 3.1-3.6x of a 4x slowdown (docs/weights.md, 'Smoothed, falling fast')",
)
def test_a_server_slowed_under_steady_load_reads_its_whole_slowdown() -> None:
    """Four servers under a steady load (the work in a reading wanders 25%, not 2-40x as in
    ``reading``); one slows 4x, and over a 10-cycle window its readings fill with slow steps
    whose work has tripled (its prompts pile up). Twenty-five to thirty cycles on, its
    slowness is the slowdown, 4x within 8%: its slow steps carried more work, and the line
    read against it must not take the slowdown for that work (fitted without the servers
    already read slower than the band, the shape gives 3.8-3.9x here; today it gives
    3.1-3.6x)."""
    decode_s, per_token_s = 0.011, 0.00024
    for seed in range(4):
        rng = np.random.default_rng(seed)
        n = 4
        last = Speed(
            slowness=np.full(n, np.nan),
            recent=np.full(n, np.nan),
            noise=np.full(n, np.nan),
            fit=np.full((5, n), np.nan),
            reference_step=np.full(n, np.nan),
            group_noise=np.full(n, np.nan),
            slowed=np.zeros(n, dtype=np.bool_),
        )
        settled = []
        for cycle in range(70):
            work = 65.0 * np.exp(rng.normal(0.0, 0.25, n))
            slower = np.ones(n)
            if cycle >= 40:
                filled = min(1.0, (cycle - 39) / 10)  # the share of the window that is slow
                work[0] = work[0] * (1.0 - filled) + 200.0 * filled
                slower[0] = 1.0 + 3.0 * filled
            step = slower * (decode_s + per_token_s * work) * np.exp(rng.normal(0.0, 0.1, n))
            last = read_speed(
                step=step,
                work=work,
                group=np.zeros(n, dtype=np.bool_),
                last=last,
                alpha=0.05,
                recent_alpha=0.3,
                drop=0.3,
            )
            if cycle >= 65:
                settled.append(float(np.exp(last.slowness[0])))
        assert min(settled) >= 4.0 * 0.92, (seed, settled)


def test_pooling_a_large_pool_on_a_grid_gives_the_pair_by_pair_means() -> None:
    rng = np.random.default_rng(3)
    values = np.concatenate((rng.normal(0.0, 0.1, 600), rng.normal(0.65, 0.1, 400)))
    width2 = 0.02
    kernel = np.exp(-((values[:, None] - values[None, :]) ** 2) / (2.0 * width2))
    exact = kernel @ values / kernel.sum(axis=1)
    assert np.abs(kernel_mean(values, width2=width2) - exact).max() < 0.01 * np.sqrt(width2)


def test_a_burst_of_missed_ttft_moves_the_slo_factor_by_a_few_percent() -> None:
    """Two servers meet their target; one of them misses it for five windows. The queue
    answers a burst; the SLO factor, averaged, gives up a few percent, not 30%."""
    policy = WeightPolicy()
    pool = Pool(name="p", weights=policy)
    eps = [endpoint(1), endpoint(2)]
    previous: dict[str, WeightDecision] = {}
    lowest = 1.0
    for cycle in range(120):
        at = NOW + cycle
        samples = {}
        for e in eps:
            missed = e is eps[0] and 60 <= cycle < 65
            samples[e.address] = Sample.build(
                address=e.address,
                values=[
                    (Signal.DECODE_STEP_S, DECODE_S),
                    (Signal.SLO_TTFT, 0.0 if missed else 1.0),
                ],
                observed_at=at,
                source="test",
            )
        previous = compute_weights(
            pool=pool, endpoints=eps, samples=samples, previous=states_of(previous), now=at
        )
        lowest = min(lowest, previous[eps[0].address].state.factors.slo)
        assert previous[eps[1].address].state.factors.slo == 1.0
    assert 1.0 - policy.slo_coefficient * 5 * policy.slo_alpha * 1.01 <= lowest < 1.0, lowest


def test_a_pool_that_misses_its_target_alike_keeps_its_weights() -> None:
    """Every server misses its TTFT target as often as the others: moving load between them
    helps nobody, so the SLO factor stays 1 for all, whatever the level."""
    pool = Pool(name="p")
    eps = [endpoint(1), endpoint(2), endpoint(3)]
    previous: dict[str, WeightDecision] = {}
    for cycle in range(100):
        at = NOW + cycle
        compliance = 0.9 if cycle < 50 else 0.4
        samples = {
            e.address: Sample.build(
                address=e.address,
                values=[(Signal.DECODE_STEP_S, DECODE_S), (Signal.SLO_TTFT, compliance)],
                observed_at=at,
                source="test",
            )
            for e in eps
        }
        previous = compute_weights(
            pool=pool, endpoints=eps, samples=samples, previous=states_of(previous), now=at
        )
        assert [d.state.factors.slo for d in previous.values()] == [1.0, 1.0, 1.0]
