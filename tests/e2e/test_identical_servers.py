"""Identical servers at steady load: the weight engine should give them one weight and leave
it alone. Not in the timing lane: it is a strict expected failure (the flaw it names), and
load beside it can only widen the gap it measures."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from e2e.engine_stack import SimStack, engine_config, load_in_background, scaled_engine
from e2e.test_weight_engine import STEADY_SCALE, engine_stack, published

__all__ = ["engine_stack"]  # the fixture, shared with the engine's other tests


@pytest.mark.xfail(
    strict=True,
    reason="known flaw: each server's share of a steady load wanders (MAGLEV over random "
    "keys), and its queue, TTFT compliance and prefill stalls follow its share for tens of "
    "seconds, longer than the dead band's average: identical A100s end 15-25% apart and "
    "6-9 pushes a minute (3 runs), against 10% and 2",
)
async def test_identical_servers_at_steady_load_end_within_10_percent_of_each_other(
    engine_stack: Callable[..., SimStack],
) -> None:
    # Four A100s at about 80% of what they serve of the benchmark's chat traffic (730 prompt,
    # 150 output tokens): prefills stall decodes, and each server's share of the stalls
    # follows its share of the traffic, which its weight sets.
    scale = STEADY_SCALE
    stack = engine_stack(profiles=["vllm-a100"] * 4, time_scale=scale)
    signals, weights = scaled_engine(
        time_scale=scale,
        signals={"scrape": {"enabled": True, "interval_s": 0.5}, "reconcile_period_s": 1.0},
        weights={},
    )
    await stack.start(engine_config(stack, signals=signals, weights=weights))
    load_in_background(
        stack, rate=7.0 / scale, seconds=200 * scale, input_mean=730, output_mean=150
    )
    await asyncio.sleep(90 * scale)
    before = published(await stack.control_plane.metrics())
    history = []
    for _ in range(60):
        await asyncio.sleep(1 * scale)
        history.append(await stack.envoy_weights())
    pushes = published(await stack.control_plane.metrics()) - before
    last = history[-1]
    assert max(last.values()) <= 1.1 * min(last.values()), f"identical servers: {last}"
    assert pushes <= 2, f"{pushes} weight pushes in a steady minute: {history[::10]}"
