"""One measured point: a policy at one offered rate, from cold caches, with timed events."""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

import aiohttp
import structlog

from xds_lab.bench.capacity_judge import keep_up_share
from xds_lab.bench.ideal import IdealRoute
from xds_lab.bench.lag import lag_flag
from xds_lab.bench.metrics import point_metrics, prefix_hit_ratio
from xds_lab.bench.policies import Policy
from xds_lab.bench.scenario import Scenario
from xds_lab.bench.sim_probe import read_fleet_lag
from xds_lab.bench.stack import BenchStack, eds_responses, write_policy_config
from xds_lab.loadgen import LoadSpec, Slo, build_requests, run_load
from xds_lab.loadgen.runner import LoadRun

__all__ = ["load_spec", "run_point"]

_log = structlog.get_logger(__name__)
_SAMPLE_S = 1.0
"""Weights are read from Envoy once a second: the engine's reconcile period."""


def load_spec(scenario: Scenario, *, rate_rps: float, seconds: float, seed: int) -> LoadSpec:
    """The scenario's workload at ``rate_rps`` (wall clock) for ``seconds``."""
    return LoadSpec.model_validate(
        {
            **scenario.workload,
            "rate": rate_rps,
            "requests": max(1, round(rate_rps * seconds)),
            "seed": seed,
        }
    )


async def _sample_weights(stack: BenchStack, start: float, out: list[dict[str, Any]]) -> None:
    while True:
        try:
            weights = await stack.envoy_weights()
            out.append({"t": round((time.monotonic() - start), 2), "weights": weights})
        except Exception as exc:  # a missed sample is a gap in a plot, not a failed point
            _log.debug("weight sample failed", error=str(exc))
        await asyncio.sleep(_SAMPLE_S)


async def _events(
    stack: BenchStack, scenario: Scenario, policy: Policy, added: set[str]
) -> list[dict[str, Any]]:
    done: list[dict[str, Any]] = []
    start = time.monotonic()
    for event in sorted(scenario.events, key=lambda e: e.at_s):
        await asyncio.sleep(max(0.0, start + event.at_s * scenario.time_scale - time.monotonic()))
        if event.slowdown is not None:
            await stack.backends.slow_down(event.server, event.slowdown)
        if event.add:
            added.add(event.server)  # the ideal router reads this set; Envoy, the config
            if policy.through_envoy:
                write_policy_config(stack, scenario=scenario, policy=policy, added=frozenset(added))
        done.append({"at_s": event.at_s, "server": event.server, **event.model_dump()})
        _log.info("event", server=event.server, slowdown=event.slowdown, add=event.add)
    return done


async def _send(
    stack: BenchStack, *, scenario: Scenario, policy: Policy, plan: list[Any], added: set[str]
) -> LoadRun:
    """Through Envoy, or (the ideal reference) straight to the server the fleet names."""
    timeout_s = scenario.request_timeout_s * scenario.time_scale
    if policy.via != "ideal":
        return await run_load(stack.url, plan, timeout_s=timeout_s)
    fleet = stack.backends
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
        route = IdealRoute(
            session=session,
            control_url=fleet.control_url,
            addresses=dict(fleet.addresses),
            servers=lambda: scenario.pool_servers(added=frozenset(added)),
            tpot_s=scenario.slo.tpot_s * scenario.time_scale,
        )
        return await run_load("", plan, timeout_s=timeout_s, session=session, route=route)


async def run_point(
    stack: BenchStack,
    *,
    scenario: Scenario,
    policy: Policy,
    rate_rps: float,
    seed: int,
    seconds: float | None = None,
) -> dict[str, Any]:
    """Reset the fleet, offer ``rate_rps`` for ``seconds`` (the scenario's duration by default)
    through ``policy``'s stack, measure everything, and flag the point if either process fell
    behind real time (``lag.lag_flag``)."""
    ts = scenario.time_scale
    envoy = policy.through_envoy
    await stack.backends.reset()
    plan = build_requests(
        load_spec(
            scenario, rate_rps=rate_rps, seconds=(seconds or scenario.duration_s) * ts, seed=seed
        )
    )
    counters_before = await stack.backends.counters()
    eds_before = await eds_responses(stack) if envoy else 0.0
    await read_fleet_lag(stack.backends.control_url)  # start the fleet's lag window here
    timeline: list[dict[str, Any]] = []
    added: set[str] = set()
    start = time.monotonic()
    events = asyncio.create_task(_events(stack, scenario, policy, added), name="bench-events")
    tasks: list[asyncio.Task[Any]] = [events]
    if envoy:
        sampler = _sample_weights(stack, start, timeline)
        tasks.append(asyncio.create_task(sampler, name="bench-weights"))
    try:
        run = await _send(stack, scenario=scenario, policy=policy, plan=plan, added=added)
        applied = await events
    finally:
        for task in tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
    lags = {"loadgen": run.loop_lag, "fleet": await read_fleet_lag(stack.backends.control_url)}
    counters_after = await stack.backends.counters()
    eds_after = await eds_responses(stack) if envoy else 0.0
    # Rates over the nominal window (requests / rate), not the last arrival: a Poisson run's
    # last arrival falls early or late by chance, which would move req/s above the offered rate.
    span = len(plan) / rate_rps if plan else 0.0
    slo = Slo(ttft_s=scenario.slo.ttft_s, tpot_s=scenario.slo.tpot_s)
    metrics = point_metrics(run.results, duration_s=max(span, 1e-9), slo=slo, time_scale=ts)
    metrics.update(
        {
            "offered_rps": rate_rps * ts,
            "prefix_hit_ratio": prefix_hit_ratio(counters_before, counters_after),
            "eds_pushes": eds_after - eds_before,
            "wall_s": round(run.duration_s, 2),
            "loadgen_max_lag_s": round(run.max_lag_s, 4),
            "keep_up_share": keep_up_share(
                run.results,
                window_s=span,
                slo=Slo(ttft_s=scenario.slo.ttft_s * ts, tpot_s=scenario.slo.tpot_s * ts),
            ),
            "loop_lag": lags,
            "lag_flag": lag_flag(lags),
            "events": applied,
            "weights": timeline,
        }
    )
    return metrics
