"""Weights that hold still: a dead band from each weight's measured noise, and capacity read
from the decode step net of the prefill stalls in it."""

from __future__ import annotations

import random

import numpy as np

from xds_control.config import Pool, WeightPolicy
from xds_control.discovery import Endpoint
from xds_control.engine import WeightDecision, compute_weights, states_of
from xds_control.engine.stability import publish
from xds_control.signals import Sample, Signal

NOW = 1_000_000.0


def endpoint(i: int) -> Endpoint:
    return Endpoint(address=f"10.0.0.{i}:8000", host=f"10.0.0.{i}", port=8000, weight=10)


def sample(address: str, *, at: float, **values: float) -> Sample:
    return Sample.build(
        address=address,
        values=[(Signal(k), v) for k, v in values.items()],
        observed_at=at,
        source="test",
    )


def one(value: float) -> np.ndarray:
    return np.array([value])


def test_a_move_inside_three_standard_deviations_of_measured_noise_is_held() -> None:
    policy = WeightPolicy()  # hysteresis 0.15: 9 at a weight of 60

    def move_to(smoothed: float) -> int:
        out = publish(
            smoothed=one(smoothed),
            published=one(60.0),
            candidate_before=one(60.0),
            candidate_since=one(NOW),
            mean_before=one(60.0),
            spread_before=one(25.0),  # the weight's noise: 5
            measured=np.array([True]),
            alpha=one(0.03),
            now=NOW,
            policy=policy,
        )
        return int(out.weight[0])

    assert move_to(72.0) == 60  # past the 15% band, inside 3 x 5
    assert move_to(80.0) == 80  # a real change is published at once


def published_under_noise(
    true: np.ndarray, *, noise_sd: np.ndarray, seed: int, cycles: int
) -> list[np.ndarray]:
    """Every cycle's published weights of servers whose true weights are ``true``, each cycle
    read with independent Gaussian noise of ``noise_sd`` and smoothed as the engine does."""
    policy = WeightPolicy()
    rng = random.Random(seed)
    n = true.shape[0]
    alpha = np.full(n, 1.0 - np.exp(-1.0 / policy.settle_s))
    published, candidate, since = np.full(n, np.nan), np.full(n, np.nan), np.full(n, NOW)
    mean, spread = np.full(n, np.nan), np.full(n, np.nan)
    smoothed = true.copy()
    history = []
    for cycle in range(cycles):
        noise = np.array([rng.gauss(0.0, sd) for sd in noise_sd])
        smoothed = smoothed + policy.ewma_alpha * (true + noise - smoothed)
        out = publish(
            smoothed=smoothed,
            published=published,
            candidate_before=candidate,
            candidate_since=since,
            mean_before=mean,
            spread_before=spread,
            measured=np.ones(n, dtype=bool),
            alpha=alpha,
            now=NOW + cycle,
            policy=policy,
        )
        published, candidate, since = out.weight, out.candidate, out.candidate_since
        mean, spread = out.mean, out.spread
        history.append(published.copy())
    return history


def test_identical_noisy_servers_settle_on_one_level() -> None:
    """Four servers with the same true weight and independent noise (sd 6 around 62): each
    ends on the level of the common mean, and after the first minute they hardly move."""
    n = 4
    history = published_under_noise(np.full(n, 62.0), noise_sd=np.full(n, 6.0), seed=7, cycles=600)
    late = np.array(history[60:])
    moves = int(np.sum(late[1:] != late[:-1]))
    assert moves <= 9 * n, f"{moves} moves in 9 steady minutes"  # about one a minute
    final = history[-1]
    assert final.max() - final.min() <= WeightPolicy().quantum, final


def test_peers_between_two_levels_end_on_one() -> None:
    """Two fast and two slow servers, the slow pair's true weight 22.5, halfway between two
    quanta, each reading with independent noise (6.7% of its level): however the noise falls,
    each pair ends on one level, not one server a quantum above its twin (a split the pair's
    pooled average alone never closes: each sits within a quantum of it)."""
    true = np.array([88.0, 88.0, 22.5, 22.5])
    for seed in range(10):
        final = published_under_noise(true, noise_sd=0.067 * true, seed=seed, cycles=300)[-1]
        assert final[0] == final[1], (seed, final)
        assert final[2] == final[3], (seed, final)


def test_prefill_stalls_do_not_read_as_a_slower_gpu() -> None:
    """Two identical GPUs decode in 20 ms a step; one also prefills a long prompt load that
    stalls its decodes (0.1 ms per prompt token, a varying load), so its mean time between
    tokens swings between 20 ms and half as much again. Its capacity is read as the same."""
    pool = Pool(name="p")
    eps = [endpoint(1), endpoint(2)]
    rng = random.Random(3)
    previous: dict[str, WeightDecision] = {}
    for cycle in range(120):
        at = NOW + cycle
        running = 20.0
        ratio = rng.uniform(0.0, 5.0)  # prompt tokens per output token, this window
        stalled = 0.020 + 0.0001 * running * ratio
        samples = {
            eps[0].address: sample(eps[0].address, at=at, decode_step_s=0.020, running=running),
            eps[1].address: sample(
                eps[1].address, at=at, decode_step_s=stalled, running=running, prefill_ratio=ratio
            ),
        }
        previous = compute_weights(
            pool=pool, endpoints=eps, samples=samples, previous=states_of(previous), now=at
        )
    clean, busy = (previous[e.address].explanation.capacity_estimate for e in eps)
    assert clean is not None
    assert busy is not None
    assert abs(busy / clean - 1.0) <= 0.1, (clean, busy)
    weights = [previous[e.address].weight for e in eps]
    assert weights[1] >= 0.9 * weights[0], weights


def test_a_slowed_server_is_not_read_as_prefill_stalls() -> None:
    """A server slows down 4x (every step, prefill and decode) under a prompt-heavy load it
    has been fitted on: it now runs more requests at once, so its prefill work grows with its
    step. Fitted together, the two regimes would read as one steep slope and the slowdown as
    stall; the reading is off the fitted line, so the fit starts afresh and the capacity falls
    within a few cycles, and comes back when the server does."""
    pool = Pool(name="p")
    eps = [endpoint(1), endpoint(2)]
    rng = random.Random(5)
    previous: dict[str, WeightDecision] = {}
    estimates: list[float] = []
    for cycle in range(150):
        at = NOW + cycle
        slow = 4.0 if 60 <= cycle < 100 else 1.0
        samples = {}
        for e in eps:
            running = (20.0 if e is eps[0] else 20.0 * (1.0 + 0.5 * (slow > 1.0))) * rng.uniform(
                0.8, 1.2
            )
            ratio = rng.uniform(0.5, 2.0)
            factor = slow if e is eps[1] else 1.0
            step = factor * (0.020 + 0.0002 * running * ratio)
            samples[e.address] = sample(
                e.address, at=at, decode_step_s=step, running=running, prefill_ratio=ratio
            )
        previous = compute_weights(
            pool=pool, endpoints=eps, samples=samples, previous=states_of(previous), now=at
        )
        estimate = previous[eps[1].address].explanation.capacity_estimate
        assert estimate is not None
        estimates.append(estimate)
    healthy = estimates[59]
    assert max(estimates[66:100]) < 0.5 * healthy, (healthy, estimates[60:70])
    assert estimates[-1] > 0.7 * healthy, (healthy, estimates[-10:])
