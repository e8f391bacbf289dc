"""An endpoints-file edit reaches Envoy without waiting for a reconcile period, and a burst of
edits is one push (real control-plane process, real Envoy)."""

from __future__ import annotations

import asyncio
import os
import re
import time

import yaml

from e2e.stack import EchoStack, weighted_config

PERIOD_S = 30  # no periodic reconcile can happen while a test runs


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


async def test_a_hundred_edits_in_50_ms_are_one_eds_push(stack: EchoStack) -> None:
    await start(stack, [10, 10])
    await wait_weights(stack, [10, 10], timeout=10)
    await asyncio.sleep(0.5)
    before = await eds_responses(stack)
    envoy_before = (await stack.envoy.stats())["cluster.chat.update_success"]
    texts = [endpoints_text(stack, [10, 1 + n]) for n in range(100)]  # the editor's work
    start_s = time.monotonic()
    for text in texts:  # a save takes ~1-2 ms here: each well inside the 10 ms quiet window
        save(stack, text)
    assert time.monotonic() - start_s < 0.2
    await wait_weights(stack, [10, 100], timeout=2.0)
    await asyncio.sleep(0.5)  # room for a late second push
    assert await eds_responses(stack) - before == 1
    assert (await stack.envoy.stats())["cluster.chat.update_success"] - envoy_before == 1
