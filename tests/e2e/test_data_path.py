"""Observations from the data path through real Envoy: every request Envoy sends to a simulated
server comes back to the control plane in Envoy's access log, and ``/v1/weights?explain=1``
shows, per endpoint, how many it served, at what rate, and how fast it streamed: the slow
server (an L4) streams each byte slower than the fast one (an H100). Servers with no metrics
at all get their weights from those readings alone, and a slow one is read while its first
answers still stream."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from e2e.engine_stack import SimStack, engine_config, sim_stack
from e2e.stack import eventually
from xds_lab.loadgen.runner import run_load
from xds_lab.loadgen.workloads import LoadSpec, build_requests
from xds_lab.sim.faults import FaultUpdate

SIGNALS = {
    "scrape": {"enabled": True, "interval_s": 0.5},
    "reconcile_period_s": 0.5,
    "data_path": {"enabled": True, "window_s": 60},
}
RATE, SECONDS = 10.0, 6.0


def _streamed_load(*, seed: int) -> LoadSpec:
    """RATE requests/s for SECONDS, short streamed chats."""
    return LoadSpec(
        rate=RATE,
        requests=int(RATE * SECONDS),
        seed=seed,
        input_mean=100,
        output_mean=30,
        output_cap=60,
        stream_fraction=1.0,
    )


def _inputs(view: dict[str, Any], address: str) -> dict[str, Any]:
    decision = next(d for d in view["pools"]["chat"] if d["address"] == address)
    inputs: dict[str, Any] = decision["inputs"]
    return inputs


async def test_each_endpoint_s_requests_rate_and_streaming_speed_show_in_explain(
    tmp_path: Path,
) -> None:
    stack: SimStack = sim_stack(tmp_path, profiles=["vllm-h100", "vllm-l4"])
    try:
        await stack.start(engine_config(stack, signals=SIGNALS, weights={}))
        spec = _streamed_load(seed=3)
        run = await run_load(stack.url, build_requests(spec), timeout_s=60)
        served = Counter(r.server for r in run.results if r.server and r.ok)
        assert sum(served.values()) == spec.requests, run.results[:3]
        addresses = stack.backends.addresses

        async def all_counted() -> bool:
            view = await stack.control_plane.get_json("/v1/weights?explain=1")
            for name, address in addresses.items():
                counted = _inputs(view, address).get("datapath_requests", {}).get("value")
                if counted != served[name]:
                    return False
            return True

        await eventually(all_counted, timeout=20, what="every request in the data path")
        read_at = time.monotonic()
        view = await stack.control_plane.get_json("/v1/weights?explain=1")
        fast, slow = _inputs(view, addresses["s0"]), _inputs(view, addresses["s1"])
        for name, inputs in (("s0", fast), ("s1", slow)):
            assert inputs["datapath_rate"]["source"] == "data_path"
            # The requests over the time since the server's first answer ended (the window is
            # longer): the rate counts from the endpoint's first entry, which a loaded machine
            # delays well after the load began (the slow server's first answer most).
            first_end = min(r.started + r.e2e_s for r in run.results if r.server == name)
            expected = served[name] / (read_at - first_end)
            assert inputs["datapath_rate"]["value"] == pytest.approx(expected, rel=0.35), name
            assert inputs["datapath_error_ratio"]["value"] == 0
            assert inputs["datapath_ttfb_s"]["value"] > 0
            assert inputs["datapath_inflight"]["value"] > 0
            # Envoy logs the request body's size: the prompt behind each streamed byte.
            assert inputs["datapath_prompt_ratio"]["value"] > 0
        assert slow["datapath_step_s"]["value"] > 1.5 * fast["datapath_step_s"]["value"]
        # The server's own metrics still arrive beside them (merged samples).
        assert "decode_step_s" in fast
    finally:
        await stack.close()


async def test_servers_with_no_metrics_are_weighed_by_the_data_path_alone(tmp_path: Path) -> None:
    stack: SimStack = sim_stack(
        tmp_path, profiles=["vllm-h100", "vllm-l4"], overrides={"metrics": "none"}
    )
    signals = {**SIGNALS, "scrape": {"enabled": False}}
    try:
        await stack.start(engine_config(stack, signals=signals, weights={}))
        addresses = stack.backends.addresses
        spec = _streamed_load(seed=4)
        run = await run_load(stack.url, build_requests(spec), timeout_s=60)
        assert all(r.ok for r in run.results), [r.error for r in run.results if not r.ok][:3]

        async def weighed() -> bool:
            weights = await stack.envoy_weights()
            return weights.get("s0", 0) > weights.get("s1", 0)

        await eventually(weighed, timeout=20, what="the H100 weighed above the L4")
        view = await stack.control_plane.get_json("/v1/weights?explain=1")
        for address in addresses.values():
            decision = next(d for d in view["pools"]["chat"] if d["address"] == address)
            assert "decode_step_s" not in decision["inputs"]  # nothing but the data path
            assert "capacity: time per response byte (data path)" in decision["reason"]
    finally:
        await stack.close()


async def test_a_server_with_no_metrics_is_weighed_while_its_first_answers_still_stream(
    tmp_path: Path,
) -> None:
    # s1 is 30x slow: each of its answers streams for a minute, longer than any wait here. It
    # must not be weighed as a typical server until one ends: Envoy logs every open stream
    # each second, and its time per byte so far, and whether its first byte came within the
    # TTFT target, are read while it runs.
    stack: SimStack = sim_stack(
        tmp_path, profiles=["vllm-h100", "vllm-h100"], overrides={"metrics": "none"}
    )
    signals = {**SIGNALS, "scrape": {"enabled": False}}
    try:
        stack.backends.servers["s1"].faults.apply(FaultUpdate(slowdown=30))
        await stack.start(engine_config(stack, signals=signals, weights={}))
        s1 = stack.backends.addresses["s1"]
        spec = LoadSpec(
            rate=4.0,
            requests=160,
            seed=5,
            input_mean=200,
            output_mean=150,
            output_sigma=0.0,  # every answer 150 tokens: s1's take 150 x 0.3 s and more
            stream_fraction=1.0,
        )
        started = time.monotonic()
        load = asyncio.create_task(run_load(stack.url, build_requests(spec), timeout_s=120))

        async def slow_one_weighed_down() -> bool:
            weights = await stack.envoy_weights()
            return weights.get("s1", 0) < 0.5 * weights.get("s0", 0)

        await eventually(slow_one_weighed_down, timeout=40, what="s1 weighed below half of s0")
        assert time.monotonic() - started < 45  # s1's first answer cannot have ended yet
        view = await stack.control_plane.get_json("/v1/weights?explain=1")
        inputs = _inputs(view, s1)
        assert inputs.get("datapath_requests", {}).get("value", 0) == 0, inputs
        assert inputs["datapath_step_s"]["source"] == "data_path"
        # In flight from requests that have not ended (none has): one or more, depending on
        # how many s1 drew before its weight fell (a CI run read exactly 1.0).
        assert inputs["datapath_inflight"]["value"] > 0
        # Its first bytes come 2 s in, past the pool's 1 s target, where s0's come in 0.1 s:
        # the SLO factor judges it by what Envoy saw, as it would by its own histogram.
        fast = _inputs(view, stack.backends.addresses["s0"])
        assert inputs["datapath_slo_ttft"]["value"] < 0.5 < fast["datapath_slo_ttft"]["value"]
        decision = next(d for d in view["pools"]["chat"] if d["address"] == s1)
        assert decision["factors"]["slo"] < 1.0
        load.cancel()
    finally:
        await stack.close()
