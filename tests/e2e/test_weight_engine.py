"""The weight engine through real Envoy on a simulated fleet: it reacts, recovers, holds, ramps."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from e2e.engine_stack import (
    SimStack,
    engine_config,
    flood,
    load,
    load_in_background,
    routed,
    scaled_engine,
    sim_stack,
)
from e2e.stack import eventually
from xds_lab.sim.faults import FaultUpdate

pytestmark = pytest.mark.serial  # weights judged under load: not next to another such test

FAST_PATH = {"scrape": {"enabled": True, "interval_s": 0.25}, "reconcile_period_s": 0.5}


@pytest.fixture
async def engine_stack(tmp_path: Path) -> AsyncIterator[Callable[..., SimStack]]:
    stacks: list[SimStack] = []

    def make(**kwargs: Any) -> SimStack:
        workdir = tmp_path / f"stack-{len(stacks)}"  # a test may run two side by side
        workdir.mkdir()
        stacks.append(sim_stack(workdir, **kwargs))
        return stacks[-1]

    try:
        yield make
    finally:
        for stack in stacks:
            await stack.close()


async def test_scrape_path_reacts_to_a_queue_spike_and_traffic_moves_away(
    engine_stack: Callable[..., SimStack],
) -> None:
    stack = engine_stack(profiles=["vllm-h100", "vllm-h100"], overrides={"max_num_seqs": 4})
    await stack.start(engine_config(stack, signals=FAST_PATH, weights={"max_num_seqs": 4}))
    # Two identical servers end up with about equal weights (a noisy first capacity reading can
    # take the capacity EWMA a few tens of seconds to wash out).
    load_in_background(stack, rate=6, seconds=45)

    async def balanced() -> bool:
        weights = await stack.envoy_weights()
        return abs(weights["s0"] - weights["s1"]) <= 15

    await eventually(balanced, timeout=45, what="equal weights on identical servers")
    weights = await stack.envoy_weights()
    before = await load(stack, rate=8, seconds=5)
    assert min(before["s0"], before["s1"]) > 0.25 * sum(before.values()), before

    # A queue spike on s0: slow it down and send it more than its batch slots. Cycles are
    # counted from the first engine cycle whose inputs show the spike (the flood itself takes a
    # moment to build up in this busy test process); the weight must fall within two cycles.
    stack.backends.servers["s0"].faults.apply(FaultUpdate(slowdown=10))
    await flood(stack, "s0", requests=30)
    seen_at = dropped_at = None
    deadline = time.monotonic() + 20
    while dropped_at is None and time.monotonic() < deadline:
        view = await stack.control_plane.get_json("/v1/weights?explain=1")
        s0 = next(
            d for d in view["pools"]["chat"] if d["address"] == stack.backends.addresses["s0"]
        )
        if seen_at is None and s0["inputs"].get("waiting", {}).get("value", 0) >= 10:
            seen_at = view["cycle"]
        if seen_at is not None and s0["weight"] <= weights["s0"] - 20:
            dropped_at = view["cycle"]
        await asyncio.sleep(0.05)
    assert seen_at is not None, "the scrape never showed s0's queue"
    assert dropped_at is not None, "s0 never lost weight"
    assert dropped_at - seen_at <= 1, f"reacted {dropped_at - seen_at + 1} cycles after the spike"

    async def envoy_moved() -> bool:
        now = await stack.envoy_weights()
        return now["s0"] <= 0.2 * now["s1"]

    # Within a few cycles s0 is at a fifth of s1 or less (5-10 against 50-70 here); s1 follows
    # some seconds later, once all the traffic queues on it, so traffic is counted right away.
    await eventually(envoy_moved, what="Envoy to see s0's weight fall")
    decision = (await stack.decisions())["s0"]
    assert decision["factors"]["queue"] < 0.5, decision
    assert decision["inputs"]["waiting"]["value"] >= 10, decision
    # Where Envoy sends requests now (s0's answers, behind its flood at a tenth of its speed,
    # would take a minute to come back).
    after = await routed(stack, rate=16, seconds=3, seed=2)
    assert after["s0"] < 0.3 * sum(after.values()), after


async def test_prometheus_path_slow_server_loses_weight_recovers_and_outage_decays_to_base(
    engine_stack: Callable[..., SimStack],
) -> None:
    stack = engine_stack(profiles=["vllm-h100", "vllm-h100"])
    weights_policy = {"stale_after_s": 3, "hold_s": 10, "decay_s": 4, "settle_s": 3}
    # A cycle every 0.5 s: the signals are Prometheus rates over 10 s, so a shorter cycle reads
    # the same smoothed values more often, and the capacity average wins back a slow server's
    # weight (at capacity_alpha a cycle) in half the time.
    signals = {"rate_window": "10s", "reconcile_period_s": 0.5}
    await stack.start(
        engine_config(stack, signals=signals, weights=weights_policy), prometheus=True
    )
    load_in_background(stack, rate=6, seconds=150)

    async def fresh() -> bool:
        decisions = await stack.decisions()
        return all("decode_step_s" in d["inputs"] for d in decisions.values())

    await eventually(fresh, timeout=40, what="decode step times from Prometheus")
    stack.backends.servers["s0"].faults.apply(FaultUpdate(slowdown=4))

    async def s0_lost_weight() -> bool:
        weights = await stack.envoy_weights()
        return weights["s0"] < 0.6 * weights["s1"]

    await eventually(s0_lost_weight, timeout=40, what="Envoy to show the slow server's weight fall")
    assert (await stack.decisions())["s0"]["factors"]["capacity"] < 0.6

    stack.backends.servers["s0"].faults.clear()

    async def s0_recovered() -> bool:
        weights = await stack.envoy_weights()
        return weights["s0"] >= 0.8 * weights["s1"]

    await eventually(s0_recovered, timeout=40, what="the weight to come back after the fault")

    assert stack.prometheus is not None
    await stack.prometheus.stop()

    async def holding() -> bool:
        view = await stack.control_plane.get_json("/v1/weights")
        reasons = [d["reason"] for d in view["pools"]["chat"]]
        return bool(view["source_error"]) and all(r.startswith("holding") for r in reasons)

    await eventually(holding, what="the engine to hold the last weights once Prometheus is gone")
    held = {name: d["weight"] for name, d in (await stack.decisions()).items()}
    await asyncio.sleep(1.5)
    # Inside hold_s nothing is zeroed or reset: each weight stays at the held smoothed value
    # (a published weight may still settle onto it, at most one quantum away).
    for name, d in (await stack.decisions()).items():
        assert abs(d["weight"] - held[name]) <= 5, (name, d["weight"], held)
        assert d["reason"].startswith("holding"), d["reason"]
    base = 50  # vLLM engine base 1.0 x base_fraction 0.5 x 100

    async def decayed() -> bool:
        weights = await stack.envoy_weights()
        return all(abs(w - base) <= 5 for w in weights.values())

    await eventually(decayed, timeout=30, what="weights to decay to the base weight")
    reasons = {d["reason"] for d in (await stack.decisions()).values()}
    assert any("base" in r for r in reasons), reasons


async def test_new_server_ramps_up_instead_of_taking_its_full_share(
    engine_stack: Callable[..., SimStack],
) -> None:
    stack = engine_stack(profiles=["vllm-h100", "vllm-h100"])
    policy = {"warmup_s": 8, "warmup_start_fraction": 0.1}
    await stack.start(engine_config(stack, signals=FAST_PATH, weights=policy, servers=["s0"]))
    load_in_background(stack, rate=4, seconds=60)
    await asyncio.sleep(2)
    stack.write_config(engine_config(stack, signals=FAST_PATH, weights=policy))

    seen: list[tuple[int, int]] = []
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        weights = await stack.envoy_weights()
        if "s1" in weights:
            seen.append((weights["s1"], weights["s0"]))
            if weights["s1"] >= 0.8 * weights["s0"]:
                break
        await asyncio.sleep(0.25)
    assert seen, "s1 never reached Envoy"
    first_new, first_old = seen[0]
    assert first_new <= 0.4 * first_old, seen  # starts low...
    last_new, last_old = seen[-1]
    assert last_new >= 0.8 * last_old, seen  # ...and ramps to its share
    distinct = sorted({new for new, _ in seen})
    assert len(distinct) >= 3, f"expected a ramp, saw {seen}"


def published(metrics: str) -> float:
    line = next(x for x in metrics.splitlines() if x.startswith("xds_control_snapshots_published"))
    return float(line.split()[-1])


STEADY_SCALE = 0.5
"""The steady minute runs twice as fast as real time: the simulated GPUs at half their step
times, twice the requests per second (the same per cycle and the same queues), and the
engine's clocks (reconcile, scrape, window, settle, warm-up, ...) at half. A cycle sees what a
real one would, so "a minute" is 60 cycles and the bounds are per cycle."""


SETTLE_CYCLES = 90
"""Cycles a fleet settles before its steady minute. Four identical A100s at 80% take that long
for the weights' slow averages, which start from the idle fleet's, to reach the loaded level
they settle on together. (The mixed fleet's capacities once took longer than 60 on a loaded CI
lane, an H100 climbing back from a first reading at 35; the speed fit has learnt its shape
within each server since, which reads such a fleet true in about 26 cycles.)"""


async def _steady_minute(
    stack: SimStack, *, rate: float, input_mean: float, output_mean: float
) -> tuple[float, list[dict[str, int]]]:
    """Serve ``rate`` requests a second (at real speed) through ``stack``'s engine, settle for
    ``SETTLE_CYCLES``, and return the snapshots published in the next 60 cycles and the
    weights Envoy ran each cycle."""
    settle = SETTLE_CYCLES
    scale = STEADY_SCALE
    signals, weights = scaled_engine(
        time_scale=scale,
        signals={"scrape": {"enabled": True, "interval_s": 0.5}, "reconcile_period_s": 1.0},
        weights={},
    )
    await stack.start(engine_config(stack, signals=signals, weights=weights))
    load_in_background(
        stack,
        rate=rate / scale,
        seconds=(settle + 80) * scale,
        input_mean=input_mean,
        output_mean=output_mean,
    )
    await asyncio.sleep(settle * scale)
    before = published(await stack.control_plane.metrics())
    history = []
    for _ in range(60):  # one steady minute: 60 cycles
        await asyncio.sleep(1 * scale)
        history.append(await stack.envoy_weights())
    return published(await stack.control_plane.metrics()) - before, history


async def test_steady_load_holds_weights_still_and_identical_servers_level(
    engine_stack: Callable[..., SimStack],
) -> None:
    """Two fleets side by side, each with an engine and an Envoy of its own, for one steady
    minute each (together, since each takes a minute):

    - a mixed fleet, two H100s and two L4s (an L4's decode step is 3.5x an H100's), under
      light chat traffic: weights near the capacity ratio, a few pushes at most and never
      back to a level a weight left more than once, and each pair within 10%;
    - four identical A100s at about 80% of what they serve of the benchmark's chat traffic
      (730 prompt, 150 output tokens): prefills stall decodes, and each server's share of the
      stalls follows its share of the traffic, which its weight sets. They end within 10% of
      each other, with at most 2 pushes in the minute.
    """
    scale = STEADY_SCALE
    mixed = engine_stack(
        profiles=["vllm-h100", "vllm-h100", "vllm-l4", "vllm-l4"], time_scale=scale
    )
    identical = engine_stack(profiles=["vllm-a100"] * 4, time_scale=scale)
    (mixed_pushes, mixed_history), (identical_pushes, identical_history) = await asyncio.gather(
        _steady_minute(mixed, rate=10, input_mean=200, output_mean=40),
        _steady_minute(identical, rate=7, input_mean=730, output_mean=150),
    )

    # Flapping is a weight going back to a level it left; converging moves are not.
    levels = {name: [w[name] for w in mixed_history] for name in mixed_history[0]}
    changes = {
        name: [a for a, b in itertools.pairwise(seq) if a != b] + [seq[-1]]
        for name, seq in levels.items()
    }
    flips = sum(len(seq) - len(set(seq)) for seq in changes.values())
    # Capacity is read against the pool's common line of step over prefill work, pooled
    # within the noise, and the dead band follows each weight's measured noise: a steady
    # minute moves a weight a few times at most, and never back to a level it left more
    # than once.
    assert mixed_pushes <= 5, f"{mixed_pushes} weight pushes in a steady minute: {changes}"
    assert flips <= 1, f"weights flapped: {changes}"
    assert all(max(s) - min(s) <= 10 for s in changes.values()), f"weights swung: {changes}"
    weights = await mixed.envoy_weights()
    fast = (weights["s0"] + weights["s1"]) / 2
    slow = (weights["s2"] + weights["s3"]) / 2
    assert 2.5 <= fast / slow <= 5.0, weights
    for pair in (("s0", "s1"), ("s2", "s3")):
        alike = [weights[name] for name in pair]
        assert max(alike) <= 1.1 * min(alike), f"identical servers {pair}: {weights}"

    last = identical_history[-1]
    assert max(last.values()) <= 1.1 * min(last.values()), f"identical servers: {last}"
    assert identical_pushes <= 2, (
        f"{identical_pushes} weight pushes in a steady minute: {identical_history[::10]}"
    )

    for stack in (mixed, identical):

        async def envoy_runs_the_engine_weights(stack: SimStack = stack) -> bool:
            decisions = await stack.decisions()
            return {n: d["weight"] for n, d in decisions.items()} == await stack.envoy_weights()

        await eventually(envoy_runs_the_engine_weights, what="Envoy to run the engine's weights")


async def test_failing_server_is_marked_unhealthy_in_eds_not_weighted_zero(
    engine_stack: Callable[..., SimStack],
) -> None:
    stack = engine_stack(profiles=["vllm-h100", "vllm-h100"])
    await stack.start(engine_config(stack, signals=FAST_PATH, weights={}))

    await stack.backends.servers["s1"].update_faults(FaultUpdate(refuse=True))

    async def unhealthy() -> bool:
        return (await stack.envoy_hosts())["s1"].health == "UNHEALTHY"

    await eventually(unhealthy, what="Envoy to see s1 as UNHEALTHY")
    hosts = await stack.envoy_hosts()
    assert hosts["s1"].weight >= 1
    assert hosts["s0"].health == "HEALTHY"
    decision = (await stack.decisions())["s1"]
    assert decision["scrape_failures"] >= 3, decision
    # Envoy stops sending it traffic.
    counts = await load(stack, rate=10, seconds=3)
    assert counts["s1"] == 0, counts
    assert counts["s0"] > 0, counts

    await stack.backends.servers["s1"].clear_faults()

    async def healthy_again() -> bool:
        return (await stack.envoy_hosts())["s1"].health == "HEALTHY"

    await eventually(healthy_again, what="s1 to be HEALTHY again once it answers")
