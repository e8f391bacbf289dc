"""Prometheus stopped, later restarted at the same address, with the weight engine reading
Prometheus only: no request fails; the weights hold, then decay to the base weight; the
outage shows in /metrics and in /v1/weights (``source_error``, each input's ``age_s``); once
Prometheus is back the engine weighs the fleet again."""

from __future__ import annotations

import asyncio
import re
import time
from pathlib import Path
from typing import Any

import pytest

from e2e.engine_stack import SimStack, engine_config
from e2e.stack import eventually
from fault.fleet import fault_stack
from fault.load import SteadyLoad
from fault.proxy import CuttableProxy
from fault.report import record
from xds_lab.harness.prometheus import find_prometheus

pytestmark = [
    pytest.mark.fault,
    pytest.mark.e2e,
    pytest.mark.skipif(find_prometheus() is None, reason="no prometheus binary (PROMETHEUS_BIN)"),
]

QUANTUM = 5
HYSTERESIS = 0.15  # the engine's default band
BASE = 50  # 100 x vLLM's engine base (1.0) x base_fraction (0.5)
HOLD_S = 4.0
DECAY_S = 4.0
WEIGHTS = {
    "stale_after_s": 1.5,
    "hold_s": HOLD_S,
    "decay_s": DECAY_S,
    "settle_s": 2.0,
    "warmup_s": 0,
}


def signals(url: str | None) -> dict[str, Any]:
    return {
        "prometheus_url": url,
        "rate_window": "5s",
        "reconcile_period_s": 0.5,
        "scrape": {"enabled": False},
    }


def unequal(w: dict[str, int]) -> bool:
    """The two H100s clearly above the two L4s: the engine is weighing the fleet."""
    return min(w["s0"], w["s1"]) >= max(w["s2"], w["s3"]) + 2 * QUANTUM


def signal_ages(metrics: str) -> list[float]:
    """Every ``xds_control_signal_age_seconds`` value (one per endpoint and signal)."""
    pattern = r"^xds_control_signal_age_seconds\{[^}]*\} (\S+)$"
    return [float(v) for v in re.findall(pattern, metrics, re.MULTILINE)]


def query_errors(metrics: str) -> float:
    pattern = r'xds_control_signal_queries_total\{[^}]*outcome="error"[^}]*\} (\S+)'
    return sum(float(v) for v in re.findall(pattern, metrics))


async def weights_view(stack: SimStack) -> dict[str, Any]:
    view: dict[str, Any] = await stack.control_plane.get_json("/v1/weights?explain=1")
    return view


async def test_prometheus_outage_holds_then_decays_and_recovers(tmp_path: Path) -> None:
    stack = fault_stack(tmp_path, profiles=["vllm-h100", "vllm-h100", "vllm-l4", "vllm-l4"])
    proxy = CuttableProxy(target=0)
    try:
        # Static weights first: Prometheus needs the fleet up before it can scrape it.
        await stack.start(engine_config(stack, signals=signals(None), weights=WEIGHTS))
        proxy.retarget(await _start_prometheus(stack))
        await proxy.start()
        stack.write_config(engine_config(stack, signals=signals(proxy.url), weights=WEIGHTS))
        async with SteadyLoad(stack.url, rate=10) as load:
            steady: list[dict[str, int]] = []

            async def settled() -> bool:
                steady.append(await stack.envoy_weights())
                recent = steady[-20:]  # 4 s at the poll interval
                return len(recent) == 20 and all(r == recent[-1] for r in recent)

            await eventually(settled, timeout=40, what="engine weights that hold still")
            assert unequal(steady[-1]), steady[-1]
            before = await stack.envoy_weights()
            errors_before = query_errors(await stack.control_plane.metrics())

            assert stack.prometheus is not None
            await stack.prometheus.stop()
            stopped = time.monotonic()
            held: list[dict[str, int]] = []
            # The hold counts from the last reading, which may be a scrape and a reconcile
            # period (~1 s) older than the stop: watch the part of it that surely lies ahead.
            while time.monotonic() - stopped < HOLD_S - 1.5:
                held.append(await stack.envoy_weights())
                await asyncio.sleep(0.2)
            view = await weights_view(stack)
            metrics = await stack.control_plane.metrics()

            async def at_base() -> bool:
                return set((await stack.envoy_weights()).values()) == {BASE}

            await eventually(at_base, timeout=HOLD_S + DECAY_S + 15, what="weights at base")
            decayed_s = time.monotonic() - stopped

            restarted = time.monotonic()
            proxy.retarget(await _start_prometheus(stack))

            async def recovered() -> bool:
                view = await weights_view(stack)
                return view["source_error"] is None and unequal(await stack.envoy_weights())

            await eventually(recovered, timeout=40, what="weights from Prometheus again")
            recover_s = time.monotonic() - restarted
            await asyncio.sleep(1)
        counts = load.counts()
        record(
            "Prometheus stopped, restarted (engine on Prometheus only)",
            counts,
            recover_s=recover_s,
            decayed_to_base_s=round(decayed_s, 2),
        )
        assert counts.failed == 0, (counts, load.failures()[:5])
        # Held while the readings aged through the hold. A move under the hysteresis band
        # that was pending may still be published: the hold keeps its target still, so it
        # settles (``settle_s``), and it is at most the band (15% of the weight) or one
        # quantum. Decay instead of a hold would take a weight of 90 down by ~25 here.
        for name, weight in before.items():
            moved = max(abs(w[name] - weight) for w in held)
            assert moved <= max(QUANTUM, HYSTERESIS * weight), (name, before, held)
        assert view["source_error"], view
        ages = [
            reading["age_s"]
            for decision in view["pools"]["chat"]
            for reading in decision["inputs"].values()
        ]
        assert ages
        assert min(ages) >= HOLD_S - 1.5, ages
        assert query_errors(metrics) > errors_before, metrics
        assert signal_ages(metrics), metrics
        assert min(signal_ages(metrics)) >= HOLD_S - 1.5, signal_ages(metrics)
        assert decayed_s >= HOLD_S, decayed_s
    finally:
        await stack.close()
        await proxy.close()


async def _start_prometheus(stack: SimStack) -> int:
    """A new Prometheus scraping the fleet (ready and scraped once); its port."""
    await stack.start_prometheus(scrape_interval_s=0.5)
    assert stack.prometheus is not None
    return stack.prometheus.port
