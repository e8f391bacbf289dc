"""An endpoints-file edit reaches Envoy without waiting for a reconcile period, and a burst of
edits is one push (real control-plane process, real Envoy)."""

from __future__ import annotations

import asyncio
import os
import re
import time

import pytest
import yaml

from e2e.stack import EchoStack, weighted_config

pytestmark = pytest.mark.serial  # edits timed against a 10 ms quiet window and 1-2 s bounds

PERIOD_S = 30  # no periodic reconcile can happen while a test runs
MAX_DELAY_S = 1.0  # watch.max_delay_ms here: a burst longer than this is two pushes, by design


def endpoints_text(stack: EchoStack, weights: list[int]) -> str:
    data = {
        "endpoints": [
            {"address": stack.backends.address(i), "weight": w} for i, w in enumerate(weights)
        ]
    }
    return yaml.safe_dump(data)


def save(stack: EchoStack, text: str) -> None:
    """Rewrite ``eps.yaml`` as an editor saves: a new file renamed over the old one."""
    path = stack.workdir / "eps.yaml"
    scratch = path.with_name(".eps.yaml.swp")
    scratch.write_text(text)
    os.replace(scratch, path)


def endpoints_file(stack: EchoStack, weights: list[int]) -> None:
    save(stack, endpoints_text(stack, weights))


async def start(stack: EchoStack, weights: list[int]) -> None:
    endpoints_file(stack, weights)
    config = weighted_config(stack, weights)
    pool = {k: v for k, v in config["pools"][0].items() if k != "endpoints"}
    config["pools"] = [{**pool, "endpoints_file": "eps.yaml"}]
    config["signals"] = {"reconcile_period_s": PERIOD_S}
    # The longest wait (200 ms by default) is raised past a slow machine's 100 saves (~1-2 ms
    # each), so the burst tests the quiet window alone.
    config["watch"] = {"max_delay_ms": int(MAX_DELAY_S * 1000)}
    await stack.start(config)


async def eds_responses(stack: EchoStack) -> float:
    metrics = await stack.control_plane.metrics()
    found = re.search(r'xds_control_ads_responses_total\{type="EDS"\} ([0-9.]+)', metrics)
    return float(found.group(1)) if found else 0.0


async def wait_weights(stack: EchoStack, weights: list[int], *, timeout: float) -> float:
    """Seconds until Envoy runs ``weights``; fails after ``timeout``."""
    want = {stack.backends.address(i): w for i, w in enumerate(weights)}
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if await stack.envoy_weights() == want:
            return time.monotonic() - start
        await asyncio.sleep(0.01)
    raise AssertionError(f"Envoy runs {await stack.envoy_weights()}, not {want}")


async def test_an_endpoints_edit_reaches_envoy_within_a_second(stack: EchoStack) -> None:
    await start(stack, [10, 10])
    await wait_weights(stack, [10, 10], timeout=10)
    for weight in (70, 3, 55):
        endpoints_file(stack, [10, weight])
        took = await wait_weights(stack, [10, weight], timeout=1.0)
        assert took < 1.0


def burst(stack: EchoStack, texts: list[str]) -> tuple[float, float]:
    """Save each text in turn as fast as this process can; the longest gap between saves and
    the whole burst's length."""
    first = last = time.monotonic()
    gaps = [0.0]
    for text in texts:
        save(stack, text)
        now = time.monotonic()
        gaps.append(now - last)
        last = now
    return max(gaps), last - first


async def test_a_hundred_edits_in_50_ms_are_one_eds_push(stack: EchoStack) -> None:
    await start(stack, [10, 10])
    await wait_weights(stack, [10, 10], timeout=10)
    for attempt in range(3):  # a busy machine may stall the writer past the quiet window
        # Weights stay in 1..100 (beyond is a bad entry, kept out); each try ends elsewhere.
        weights = [[10, 1 + (n + 33 * attempt) % 100] for n in range(100)]
        texts = [endpoints_text(stack, w) for w in weights]  # the editor's work, not timed
        await asyncio.sleep(0.5)
        before = await eds_responses(stack)
        envoy_before = (await stack.envoy.stats())["cluster.chat.update_success"]
        gap, took = burst(stack, texts)  # a save takes ~1-2 ms here
        await wait_weights(stack, weights[-1], timeout=2.0)
        # Every save within the 10 ms quiet window of the one before, and the whole burst
        # inside the longest wait (past it, the watcher reconciles mid-burst by design).
        if gap < 0.01 and took < MAX_DELAY_S:
            break
    else:
        pytest.fail(
            f"no burst of 100 saves without a 10 ms gap, inside {MAX_DELAY_S} s, in 3 tries "
            f"(last: gap {gap:.3f} s, burst {took:.3f} s)"
        )
    await asyncio.sleep(0.5)  # room for a late second push
    assert await eds_responses(stack) - before == 1
    assert (await stack.envoy.stats())["cluster.chat.update_success"] - envoy_before == 1
